// SPDX-License-Identifier: Apache-2.0
#include "rank_env.h"

#include <cstring>
#include <utility>

extern char** environ;

namespace e2e {
namespace {

bool hasKey(const std::string& var, const std::string& key) {
  return var.size() > key.size() && var.compare(0, key.size(), key) == 0 && var[key.size()] == '=';
}

}  // namespace

const char* Environment::get(const std::string& key) const {
  for (const auto& v : vars_) {
    if (hasKey(v, key)) return v.c_str() + key.size() + 1;
  }
  return nullptr;
}

void Environment::set(const std::string& key, const std::string& value) {
  unset(key);
  vars_.push_back(key + "=" + value);
}

void Environment::unset(const std::string& key) {
  std::erase_if(vars_, [&](const std::string& v) { return hasKey(v, key); });
}

std::vector<std::string> inheritedEnvironment() {
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) vars.emplace_back(*e);
  return vars;
}

std::string emulateValue(const SetSpec& spec, int rank) {
  if (spec.net != "Mesh" || spec.emulate == "none") return "";
  return spec.emulate + ":" + std::to_string(spec.nranks) + ":" + std::to_string(rank);
}

Environment rankEnvironment(const SetSpec& spec, int rank, const std::string& plugin,
                            std::vector<std::string> inherited) {
  Environment env(std::move(inherited));
  // Distinct host ids: NCCL sees N one-GPU nodes, so P2P/SHM are off and all traffic goes
  // through the network transport (abi doc section 9).
  env.set("NCCL_HOSTID", "host" + std::to_string(rank));
  env.set("NCCL_SOCKET_IFNAME", "lo");
  env.set("NCCL_MNNVL_ENABLE", "0");
  // Keeps the plugin loaded across destroy + re-create (NCCL 2.28 unload bug, abi doc 5.5).
  env.set("NCCL_NET_PLUGIN_REF_COUNT", "1");
  // INFO with INIT,NET is what prints "via NET/<name>": the proof of the path taken. INIT also
  // carries NCCL's "TUNER/Plugin: Using ..." and the plugin's tuner decision (INIT|TUNING).
  const char* level = env.get("NCCL_DEBUG");
  if (level == nullptr || (std::strcmp(level, "INFO") != 0 && std::strcmp(level, "TRACE") != 0)) {
    env.set("NCCL_DEBUG", "INFO");
  }
  if (env.get("NCCL_DEBUG_SUBSYS") == nullptr) env.set("NCCL_DEBUG_SUBSYS", "INIT,NET");
  env.unset("NCCL_DEBUG_FILE");
  if (spec.proto == "default") {
    env.unset("NCCL_PROTO");
  } else {
    env.set("NCCL_PROTO", spec.proto);
  }
  if (spec.net != "Mesh") {
    env.set("NCCL_NET_PLUGIN", "none");
    env.set("NCCL_NET", "Socket");
    env.unset("NCCL_MESH_EMULATE");
    return env;
  }
  env.set("NCCL_NET_PLUGIN", plugin);
  // Naming the net makes a plugin load failure an error instead of a silent Socket fallback.
  env.set("NCCL_NET", "Mesh");
  const std::string emulate = emulateValue(spec, rank);
  if (emulate.empty()) {
    env.set("NCCL_MESH_IFNAME", "lo");
    env.unset("NCCL_MESH_EMULATE");
  } else {
    env.set("NCCL_MESH_EMULATE", emulate);
    env.unset("NCCL_MESH_IFNAME");
  }
  // With NCCL_TUNER_PLUGIN unset, NCCL 2.28 loads the tuner from the net plugin's library.
  if (spec.tuner == "none") {
    env.set("NCCL_TUNER_PLUGIN", "none");
    env.unset("NCCL_MESH_TUNER");
  } else {
    env.unset("NCCL_TUNER_PLUGIN");
    env.set("NCCL_MESH_TUNER", spec.tuner);
  }
  return env;
}

}  // namespace e2e
