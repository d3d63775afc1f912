// SPDX-License-Identifier: Apache-2.0
#include "util/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/ipv4.h"

namespace mesh {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

sockaddr_in make_sockaddr(uint32_t addr, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(addr);
  sa.sin_port = htons(port);
  return sa;
}

socklen_t make_unix_address(std::string_view name, sockaddr_un* out) {
  *out = sockaddr_un{};
  out->sun_family = AF_UNIX;
  const size_t n = std::min(name.size(), sizeof(out->sun_path));
  std::memcpy(out->sun_path, name.data(), n);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + n);
}

std::string format_endpoint(const sockaddr_in& sa) {
  return format_ipv4(ntohl(sa.sin_addr.s_addr)) + ":" + std::to_string(ntohs(sa.sin_port));
}

bool set_nonblocking(int fd, bool nonblocking) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0) return false;
  const int want = nonblocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  return want == flags || fcntl(fd, F_SETFL, want) == 0;
}

void defer_port_choice(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
}

void set_tcp_options(int fd, int64_t user_timeout_ms) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (user_timeout_ms <= 0) return;
  // Keepalive probes detect a silent peer on an idle socket (a receiver waiting for data);
  // TCP_USER_TIMEOUT bounds how long sent data may stay unacknowledged (a sender on a cut cable).
  const int secs = static_cast<int>(std::max<int64_t>(1, user_timeout_ms / 2000));
  const int interval = 1;
  const int count = secs;
  const unsigned timeout = static_cast<unsigned>(user_timeout_ms);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &secs, sizeof(secs));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout, sizeof(timeout));
}

bool send_all(int fd, const void* buf, size_t len) {
  const char* p = static_cast<const char*>(buf);
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool recv_all(int fd, void* buf, size_t len) {
  char* p = static_cast<char*>(buf);
  while (len > 0) {
    const ssize_t n = ::recv(fd, p, len, MSG_WAITALL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (n == 0) {
      errno = ECONNRESET;
      return false;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

std::string errno_text(int err) {
  char buf[128];
  const char* s = strerror_r(err, buf, sizeof(buf));
  return s;
}

}  // namespace mesh
