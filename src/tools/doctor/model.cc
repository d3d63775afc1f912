// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/model.h"

#include <cerrno>
#include <cstdlib>

#include "util/ipv4.h"

namespace mesh::doctor {

std::optional<int> parse_gid_index(const std::string& text, std::string* why) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || end == text.c_str() || *end != '\0' || errno != 0) {
    *why = "'" + text + "' is not an integer";
    return std::nullopt;
  }
  if (v < 0 || v > 65535) {
    *why = "'" + text + "' is outside 0..65535";
    return std::nullopt;
  }
  return static_cast<int>(v);
}

Model build_model(const Inventory& inv) {
  Model m;
  m.filter = topology::IfnameFilter::parse(inv.settings.ifname);
  m.selection = topology::select_interfaces(inv.interfaces, m.filter);
  m.devices = topology::group_devices(m.selection.used);
  if (const auto text = inv.getenv(kGidIndexEnv)) {
    m.gid_override = parse_gid_index(*text, &m.gid_override_error);
  }

  for (size_t i = 0; i < inv.interfaces.size(); ++i) {
    const topology::Interface& itf = inv.interfaces[i];
    InterfaceView v;
    v.interface = i;
    for (const topology::Interface& u : m.selection.used) {
      if (u.name == itf.name && u.addr == itf.addr) v.used = true;
    }
    if (!v.used) {
      for (const topology::Exclusion& e : m.selection.left_out) {
        if (e.itf.name != itf.name || !(e.itf.addr == itf.addr)) continue;
        v.excluded_why = e.why;
        v.excluded_reason = topology::left_out_name(e.reason);
        v.include_hint = e.include;
      }
    }
    for (size_t p = 0; p < inv.rdma_ports.size(); ++p) {
      const topology::RdmaPort& port = inv.rdma_ports[p];
      for (const std::string& nd : port.netdevs) {
        if (nd != itf.name) continue;
        v.rdma.push_back({p, topology::select_gid(port, itf.addr.addr, m.gid_override)});
        break;
      }
    }
    m.interfaces.push_back(std::move(v));
  }
  return m;
}

}  // namespace mesh::doctor
