// SPDX-License-Identifier: Apache-2.0
#include "socket_io.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "util/socket_util.h"

namespace mesh::bench {
namespace {

std::string errno_text(const char* call) {
  return fmt::format("{}: {}", call, std::strerror(errno));
}

std::string format_endpoint(const sockaddr_in& sa) {
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof buf);
  return fmt::format("{}:{}", buf, ntohs(sa.sin_port));
}

sockaddr_in sock_name(int fd, bool peer) {
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  if (peer) {
    getpeername(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  } else {
    getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  }
  return sa;
}

bool transient(int err) {
  return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) close(fd_);
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

Fd tcp_listen(uint32_t addr, uint16_t port, int backlog, uint16_t* bound_port) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) throw setup_error(errno_text("socket"));
  const int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in sa = make_sockaddr(addr, port);
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
    throw setup_error(fmt::format("bind {}: {}", format_endpoint(sa), std::strerror(errno)));
  }
  if (::listen(fd.get(), backlog) != 0) throw setup_error(errno_text("listen"));
  if (bound_port != nullptr) *bound_port = local_port(fd.get());
  return fd;
}

uint16_t local_port(int fd) {
  return ntohs(sock_name(fd, false).sin_port);
}

Fd tcp_connect(uint32_t local, uint32_t peer_addr, uint16_t port, bool retry_refused,
               Waiter& waiter) {
  const sockaddr_in peer = make_sockaddr(peer_addr, port);
  for (;;) {
    Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) throw setup_error(errno_text("socket"));
    if (local != 0) {
      // Pin the source address: the baseline must leave through the cable the plugin uses.
      const sockaddr_in src = make_sockaddr(local, 0);
      if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&src), sizeof src) != 0) {
        throw setup_error(fmt::format("bind {}: {}", format_endpoint(src), std::strerror(errno)));
      }
    }
    int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&peer), sizeof peer);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      for (;;) {
        pollfd p{fd.get(), POLLOUT, 0};
        const int n = poll(&p, 1, 100);
        if (n > 0) break;
        if (n < 0 && errno != EINTR) throw setup_error(errno_text("poll"));
        waiter.idle();
      }
      socklen_t len = sizeof err;
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      const int flags = fcntl(fd.get(), F_GETFL);
      fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
      configure_stream(fd.get());
      waiter.progressed();
      return fd;
    }
    if (!(retry_refused &&
          (err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH))) {
      throw setup_error(
          fmt::format("connect to {}: {}", format_endpoint(peer), std::strerror(err)));
    }
    // Nobody listening yet (the peer is still starting): try again shortly.
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      waiter.idle();
    }
  }
}

Fd tcp_accept(int listen_fd, Waiter& waiter) {
  for (;;) {
    pollfd p{listen_fd, POLLIN, 0};
    const int n = poll(&p, 1, 100);
    if (n > 0) {
      Fd fd(accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (fd) {
        configure_stream(fd.get());
        waiter.progressed();
        return fd;
      }
      if (!transient(errno) && errno != ECONNABORTED) throw setup_error(errno_text("accept"));
    } else if (n < 0 && errno != EINTR) {
      throw setup_error(errno_text("poll"));
    }
    waiter.idle();
  }
}

void configure_stream(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  timeval tv{0, 100 * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void send_all(int fd, const void* data, size_t len, Waiter& waiter) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      waiter.progressed();
      continue;
    }
    if (n < 0 && transient(errno)) {
      waiter.idle();
      continue;
    }
    throw BenchError(kExitPeerFailed, fmt::format("rank {}: send to {} failed: {}", my_rank(),
                                                  remote_endpoint(fd), std::strerror(errno)));
  }
}

void recv_all(int fd, void* data, size_t len, Waiter& waiter) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    const ssize_t n = ::recv(fd, p, len, MSG_WAITALL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      waiter.progressed();
      continue;
    }
    if (n < 0 && transient(errno)) {
      waiter.idle();
      continue;
    }
    throw BenchError(kExitPeerFailed,
                     fmt::format("rank {}: recv from {} failed: {}", my_rank(), remote_endpoint(fd),
                                 n == 0 ? "connection closed by peer" : std::strerror(errno)));
  }
}

