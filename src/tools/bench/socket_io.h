// SPDX-License-Identifier: Apache-2.0
// Plain TCP socket helpers for the rendezvous and the TCP baseline. Sockets stay blocking (the
// baseline is meant to be the simplest possible TCP: whole-message send()/recv()), but carry a
// 100 ms SO_SNDTIMEO/SO_RCVTIMEO so that a blocked call comes back regularly to its Waiter:
// deadlines and dead-rank detection work without threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "wait.h"

namespace mesh::bench {

// Owns a file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release();
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Listening socket on addr:port (host order; port 0 = any). Returns the bound port.
Fd tcp_listen(uint32_t addr, uint16_t port, int backlog, uint16_t* bound_port);
uint16_t local_port(int fd);

// Connects from local_addr (0 = let the kernel choose) to peer:port. With retry_refused, keeps
// trying (every 100 ms) while nobody listens yet, until the waiter's deadline.
Fd tcp_connect(uint32_t local_addr, uint32_t peer_addr, uint16_t port, bool retry_refused,
               Waiter& waiter);
Fd tcp_accept(int listen_fd, Waiter& waiter);

// TCP_NODELAY plus the 100 ms I/O timeouts described above.
void configure_stream(int fd);

// Whole buffers. Throw on error, on EOF (kExitPeerFailed) and on the waiter's timeout.
void send_all(int fd, const void* data, size_t len, Waiter& waiter);
void recv_all(int fd, void* data, size_t len, Waiter& waiter);

// Sends one buffer and receives another at the same time (poll), for traffic in both directions
// on one socket or two: blocking send() on both sides would deadlock once both socket buffers
// are full. send_fd and recv_fd may be the same socket; lengths may be 0. With `spin` it never
// blocks: it tries both sockets and, when neither moved, yields (Waiter::idle).
void exchange(int send_fd, const void* send_data, size_t send_len, int recv_fd, void* recv_data,
              size_t recv_len, Waiter& waiter, bool spin = false);

// A buffer of a framed exchange.
struct Segment {
  uint8_t* data;
  size_t len;
};
// exchange() over lists of buffers, one after the other in each direction, each moved by send()
// and recv() calls of its own (never gathered with the next one): a message transport's framing,
// whose every piece costs its own syscalls (NCCL's Socket: a message's size, then its bytes).
void exchange_segments(int send_fd, const Segment* sends, size_t n_sends, int recv_fd,
                       const Segment* recvs, size_t n_recvs, Waiter& waiter, bool spin);

// True when the peer has closed the connection (EOF or error) - peeks, consumes nothing.
bool peer_closed(int fd);

// "10.0.0.1:4242" of either end.
std::string local_endpoint(int fd);
std::string remote_endpoint(int fd);
uint32_t local_addr(int fd);
uint32_t remote_addr(int fd);

}  // namespace mesh::bench
