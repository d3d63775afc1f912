// SPDX-License-Identifier: Apache-2.0
#include "relay/agent_config.h"

#include <grp.h>

#include <algorithm>
#include <cstdlib>

#include "relay/cluster_key.h"
#include "relay/fail.h"
#include "util/log.h"

namespace mesh::relay {

bool parse_relay_group(const std::string& text, long* gid, std::string* why) {
  *gid = -1;
  if (text.empty()) return true;
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (end != text.c_str() && *end == '\0' && n >= 0) {
    *gid = n;
    return true;
  }
  group g{};
  group* found = nullptr;
  std::vector<char> buf(16384);
  if (getgrnam_r(text.c_str(), &g, buf.data(), buf.size(), &found) != 0 || found == nullptr)
    return fail(why, "NCCL_MESH_RELAY_GROUP=" + text + ": no such group");
  *gid = static_cast<long>(found->gr_gid);
  return true;
}

bool agent_config_from_settings(const Settings& s, const std::vector<topology::Interface>& used,
                                AgentConfig* cfg, std::string* why) {
  cfg->port = static_cast<uint16_t>(s.relay_port);
  cfg->interfaces = used;
  // An emulated host, or a process that plays a host of its own (NCCL_MESH_RELAY_SCOPE=process).
  cfg->bind_interface_addresses = !s.emulate.empty() || s.relay_scope == RelayScope::kProcess;
  cfg->user_timeout_ms = s.tcp_user_timeout_ms;
  cfg->connect_timeout_ms = std::min<int64_t>(s.connect_timeout_ms, 10000);
  cfg->route_wait_ms = s.connect_timeout_ms;
  if (!s.relay_key_file.empty() && !load_cluster_key(s.relay_key_file, &cfg->cluster_key, why)) {
    *why = "NCCL_MESH_RELAY_KEY_FILE: " + *why;
    return false;
  }
  if (!parse_relay_group(s.relay_group, &cfg->allowed_gid, why)) return false;
  std::string bad;
  if (!parse_route_pins(s.relay_via, &cfg->pins, &bad)) {
    MESH_WARN("NCCL_MESH_RELAY_VIA=%s ignored: %s", s.relay_via.c_str(), bad.c_str());
    cfg->pins.clear();
  }
  return true;
}

}  // namespace mesh::relay
