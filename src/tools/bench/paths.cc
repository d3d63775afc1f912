// SPDX-License-Identifier: Apache-2.0
#include "paths.h"

#include <fmt/format.h>

#include <cstdlib>

#include "topology/emulated_mesh.h"
#include "topology/ifname_filter.h"

namespace mesh::bench {

LocalNet discover_local_net() {
  LocalNet net;
  const char* spec = std::getenv("NCCL_MESH_IFNAME");
  net.filter_spec = spec != nullptr ? spec : "";
  // The plugin's own view, NCCL_MESH_EMULATE included (a malformed value: the real interfaces;
  // the plugin's init then fails with the WARN that names it).
  std::vector<topology::Interface> all;
  std::string why;
  const char* emulate = std::getenv("NCCL_MESH_EMULATE");
  if (!topology::discover_mesh_interfaces(emulate != nullptr ? emulate : "", &all, &why)) {
    all = topology::discover_interfaces();
  }
  const auto filter = topology::IfnameFilter::parse(net.filter_spec);
  auto selection = topology::select_interfaces(all, filter);
  net.used = std::move(selection.used);
  net.notes = std::move(selection.notes);
  net.loopback_fallback = selection.loopback_fallback;
  net.devices = topology::group_devices(net.used);
  return net;
}

std::string interface_of(const LocalNet& net, uint32_t addr) {
  for (const auto& i : net.used) {
    if (i.addr.addr == addr) return i.name;
  }
  return "";
}

std::string BaselinePath::describe() const {
  if (!ok) return "none (" + why + ")";
  return fmt::format("{} {} -> {}", local_ifname, format_prefix(local), format_ipv4(peer_addr));
}

BaselinePath choose_baseline_path(const LocalNet& me, const std::vector<Ipv4Prefix>& peer_addrs,
                                  int dev) {
  BaselinePath path;
  std::vector<size_t> preferred;
  if (dev >= 0 && static_cast<size_t>(dev) < me.devices.size()) {
    preferred = me.devices[static_cast<size_t>(dev)].members;
  }
  const auto rails = topology::choose_rails(me.used, peer_addrs, preferred);
  path.rails = rails.size();
  if (rails.empty()) {
    path.why = "no local interface shares a subnet with the peer";
    return path;
  }
  const auto& rail = rails.front();
  path.ok = true;
  path.local = rail.local;
  path.peer_addr = rail.peer_addr;
  if (rail.local_index < me.used.size()) path.local_ifname = me.used[rail.local_index].name;
  return path;
}

}  // namespace mesh::bench
