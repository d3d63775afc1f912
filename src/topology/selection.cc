// SPDX-License-Identifier: Apache-2.0
#include "topology/selection.h"

#include <algorithm>
#include <map>
#include <utility>

namespace mesh::topology {

namespace {

std::string join(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ",") + n;
  return list;
}

std::string label_of(const Interface& itf) {
  return itf.name + " (" + format_prefix(itf.addr) + ")";
}

bool overlaps(const Ipv4Prefix& a, const Ipv4Prefix& b) {
  return in_subnet(a, b.addr) || in_subnet(b, a.addr);
}

// The switch rule: other hosts' addresses that answered ARP on `itf`'s subnet, over every local
// netdev on that subnet, against how many peers cables there can explain. A cable joins this
// host to one other: with k netdevs of this host on the subnet (the halves of one port) the
// peer shows up to k addresses. More than that is a shared segment, i.e. a switch. The kernel's
// table holds only hosts this one has talked to lately: a switch nobody used yet passes.
std::string switch_evidence(const std::vector<Interface>& all, const Interface& itf) {
  std::vector<std::string> netdevs;
  std::vector<uint32_t> others;
  for (const Interface& o : all) {
    if (o.loopback || !overlaps(o.addr, itf.addr)) continue;
    if (std::find(netdevs.begin(), netdevs.end(), o.name) == netdevs.end())
      netdevs.push_back(o.name);
    for (uint32_t n : o.neighbours) {
      const bool local =
          std::any_of(all.begin(), all.end(), [&](const Interface& l) { return l.addr.addr == n; });
      if (!local && std::find(others.begin(), others.end(), n) == others.end()) others.push_back(n);
    }
  }
  if (others.size() <= std::max<size_t>(1, netdevs.size())) return {};
  std::sort(others.begin(), others.end());
  std::string list;
  for (size_t i = 0; i < others.size() && i < 4; ++i)
    list += (list.empty() ? "" : ", ") + format_ipv4(others[i]);
  if (others.size() > 4) list += ", ...";
  const Ipv4Prefix subnet{itf.addr.addr & netmask(itf.addr.prefix), itf.addr.prefix};
  return std::to_string(others.size()) + " other hosts answered ARP on " + format_prefix(subnet) +
         " (" + list + "; the kernel's neighbour table): a switched network, not a cable";
}

// The inclusion list that keeps what is used now and adds `name`: exact names, so "eth1"
// does not also take "eth10".
std::string include_hint(const std::vector<Interface>& used, const std::string& name) {
  std::vector<std::string> names;
  for (const Interface& u : used) {
    if (!u.loopback && std::find(names.begin(), names.end(), u.name) == names.end())
      names.push_back(u.name);
  }
  if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  return "set NCCL_MESH_IFNAME==" + join(names) +
         " (exact names; a list of names turns these automatic rules off)";
}

}  // namespace

const char* left_out_name(LeftOut reason) {
  switch (reason) {
    case LeftOut::kFilter:
      return "filter";
    case LeftOut::kDown:
      return "down";
    case LeftOut::kLoopback:
      return "loopback";
    case LeftOut::kNotACable:
      return "not-a-cable";
    case LeftOut::kDefaultRoute:
      return "default-route";
    case LeftOut::kSwitch:
      return "switch";
  }
  return "?";
}

bool automatic_rule(LeftOut reason) {
  return reason == LeftOut::kNotACable || reason == LeftOut::kDefaultRoute ||
         reason == LeftOut::kSwitch;
}

Selection select_interfaces(const std::vector<Interface>& all, const IfnameFilter& filter) {
  Selection sel;
  const bool named_only = !filter.empty() && !filter.exclude();
  std::vector<const Interface*> loopbacks;
  std::vector<Exclusion> out;
  for (const Interface& itf : all) {
    if (!filter.accepts(itf.name)) {
      out.push_back({itf, LeftOut::kFilter, "excluded by NCCL_MESH_IFNAME",
                     "change NCCL_MESH_IFNAME=" + filter.spec()});
      continue;
    }
    if (!itf.up) {
      out.push_back({itf, LeftOut::kDown, "link is down", "ip link set " + itf.name + " up"});
      continue;
    }
    // Loopback is used only as a fall-back, unless an inclusion list names it explicitly.
    if (itf.loopback && !named_only) {
      loopbacks.push_back(&itf);
      continue;
    }
    if (!named_only) {
      if (!itf.not_a_cable.empty()) {
        out.push_back({itf, LeftOut::kNotACable, itf.not_a_cable + ", not a mesh cable", ""});
        continue;
      }
      if (itf.default_route) {
        out.push_back({itf, LeftOut::kDefaultRoute,
                       "carries the IPv4 default route: the management network, not a mesh "
                       "cable",
                       ""});
        continue;
      }
      if (std::string why = switch_evidence(all, itf); !why.empty()) {
        out.push_back({itf, LeftOut::kSwitch, std::move(why), ""});
        continue;
      }
    }
    sel.used.push_back(itf);
  }
  if (sel.used.empty() && !loopbacks.empty()) {
    sel.loopback_fallback = true;
    for (const Interface* lo : loopbacks) sel.used.push_back(*lo);
  } else {
    for (const Interface* lo : loopbacks) {
      out.push_back({*lo, LeftOut::kLoopback, "loopback, used only when nothing else is",
                     "name it in NCCL_MESH_IFNAME (NCCL_MESH_IFNAME=" + lo->name + ")"});
    }
  }
  // The hints name what ended up used, so they are written once the choice is made.
  for (Exclusion& e : out) {
    if (automatic_rule(e.reason)) e.include = include_hint(sel.used, e.itf.name);
    sel.notes.push_back(label_of(e.itf) + ": " + e.why + "; to use it: " + e.include);
  }
  sel.left_out = std::move(out);
  return sel;
}

std::string describe_missing_cables(const Selection& sel) {
  const bool cable =
      std::any_of(sel.used.begin(), sel.used.end(), [](const Interface& i) { return !i.loopback; });
  if (cable) return {};
  std::string left;
  std::vector<std::string> names;
  for (const Exclusion& e : sel.left_out) {
    if (!automatic_rule(e.reason)) continue;
    left += (left.empty() ? "" : "; ") + label_of(e.itf) + ": " + e.why;
    if (std::find(names.begin(), names.end(), e.itf.name) == names.end())
      names.push_back(e.itf.name);
  }
  if (left.empty()) return {};
  return std::string("no interface looks like a mesh cable, so ") +
         (sel.used.empty() ? "none is used" : "only loopback is used") +
         " and ranks on other hosts cannot be reached. Left out: " + left +
         ". If some of them are cables, name those: NCCL_MESH_IFNAME==" + join(names) +
         " (exact names; keep only the cables)";
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
