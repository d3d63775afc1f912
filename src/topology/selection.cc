// SPDX-License-Identifier: Apache-2.0
#include "topology/selection.h"

#include <algorithm>
#include <map>
#include <utility>

namespace mesh::topology {

Selection select_interfaces(const std::vector<Interface>& all, const IfnameFilter& filter) {
  Selection sel;
  std::vector<const Interface*> loopbacks;
  for (const Interface& itf : all) {
    const std::string label = itf.name + " (" + format_prefix(itf.addr) + ")";
    if (!filter.accepts(itf.name)) {
      sel.notes.push_back(label + ": excluded by NCCL_MESH_IFNAME");
      continue;
    }
    if (!itf.up) {
      sel.notes.push_back(label + ": link is down");
      continue;
    }
    // Loopback is used only as a fall-back, unless an inclusion list names it explicitly.
    if (itf.loopback && (filter.empty() || filter.exclude())) {
      loopbacks.push_back(&itf);
      continue;
    }
    sel.used.push_back(itf);
  }
  if (sel.used.empty() && !loopbacks.empty()) {
    sel.loopback_fallback = true;
    for (const Interface* lo : loopbacks) sel.used.push_back(*lo);
  } else {
    for (const Interface* lo : loopbacks) {
      sel.notes.push_back(lo->name + " (" + format_prefix(lo->addr) +
                          "): loopback, used only when nothing else is (or name it in "
                          "NCCL_MESH_IFNAME)");
    }
  }
  return sel;
}

int speed_to_one_peer(const std::vector<Interface>& used, const std::vector<size_t>& members) {
  int best = 0;
  for (size_t m : members) {
    // The cable of `m`: every member netdev on an overlapping subnet (the halves of one port),
    // each netdev counted once (several addresses on one netdev are the same link).
    std::vector<std::string> counted;
    int sum = 0;
    for (size_t o : members) {
      const Interface& a = used[m];
      const Interface& b = used[o];
      const bool same_cable = in_subnet(a.addr, b.addr.addr) || in_subnet(b.addr, a.addr.addr);
      if (!same_cable || b.speed_mbps <= 0) continue;
      if (std::find(counted.begin(), counted.end(), b.name) != counted.end()) continue;
      counted.push_back(b.name);
      sum += b.speed_mbps;
    }
    best = std::max(best, sum);
  }
  return best;
}

std::vector<NetDevice> group_devices(const std::vector<Interface>& used) {
  // Key: (has a PCI path, NUMA node). Virtual interfaces form one group of their own.
  std::map<std::pair<bool, int>, NetDevice> groups;
  std::vector<std::pair<bool, int>> order;
  for (size_t i = 0; i < used.size(); ++i) {
    const Interface& itf = used[i];
    const std::pair<bool, int> key{!itf.pci_path.empty(),
                                   itf.pci_path.empty() ? -1 : itf.numa_node};
    auto [it, inserted] = groups.try_emplace(key);
    NetDevice& d = it->second;
    if (inserted) {
      order.push_back(key);
      d.pci_path = itf.pci_path;
      d.numa_node = key.second;
    }
    // One interface can carry several addresses; list its name once.
    const bool named = std::any_of(d.members.begin(), d.members.end(),
                                   [&](size_t m) { return used[m].name == itf.name; });
    d.members.push_back(i);
    if (!named) d.name += (d.name.empty() ? "" : "+") + itf.name;
  }
  for (auto& [key, d] : groups) d.speed_mbps = speed_to_one_peer(used, d.members);
  std::vector<NetDevice> out;
  for (size_t i = 0; i < order.size(); ++i) {
    NetDevice d = std::move(groups[order[i]]);
    d.name = "mesh" + std::to_string(i) + ":" + d.name;
    // NCCL treats speed <= 0 as 10 Gb/s; say so explicitly when no member reports a speed.
    if (d.speed_mbps <= 0) d.speed_mbps = 10000;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<Rail> choose_rails(const std::vector<Interface>& local,
                               const std::vector<Ipv4Prefix>& peer_addrs,
                               const std::vector<size_t>& preferred) {
  std::vector<Rail> rails;
  std::vector<bool> peer_used(peer_addrs.size(), false);
  std::vector<std::string> if_used;
  for (size_t i = 0; i < local.size(); ++i) {
    const Interface& itf = local[i];
    // One rail per netdev: a second address on the same interface is the same cable.
    if (std::find(if_used.begin(), if_used.end(), itf.name) != if_used.end()) continue;
    int pick = -1;
    for (size_t p = 0; p < peer_addrs.size(); ++p) {
      if (!in_subnet(itf.addr, peer_addrs[p].addr)) continue;
      if (!peer_used[p]) {
        pick = static_cast<int>(p);
        break;
      }
      if (pick < 0) pick = static_cast<int>(p);  // reuse a peer address only as a last resort
    }
    if (pick < 0) continue;
    peer_used[static_cast<size_t>(pick)] = true;
    if_used.push_back(itf.name);
    rails.push_back({i, itf.addr, peer_addrs[static_cast<size_t>(pick)].addr});
  }
  // A peer address that is also one of ours (loopback, or a docker0/virbr0 bridge that has the
  // same address on every host) leads back to this host. Such rails are right only for a peer
  // on the same host, which then shares every address; otherwise use the real cables alone.
  auto is_local = [&](uint32_t addr) {
    return std::any_of(local.begin(), local.end(),
                       [&](const Interface& l) { return l.addr.addr == addr; });
  };
  if (std::any_of(rails.begin(), rails.end(),
                  [&](const Rail& r) { return !is_local(r.peer_addr); })) {
    std::erase_if(rails, [&](const Rail& r) { return is_local(r.peer_addr); });
  }
  // Rails on the device NCCL chose stay local to its NUMA node; other devices' rails are used
  // only when the chosen device has no cable to this peer.
  if (!preferred.empty()) {
    std::vector<Rail> mine;
    for (const Rail& r : rails) {
      if (std::find(preferred.begin(), preferred.end(), r.local_index) != preferred.end()) {
        mine.push_back(r);
      }
    }
    if (!mine.empty()) return mine;
  }
  return rails;
}

}  // namespace mesh::topology
