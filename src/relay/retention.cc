// SPDX-License-Identifier: Apache-2.0
#include "relay/retention.h"

#include <net/if.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <cstring>

#include "relay/sock_diag.h"
#include "util/socket_util.h"

namespace mesh::relay {

bool holds_neighbour(const HostEntry& neighbour, const std::vector<LocalCable>& cables,
                     const std::set<uint32_t>& relay_peers) {
  for (const LocalCable& c : cables) {
    if (!c.carrier) continue;
    for (const Ipv4Prefix& a : neighbour.addrs) {
      if (a.prefix == c.addr.prefix && a.addr != c.addr.addr && in_subnet(c.addr, a.addr) &&
          relay_peers.count(a.addr) != 0)
        return true;
    }
  }
  return false;
}

bool interface_has_carrier(const std::string& ifname) {
  if (ifname.empty() || ifname.size() >= IFNAMSIZ) return false;
  UniqueFd s(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return false;
  ifreq ifr{};
  std::memcpy(ifr.ifr_name, ifname.data(), ifname.size());
  if (ioctl(s.get(), SIOCGIFFLAGS, &ifr) != 0) return false;
  const auto flags = static_cast<unsigned>(static_cast<unsigned short>(ifr.ifr_flags));
  return (flags & IFF_UP) != 0 && (flags & IFF_RUNNING) != 0;
}

bool relay_socket_peers(uint16_t port, std::set<uint32_t>* out, std::string* why) {
  out->clear();
  // Either end may be the relay port: not filtered by the kernel. 100k sockets take a few
  // thousand parts.
  return dump_tcp_sockets(
      1u << TCP_ESTABLISHED, 0, 100000,
      [&](const TcpSocketInfo& s) {
        if (s.local_port == port || s.remote_port == port) out->insert(s.remote_addr);
      },
      why);
}

}  // namespace mesh::relay
