// SPDX-License-Identifier: Apache-2.0
#include "relay/sock_diag.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/socket_util.h"

namespace mesh::relay {

bool dump_tcp_sockets(uint32_t states, uint16_t local_port, size_t max_parts,
                      const std::function<void(const TcpSocketInfo&)>& each, std::string* why) {
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
  msg.req.idiag_states = states;
  msg.req.id.idiag_sport = htons(local_port);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(s.get(), &msg, sizeof(msg), 0, reinterpret_cast<const sockaddr*>(&kernel),
             sizeof(kernel)) != static_cast<ssize_t>(sizeof(msg))) {
    *why = "sock_diag request: " + errno_text(errno);
    return false;
  }
  char buf[32768];
  // The kernel fills each part of a dump while it is read: never an empty wait. Bounded anyway.
  for (size_t part = 0; part < max_parts; ++part) {
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
      if (d.idiag_family != AF_INET || d.idiag_state >= 32 || (states & (1u << d.idiag_state)) == 0)
        continue;
      TcpSocketInfo info;
      info.state = d.idiag_state;
      info.local_addr = ntohl(d.id.idiag_src[0]);
      info.local_port = ntohs(d.id.idiag_sport);
      info.remote_addr = ntohl(d.id.idiag_dst[0]);
      info.remote_port = ntohs(d.id.idiag_dport);
      info.uid = d.idiag_uid;
      if (local_port != 0 && info.local_port != local_port) continue;
      each(info);
    }
  }
  *why = "sock_diag dump: no end within " + std::to_string(max_parts) + " parts";
  return false;
}

}  // namespace mesh::relay
