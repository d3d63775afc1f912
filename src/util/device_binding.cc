// SPDX-License-Identifier: Apache-2.0
#include "util/device_binding.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>

#include "util/log.h"
#include "util/socket_util.h"

namespace mesh {

DeviceBinding decide_device_binding(uint32_t local_addr, const std::vector<LocalAddress>& all,
                                    const std::function<int(const std::string&)>& arp_ignore_of) {
  DeviceBinding d;
  const LocalAddress* own = nullptr;
  for (const LocalAddress& a : all) {
    if (a.addr.addr == local_addr && a.up) {
      own = &a;
      break;
    }
  }
  if (own == nullptr) return d;
  d.ifname = own->ifname;
  d.subnet = {own->addr.addr & netmask(own->addr.prefix), own->addr.prefix};
  for (const LocalAddress& a : all) {
    if (!a.up || a.ifname == own->ifname) continue;  // several addresses on one netdev: one cable
    const bool overlap = in_subnet(own->addr, a.addr.addr) || in_subnet(a.addr, own->addr.addr);
    if (overlap &&
        std::find(d.shared_with.begin(), d.shared_with.end(), a.ifname) == d.shared_with.end()) {
      d.shared_with.push_back(a.ifname);
    }
  }
  if (d.shared_with.empty()) return d;
  d.arp_ignore = arp_ignore_of(d.ifname);
  d.action = arp_ignore_pins_halves(d.arp_ignore) ? DeviceBinding::Action::kBind
                                                  : DeviceBinding::Action::kNeedsArp;
  return d;
}

std::string halves_sysctl_fix(const std::vector<std::string>& ifnames) {
  std::string keys;
  for (const std::string& n : ifnames) {
    std::string scope = n;
    std::replace(scope.begin(), scope.end(), '.', '/');  // sysctl(8) spelling of "eth0.100"
    for (const char* kv : {"arp_ignore=1", "arp_announce=2", "rp_filter=2"}) {
      keys += " net.ipv4.conf." + scope + "." + kv;
    }
  }
  return "sysctl -w" + keys;
}

std::string policy_routing_fix(const std::string& ifname, const Ipv4Prefix& addr, int table) {
  const Ipv4Prefix subnet{addr.addr & netmask(addr.prefix), addr.prefix};
  const std::string t = std::to_string(table);
  return "ip rule add from " + format_ipv4(addr.addr) + " table " + t + "; ip route add " +
         format_prefix(subnet) + " dev " + ifname + " src " + format_ipv4(addr.addr) + " table " +
         t;
}

// Not topology::discover_interfaces (a layer above, and it reads sysfs too): here an address
// counts when its interface is administratively up, carrier or not, because a half whose cable
// is out still has a connected route the kernel may pick for the shared subnet.
std::vector<LocalAddress> read_local_addresses() {
  std::vector<LocalAddress> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (const ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    LocalAddress a;
    a.ifname = it->ifa_name;
    a.addr.addr = ntohl(reinterpret_cast<const sockaddr_in*>(it->ifa_addr)->sin_addr.s_addr);
    a.addr.prefix = 32;
    if (it->ifa_netmask != nullptr) {
      const uint32_t mask =
          ntohl(reinterpret_cast<const sockaddr_in*>(it->ifa_netmask)->sin_addr.s_addr);
      a.addr.prefix = prefix_from_netmask(mask).value_or(32);
    }
    a.up = (it->ifa_flags & IFF_UP) != 0;
    out.push_back(std::move(a));
  }
  freeifaddrs(list);
  return out;
}

namespace {

int read_sysctl_int(const std::string& path) {
  std::ifstream f(path);
  int v = -1;
  if (!(f >> v)) return -1;
  return v;
}

// The kernel applies max(conf.all, conf.<if>) for arp_ignore.
int effective_arp_ignore(const std::string& ifname) {
  const int all = read_sysctl_int("/proc/sys/net/ipv4/conf/all/arp_ignore");
  const int own = read_sysctl_int("/proc/sys/net/ipv4/conf/" + ifname + "/arp_ignore");
  return std::max(all, own);
}

// One WARN per subnet (or interface) and process: the condition does not change between sockets.
bool first_warn_for(const std::string& key) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  return warned.insert(key).second;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The decision for a local address, made once per process: it depends on the interfaces and
// their sysctls, not on the socket, and the handshake thread binds several sockets per connection
// (control + data streams), which should not each re-read every interface and sysctl.
DeviceBinding binding_for(uint32_t local_addr) {
  static std::mutex mu;
  static std::map<uint32_t, DeviceBinding> decided;
  std::lock_guard<std::mutex> lock(mu);
  auto it = decided.find(local_addr);
  if (it == decided.end()) {
    it = decided
             .emplace(local_addr, decide_device_binding(local_addr, read_local_addresses(),
                                                        effective_arp_ignore))
             .first;
  }
  return it->second;
}

}  // namespace

bool bind_to_rail_device(int fd, uint32_t local_addr) {
  const DeviceBinding d = binding_for(local_addr);
  if (d.action == DeviceBinding::Action::kNone) return false;
  std::vector<std::string> group{d.ifname};
  for (const std::string& n : d.shared_with) group.push_back(n);
  if (d.action == DeviceBinding::Action::kNeedsArp) {
    if (first_warn_for("arp " + format_prefix(d.subnet))) {
      MESH_WARN(
          "%s shares subnet %s with %s, but arp_ignore=%d there: each would answer ARP for the "
          "other's addresses, and a socket bound to one half would drop a peer's packets that "
          "arrive on the other. So the plugin leaves these sockets unbound and the kernel sends "
          "everything for %s through one of them (half of a DGX Spark port unused). Fix: %s",
          d.ifname.c_str(), format_prefix(d.subnet).c_str(), join(d.shared_with).c_str(),
          d.arp_ignore, format_prefix(d.subnet).c_str(), halves_sysctl_fix(group).c_str());
    }
    return false;
  }
  // SO_BINDTODEVICE takes the name; the length excludes nothing but must fit IFNAMSIZ.
  if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, d.ifname.c_str(),
                 static_cast<socklen_t>(d.ifname.size() + 1)) == 0) {
    return true;
  }
  const int err = errno;
  if (first_warn_for("bind " + d.ifname)) {
    const Ipv4Prefix own{local_addr, d.subnet.prefix};
    const int table = 1000 + static_cast<int>(if_nametoindex(d.ifname.c_str()));
    MESH_WARN(
        "cannot bind sockets to %s (SO_BINDTODEVICE: %s; Linux < 5.7 needs "
        "CAP_NET_RAW), which shares its subnet with %s: the kernel sends everything from %s "
        "through whichever of them it routes first. Fix, as root: %s",
        d.ifname.c_str(), errno_text(err).c_str(), join(d.shared_with).c_str(),
        format_ipv4(local_addr).c_str(), policy_routing_fix(d.ifname, own, table).c_str());
  }
  return false;
}

}  // namespace mesh
