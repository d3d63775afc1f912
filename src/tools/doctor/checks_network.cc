// SPDX-License-Identifier: Apache-2.0
// Checks of the IP layer: usable interfaces, addresses, subnets, MTU, reverse-path filtering.
#include <algorithm>
#include <cstdlib>

#include "tools/doctor/checks.h"
#include "util/device_binding.h"

namespace mesh::doctor {
namespace {

using topology::Interface;

std::string label(const Interface& itf) {
  return itf.name + " (" + format_prefix(itf.addr) + ")";
}

// sysctl(8) writes the dots inside an interface name ("eth0.100") as slashes.
std::string sysctl_key(const std::string& scope, const char* key) {
  std::string s = scope;
  std::replace(s.begin(), s.end(), '.', '/');
  return "net.ipv4.conf." + s + "." + key;
}

int sysctl_int(const Inventory& inv, const std::string& scope, const char* key) {
  const auto v = inv.sysctl("net.ipv4.conf." + scope + "." + key);
  return v ? std::atoi(v->c_str()) : -1;
}

// Up, non-loopback interfaces grouped by overlapping subnet; only groups with two or more
// distinct netdevs are returned (several addresses on one netdev are not multi-homing).
std::vector<std::vector<const Interface*>> shared_subnet_groups(const Inventory& inv) {
  std::vector<const Interface*> cand;
  for (const Interface& itf : inv.interfaces) {
    if (itf.up && !itf.loopback) cand.push_back(&itf);
  }
  std::vector<int> group(cand.size(), -1);
  int ngroups = 0;
  for (size_t i = 0; i < cand.size(); ++i) {
    if (group[i] < 0) group[i] = ngroups++;
    for (size_t j = i + 1; j < cand.size(); ++j) {
      const bool overlap = in_subnet(cand[i]->addr, cand[j]->addr.addr) ||
                           in_subnet(cand[j]->addr, cand[i]->addr.addr);
      if (overlap && group[j] < 0) group[j] = group[i];
    }
  }
  std::vector<std::vector<const Interface*>> out;
  for (int g = 0; g < ngroups; ++g) {
    std::vector<const Interface*> members;
    std::vector<std::string> names;
    for (size_t i = 0; i < cand.size(); ++i) {
      if (group[i] != g) continue;
      members.push_back(cand[i]);
      if (std::find(names.begin(), names.end(), cand[i]->name) == names.end()) {
        names.push_back(cand[i]->name);
      }
    }
    if (names.size() >= 2) out.push_back(std::move(members));
  }
  return out;
}

bool shares_subnet(const Inventory& inv, const Interface& itf) {
  for (const auto& g : shared_subnet_groups(inv)) {
    for (const Interface* m : g) {
      if (m->name == itf.name) return true;
    }
  }
  return false;
}

// The kernel applies max(conf.all, conf.<if>) for arp_ignore, arp_announce and rp_filter.
int effective_sysctl(const Inventory& inv, const std::string& ifname, const char* key) {
  return std::max(sysctl_int(inv, "all", key), sysctl_int(inv, ifname, key));
}

// What the plugin's handshake service does with a socket on `itf`'s address: the plugin's own
// decision (util/device_binding.h) over the inventory instead of getifaddrs and /proc.
DeviceBinding binding_of(const Inventory& inv, const Interface& itf) {
  std::vector<LocalAddress> all;
  for (const Interface& i : inv.interfaces) all.push_back({i.name, i.addr, i.up});
  return decide_device_binding(itf.addr.addr, all, [&](const std::string& n) {
    return effective_sysctl(inv, n, "arp_ignore");
  });
}

std::vector<std::string> distinct_names(const std::vector<const Interface*>& group) {
  std::vector<std::string> names;
  for (const Interface* i : group) {
    if (std::find(names.begin(), names.end(), i->name) == names.end()) names.push_back(i->name);
  }
  return names;
}

std::string subnet_of(const std::vector<const Interface*>& group) {
  uint8_t prefix = 32;
  for (const Interface* i : group) prefix = std::min(prefix, i->addr.prefix);
  return format_prefix({group.front()->addr.addr & netmask(prefix), prefix});
}

}  // namespace

Findings check_mesh_interfaces(const Inventory& inv, const Model& m) {
  const char* id = "mesh-interfaces";
  std::vector<std::string> used;
  for (const Interface& itf : m.selection.used) used.push_back(label(itf));
  if (m.selection.used.empty()) {
    const std::string subject =
        inv.settings.ifname.empty() ? "interfaces" : "NCCL_MESH_IFNAME=" + inv.settings.ifname;
    return {{id, Verdict::kFail, subject,
             "the plugin would use no interface" + (m.selection.notes.empty()
                                                        ? std::string(": no IPv4 interface exists")
                                                        : ": " + join(m.selection.notes, "; ")),
             "give each cable interface an address on its own subnet and bring it up "
             "(ip addr add 198.18.1.1/24 dev IF && ip link set IF up), or fix NCCL_MESH_IFNAME"}};
  }
  const bool only_loopback = std::all_of(m.selection.used.begin(), m.selection.used.end(),
                                         [](const Interface& i) { return i.loopback; });
  if (only_loopback && !m.filter.empty()) {
    return {{id, Verdict::kOk, join(used),
             "only loopback, as NCCL_MESH_IFNAME asks: every rank must run on this host", ""}};
  }
  if (const std::string missing = topology::describe_missing_cables(m.selection);
      !missing.empty()) {
    std::vector<std::string> names;
    for (const topology::Exclusion& e : m.selection.left_out) {
      if (topology::automatic_rule(e.reason) &&
          std::find(names.begin(), names.end(), e.itf.name) == names.end())
        names.push_back(e.itf.name);
    }
    return {{id, Verdict::kWarn, join(used), missing,
             "if some of " + join(names) +
                 " are mesh cables: NCCL_MESH_IFNAME==" + join(names, ",") +
                 " (exact names, only the cables); otherwise give each cable interface an "
                 "address on its own subnet and bring it up"}};
  }
  if (only_loopback) {
    return {{id, Verdict::kWarn, join(used),
             "no cable interface is up with an IPv4 address; the plugin falls back to loopback, "
             "so ranks on other hosts cannot be reached",
             "configure the cable interfaces (address + link up), or set NCCL_MESH_IFNAME=lo to "
             "make a single-host run explicit"}};
  }
  // Say what the automatic rules left out, so a cable they misjudged is seen here.
  std::vector<std::string> automatic;
  for (const topology::Exclusion& e : m.selection.left_out) {
    if (topology::automatic_rule(e.reason))
      automatic.push_back(e.itf.name + " (" + topology::left_out_name(e.reason) + ")");
  }
  return {{id, Verdict::kOk, join(used),
           "the plugin would use " + std::to_string(m.selection.used.size()) + " address(es) as " +
               std::to_string(m.devices.size()) + " NCCL device(s)" +
               (automatic.empty() ? std::string()
                                  : "; left out as not cables: " + join(automatic) +
                                        " (\"Plugin selection\" says why and how to include one)"),
           ""}};
}

Findings check_ipv4_addresses(const Inventory& inv, const Model& m) {
  const char* id = "ipv4-address";
  Findings out;
  for (const Netdev& n : inv.netdevs) {
    if (n.loopback || n.enslaved) continue;
    const bool has_ipv4 = std::any_of(inv.interfaces.begin(), inv.interfaces.end(),
                                      [&](const Interface& i) { return i.name == n.name; });
    if (has_ipv4) continue;
    std::vector<std::string> rdma;
    bool infiniband = false;
    for (const topology::RdmaPort& p : inv.rdma_ports) {
      if (std::find(p.netdevs.begin(), p.netdevs.end(), n.name) != p.netdevs.end()) {
        rdma.push_back(p.device + " port " + std::to_string(p.port));
        infiniband = infiniband || p.link_layer == topology::LinkLayer::kInfiniBand;
      }
    }
    const bool named = !m.filter.empty() && !m.filter.exclude() && m.filter.accepts(n.name);
    std::string why;
    if (!rdma.empty() && infiniband) {
      // IB addresses by LID, but the plugin's handshake and TCP path need IP over IB.
      why = "IPoIB netdev of " + join(rdma) +
            " has no IPv4 address: the plugin needs one for its handshake";
    } else if (!rdma.empty()) {
      why = "carries RDMA " + join(rdma) +
            " but has no IPv4 address: no RoCE v2 GID (::ffff:a.b.c.d) exists for it and the "
            "plugin cannot use it";
    } else if (named) {
      why = "named by NCCL_MESH_IFNAME but has no IPv4 address, so the plugin cannot use it";
    } else if (n.operstate == "up" && !n.pci_path.empty()) {
      why =
          "physical link is up but has no IPv4 address; if it is a mesh cable the plugin "
          "cannot use it";
    } else {
      continue;  // down or virtual and not asked for: not a mesh cable
    }
    out.push_back({id, Verdict::kWarn, n.name, why,
                   "ip addr add 198.18.<cable>.<node>/24 dev " + n.name +
                       "  (one subnet per cable, same subnet on both ends)"});
  }
  if (out.empty()) {
    out.push_back(
        {id, Verdict::kOk, "", "every up physical and RDMA interface has an IPv4 address", ""});
  }
  return out;
}

Findings check_shared_subnets(const Inventory& inv, const Model& m) {
  (void)m;
  const char* id = "shared-subnet";
  Findings out;
  for (const auto& g : shared_subnet_groups(inv)) {
    std::vector<std::string> members, unbound;
    for (const Interface* i : g) {
      members.push_back(label(*i));
      const DeviceBinding b = binding_of(inv, *i);
      if (b.action != DeviceBinding::Action::kBind &&
          std::find(unbound.begin(), unbound.end(), i->name) == unbound.end()) {
        unbound.push_back(i->name + " (arp_ignore=" + std::to_string(b.arp_ignore) + ")");
      }
    }
    const std::string cables =
        " If they are different cables rather than halves of one port, give each its own "
        "subnet: one subnet per cable";
    if (unbound.empty()) {
      out.push_back(
          {id, Verdict::kOk, subnet_of(g) + ": " + join(members),
           "several interfaces on one subnet (the two PCIe halves of a DGX Spark ConnectX-7 "
           "port): the plugin binds each rail's TCP sockets to its own interface "
           "(SO_BINDTODEVICE; the listener too, so replies follow), so both halves carry traffic "
           "in both directions (RDMA: each half is its own RDMA device and GID). Should "
           "setsockopt fail (Linux < 5.7 without CAP_NET_RAW), the plugin WARNs with the policy "
           "routing to add." +
               cables,
           ""});
      continue;
    }
    out.push_back(
        {id, Verdict::kWarn, subnet_of(g) + ": " + join(members),
         "several interfaces on one subnet. For the two PCIe halves of a DGX Spark ConnectX-7 "
         "port the plugin binds each rail's sockets to its own interface, but only where the "
         "interface answers ARP for its own addresses alone; not on " +
             join(unbound) +
             ", so over TCP this host sends everything for the subnet through the interface "
             "the routing table lists first (asymmetric routing; half the port unused; `ip "
             "route get <peer address>` shows which) and strict rp_filter drops the rest." +
             cables,
         "halves of one port: " + halves_sysctl_fix(distinct_names(g)) +
             "  (persist in /etc/sysctl.d/90-nccl-mesh.conf)"});
  }
  if (out.empty()) out.push_back({id, Verdict::kOk, "", "every interface has its own subnet", ""});
  return out;
}

Findings check_local_mtu(const Inventory& inv, const Model& m) {
  (void)inv;
  const char* id = "mtu";
  Findings out;
  std::vector<std::string> names, seen;
  for (const Interface& itf : m.selection.used) {
    if (itf.loopback || itf.mtu <= 0) continue;
    if (std::find(names.begin(), names.end(), itf.name) != names.end()) continue;
    names.push_back(itf.name);
    seen.push_back(itf.name + " " + std::to_string(itf.mtu));
    // Below ~25 Gb/s a 1500-byte MTU costs little; at 100-200 Gb/s per-packet overhead caps TCP.
    if (itf.speed_mbps >= 25000 && itf.mtu < 9000) {
      out.push_back(
          {id, Verdict::kWarn, itf.name,
           "MTU " + std::to_string(itf.mtu) + " on a " + std::to_string(itf.speed_mbps / 1000) +
               " Gb/s link: per-packet overhead limits TCP throughput",
           "ip link set dev " + itf.name + " mtu 9000  (the same on the other end of the cable)"});
    }
  }
  if (out.empty()) {
    out.push_back({id, Verdict::kOk, join(seen),
                   seen.empty() ? "no physical mesh interface to check"
                                : "MTUs fit the link speeds (compare both ends with --peers "
                                  "... --probe)",
                   ""});
  }
  return out;
}

Findings check_rp_filter(const Inventory& inv, const Model& m) {
  const char* id = "rp-filter";
  Findings out;
  const int all = sysctl_int(inv, "all", "rp_filter");
  std::vector<std::string> checked;
  for (const Interface& itf : m.selection.used) {
    if (itf.loopback) continue;
    if (std::find(checked.begin(), checked.end(), itf.name) != checked.end()) continue;
    checked.push_back(itf.name);
    const int own = sysctl_int(inv, itf.name, "rp_filter");
    // The kernel applies max(conf.all, conf.<if>).
    if (std::max(all, own) != 1) continue;
    std::string keys;
    if (all == 1) keys += " " + sysctl_key("all", "rp_filter") + "=2";
    if (own == 1) keys += " " + sysctl_key(itf.name, "rp_filter") + "=2";
    const bool multi_homed = shares_subnet(inv, itf);
    out.push_back(
        {id, multi_homed ? Verdict::kFail : Verdict::kWarn, itf.name,
         multi_homed
             ? "strict reverse-path filtering (rp_filter=1) with another interface on the same "
               "subnet: packets arriving on the interface the route does not point at are dropped"
             : "strict reverse-path filtering (rp_filter=1): harmless with one subnet per cable, "
               "but it drops traffic when both ends of a cable are in this host (test rigs) or "
               "when routes and cables disagree",
         "sysctl -w" + keys + "  (persist in /etc/sysctl.d/90-nccl-mesh.conf)"});
  }
  if (out.empty()) {
    out.push_back({id, Verdict::kOk, join(checked),
                   checked.empty() ? "no non-loopback mesh interface"
                                   : "rp_filter is 0 or 2 (loose) on every mesh interface",
                   ""});
  }
  return out;
}

Findings check_arp_halves(const Inventory& inv, const Model& m) {
  (void)m;
  const char* id = "arp-halves";
  Findings out;
  std::vector<std::string> checked;
  for (const auto& g : shared_subnet_groups(inv)) {
    std::vector<std::string> bad;
    for (const std::string& n : distinct_names(g)) {
      checked.push_back(n);
      const int ignore = effective_sysctl(inv, n, "arp_ignore");
      const int announce = effective_sysctl(inv, n, "arp_announce");
      if (!arp_ignore_pins_halves(ignore) || announce != 2) {
        bad.push_back(n + " (arp_ignore=" + std::to_string(ignore) +
                      ", arp_announce=" + std::to_string(announce) + ")");
      }
    }
    if (bad.empty()) continue;
    out.push_back(
        {id, Verdict::kWarn, subnet_of(g) + ": " + join(bad),
         "interfaces on one subnet answer ARP for each other's addresses (arp_ignore not 1/2) "
         "or announce another interface's address (arp_announce not 2): peers then send to the "
         "wrong half, and the plugin cannot bind its sockets to the halves (it keeps them "
         "unbound, so everything leaves through one half)",
         halves_sysctl_fix(distinct_names(g)) + "  (persist in /etc/sysctl.d/90-nccl-mesh.conf)"});
  }
  if (out.empty()) {
    out.push_back({id, Verdict::kOk, join(checked),
                   checked.empty() ? "no interfaces share a subnet"
                                   : "arp_ignore 1/2 and arp_announce 2 on every interface that "
                                     "shares a subnet",
                   ""});
  }
  return out;
}

Findings check_accept_local(const Inventory& inv, const Model& m) {
  (void)m;
  const char* id = "accept-local";
  Findings out;
  const int all = sysctl_int(inv, "all", "accept_local");
  for (const auto& g : shared_subnet_groups(inv)) {
    std::vector<std::string> off;
    for (const Interface* i : g) {
      // The kernel ORs conf.all and conf.<if>.
      if (all != 1 && sysctl_int(inv, i->name, "accept_local") != 1 &&
          std::find(off.begin(), off.end(), i->name) == off.end()) {
        off.push_back(i->name);
      }
    }
    if (off.empty()) continue;
    std::string keys;
    for (const std::string& n : off)
      keys.append(" ").append(sysctl_key(n, "accept_local")).append("=1");
    // PCI functions on one subnet are the halves of a port cabled to another host (a DGX
    // Spark): accept_local does not matter there, and a WARN would stay after every fix the
    // doctor gives (issue 29). Virtual interfaces on one subnet are what test rigs are made of.
    const bool physical =
        std::all_of(g.begin(), g.end(), [](const Interface* i) { return !i->pci_path.empty(); });
    if (physical) {
      out.push_back({id, Verdict::kOk, subnet_of(g) + ": " + join(off),
                     "accept_local=0 on PCI interfaces that share a subnet (the halves of a port): "
                     "right for a port cabled to another host. Only a test rig with both ends "
                     "of a cable in this host needs it (sysctl -w" +
                         keys + ")",
                     ""});
      continue;
    }
    out.push_back(
        {id, Verdict::kWarn, subnet_of(g) + ": " + join(off),
         "accept_local=0 on interfaces that share a subnet: if both ends of a cable "
         "are in this host (loopback test rig), the kernel drops packets whose source "
         "is a local address (ARP fails, RoCE QPs never reach RTR). Not needed for "
         "the two halves of a DGX Spark port",
         "test rig only: sysctl -w" + keys + " " + sysctl_key("all", "rp_filter") + "=0"});
  }
  if (out.empty()) {
    out.push_back({id, Verdict::kOk, "",
                   "accept_local only matters when both ends of a cable are in one host; no "
                   "interfaces share a subnet",
                   ""});
  }
  return out;
}

}  // namespace mesh::doctor