void exchange(int send_fd, const void* send_data, size_t send_len, int recv_fd, void* recv_data,
              size_t recv_len, Waiter& waiter, bool spin) {
  const Segment out{const_cast<uint8_t*>(static_cast<const uint8_t*>(send_data)), send_len};
  const Segment in{static_cast<uint8_t*>(recv_data), recv_len};
  exchange_segments(send_fd, &out, 1, recv_fd, &in, 1, waiter, spin);
}

void exchange_segments(int send_fd, const Segment* sends, size_t n_sends, int recv_fd,
                       const Segment* recvs, size_t n_recvs, Waiter& waiter, bool spin) {
  size_t si = 0, ri = 0;  // the segment being sent / received
  const uint8_t* sp = nullptr;
  uint8_t* rp = nullptr;
  size_t send_len = 0, recv_len = 0;
  // Empty segments move nothing: skipped.
  auto next_send = [&] {
    while (send_len == 0 && si < n_sends) {
      sp = sends[si].data;
      send_len = sends[si++].len;
    }
  };
  auto next_recv = [&] {
    while (recv_len == 0 && ri < n_recvs) {
      rp = recvs[ri].data;
      recv_len = recvs[ri++].len;
    }
  };
  next_send();
  next_recv();
  while (send_len > 0 || recv_len > 0) {
    pollfd p[2];
    nfds_t n = 0;
    if (send_fd == recv_fd) {
      p[n++] =
          pollfd{send_fd,
                 static_cast<short>((send_len > 0 ? POLLOUT : 0) | (recv_len > 0 ? POLLIN : 0)), 0};
    } else {
      if (send_len > 0) p[n++] = pollfd{send_fd, POLLOUT, 0};
      if (recv_len > 0) p[n++] = pollfd{recv_fd, POLLIN, 0};
    }
    const int ready = spin ? 0 : poll(p, n, 100);
    if (ready < 0 && errno != EINTR) throw setup_error(errno_text("poll"));
    bool moved = false;
    if (send_len > 0) {
      const ssize_t k = ::send(send_fd, sp, send_len, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        sp += k;
        send_len -= static_cast<size_t>(k);
        moved = true;
        next_send();
      } else if (k < 0 && !transient(errno)) {
        throw BenchError(kExitPeerFailed,
                         fmt::format("rank {}: send to {} failed: {}", my_rank(),
                                     remote_endpoint(send_fd), std::strerror(errno)));
      }
    }
    if (recv_len > 0) {
      const ssize_t k = ::recv(recv_fd, rp, recv_len, MSG_DONTWAIT);
      if (k > 0) {
        rp += k;
        recv_len -= static_cast<size_t>(k);
        moved = true;
        next_recv();
      } else if (k == 0 || !transient(errno)) {
        throw BenchError(
            kExitPeerFailed,
            fmt::format("rank {}: recv from {} failed: {}", my_rank(), remote_endpoint(recv_fd),
                        k == 0 ? "connection closed by peer" : std::strerror(errno)));
      }
    }
    if (moved) {
      waiter.progressed();
    } else {
      waiter.idle();
    }
  }
}

bool peer_closed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if ((p.revents & (POLLERR | POLLHUP | POLLRDHUP)) != 0) return true;
  if ((p.revents & POLLIN) != 0) {
    char c;
    const ssize_t n = ::recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && !transient(errno));
  }
  return false;
}

std::string local_endpoint(int fd) {
  return format_endpoint(sock_name(fd, false));
}
std::string remote_endpoint(int fd) {
  return format_endpoint(sock_name(fd, true));
}
uint32_t local_addr(int fd) {
  return ntohl(sock_name(fd, false).sin_addr.s_addr);
}
uint32_t remote_addr(int fd) {
  return ntohl(sock_name(fd, true).sin_addr.s_addr);
}

}  // namespace mesh::bench
