// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/probe_socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "util/ipv4.h"

namespace mesh::doctor::probe {
namespace {

const sockaddr* as_sockaddr(const sockaddr_in* sa) {
  return reinterpret_cast<const sockaddr*>(sa);
}

}  // namespace

UniqueFd connect_bound(uint32_t local, uint32_t peer, uint16_t port, int timeout_ms,
                       std::string* error) {
  const std::string what =
      "connect " + format_ipv4(peer) + ":" + std::to_string(port) + " from " + format_ipv4(local);
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *error = what + ": socket: " + errno_text(errno);
    return {};
  }
  const sockaddr_in src = make_sockaddr(local, 0);
  if (::bind(fd.get(), as_sockaddr(&src), sizeof(src)) != 0) {
    *error = what + ": bind: " + errno_text(errno);
    return {};
  }
  // Non-blocking connect so an unplugged cable costs timeout_ms, not the kernel's ~2 minutes.
  set_nonblocking(fd.get(), true);
  const sockaddr_in dst = make_sockaddr(peer, port);
  if (::connect(fd.get(), as_sockaddr(&dst), sizeof(dst)) != 0 && errno != EINPROGRESS) {
    *error = what + ": " + errno_text(errno);
    return {};
  }
  pollfd p{fd.get(), POLLOUT, 0};
  int rc = 0;
  do {
    rc = ::poll(&p, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  if (rc == 0) {
    *error = what + ": no answer within " + std::to_string(timeout_ms) + " ms";
    return {};
  }
  int err = 0;
  socklen_t len = sizeof(err);
  if (rc < 0 || getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    *error = what + ": " + errno_text(rc < 0 ? errno : err);
    return {};
  }
  set_nonblocking(fd.get(), false);
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

UniqueFd listen_on(uint32_t addr, uint16_t port, std::string* error) {
  const std::string what = "listen on " + format_ipv4(addr) + ":" + std::to_string(port);
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    *error = what + ": socket: " + errno_text(errno);
    return {};
  }
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  const sockaddr_in sa = make_sockaddr(addr, port);
  if (::bind(fd.get(), as_sockaddr(&sa), sizeof(sa)) != 0 || ::listen(fd.get(), 64) != 0) {
    *error = what + ": " + errno_text(errno);
    return {};
  }
  return fd;
}

void set_io_timeout(int fd, int ms) {
  timeval tv{};
  tv.tv_sec = ms / 1000;
  tv.tv_usec = (ms % 1000) * 1000;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

uint32_t local_address(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return 0;
  return ntohl(sa.sin_addr.s_addr);
}

uint16_t local_port(int fd) {
  sockaddr_in sa{};
  socklen_t len = sizeof(sa);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) return 0;
  return ntohs(sa.sin_port);
}

}  // namespace mesh::doctor::probe
