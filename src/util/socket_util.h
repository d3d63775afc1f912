// SPDX-License-Identifier: Apache-2.0
// Small POSIX socket helpers shared by the handshake service and the TCP transport.
#pragma once

#include <netinet/in.h>
#include <sys/un.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace mesh {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(std::exchange(o.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

sockaddr_in make_sockaddr(uint32_t addr, uint16_t port);  // host-order inputs
// The AF_UNIX address of `name` (abstract when it starts with '\0': the relay agent's local
// socket) and its length for bind/connect; a name longer than sun_path is cut (ours are short).
socklen_t make_unix_address(std::string_view name, sockaddr_un* out);
std::string format_endpoint(const sockaddr_in& sa);  // "10.0.0.1:4242"

bool set_nonblocking(int fd, bool nonblocking);

// For a socket that binds its source address before connect(): the kernel picks the local port
// at connect() by the whole 4-tuple (IP_BIND_ADDRESS_NO_PORT) instead of at bind(), where every
// port in TIME_WAIT counts as taken. Without it a host that opens connections quickly from one
// address (all-to-all setup, a soak loop) runs out of its ~28k ephemeral ports within the
// 60 s TIME_WAIT, and connects fail with EADDRINUSE. Best effort: older kernels ignore it.
void defer_port_choice(int fd);

// TCP_NODELAY, and keepalive + TCP_USER_TIMEOUT so a dead peer or a cut cable becomes an error
// after about `user_timeout_ms` instead of a hang (0 leaves the kernel defaults).
void set_tcp_options(int fd, int64_t user_timeout_ms);

// Blocking full transfers for the data threads; false on error or EOF (errno describes it,
// EOF sets errno to ECONNRESET). Retries EINTR.
bool send_all(int fd, const void* buf, size_t len);
bool recv_all(int fd, void* buf, size_t len);

std::string errno_text(int err);

}  // namespace mesh
