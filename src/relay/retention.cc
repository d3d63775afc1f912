// SPDX-License-Identifier: Apache-2.0
#include "relay/retention.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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
  UniqueFd s(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!s.valid()) {
    *why = "netlink sock_diag socket: " + errno_text(errno);
    return false;
  }
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof(msg);
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.req.sdiag_family = AF_INET;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = 1u << TCP_ESTABLISHED;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(s.get(), &msg, sizeof(msg), 0, reinterpret_cast<const sockaddr*>(&kernel),
             sizeof(kernel)) != static_cast<ssize_t>(sizeof(msg))) {
    *why = "sock_diag request: " + errno_text(errno);
    return false;
  }
  const uint16_t nport = htons(port);
  char buf[32768];
  // The kernel fills each part of a dump while it is read: never an empty wait. Bounded anyway
  // (a part holds dozens of sockets; 100k sockets take a few thousand parts).
  for (int part = 0; part < 100000; ++part) {
    const ssize_t n = recv(s.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = "sock_diag dump: " + (n < 0 ? errno_text(errno) : std::string("ended early"));
      return false;
    }
    // Messages one after the other, each at a 4-byte boundary (the NLMSG_* macros, without
    // their C casts).
    const auto len = static_cast<size_t>(n);
    constexpr size_t kHdr = (sizeof(nlmsghdr) + 3) & ~size_t{3};
    for (size_t off = 0; off + sizeof(nlmsghdr) <= len;) {
      nlmsghdr h;
      std::memcpy(&h, buf + off, sizeof(h));
      if (h.nlmsg_len < sizeof(nlmsghdr) || h.nlmsg_len > len - off) break;
      const char* body = buf + off + kHdr;
      const size_t body_len = h.nlmsg_len >= kHdr ? h.nlmsg_len - kHdr : 0;
      off += (h.nlmsg_len + 3) & ~size_t{3};
      if (h.nlmsg_type == NLMSG_DONE) return true;
      if (h.nlmsg_type == NLMSG_ERROR) {
        nlmsgerr e{};
        std::memcpy(&e, body, std::min(body_len, sizeof(e)));
        *why = "sock_diag dump: " + errno_text(-e.error);
        return false;
      }
      if (h.nlmsg_type != SOCK_DIAG_BY_FAMILY || body_len < sizeof(inet_diag_msg)) continue;
      inet_diag_msg d;
      std::memcpy(&d, body, sizeof(d));
      if (d.idiag_family != AF_INET) continue;
      if (d.id.idiag_sport == nport || d.id.idiag_dport == nport)
        out->insert(ntohl(d.id.idiag_dst[0]));
    }
  }
  *why = "sock_diag dump: no end";
  return false;
}

}  // namespace mesh::relay
