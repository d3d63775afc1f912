// SPDX-License-Identifier: Apache-2.0
// How many more bytes a connected TCP socket can send that the peer's kernel has already
// promised to take: the receive window the peer last advertised, less what this socket still
// holds (unsent or unacknowledged). Bytes within that room land in the peer's socket buffer
// whether or not its process reads, so none of them can wait in this socket behind a zero
// window (where TCP_USER_TIMEOUT would kill a healthy connection, design.md "Eager sends").
// Linux never moves a window's right edge back (unless net.ipv4.tcp_shrink_window=1), so the
// answer stays true until the bytes are sent.
#pragma once

#include <cstdint>

namespace mesh::tcp {

// False when the kernel cannot tell: not a TCP socket, not connected, or a kernel whose
// TCP_INFO has no tcpi_snd_wnd (before Linux 5.4).
bool peer_window_room(int fd, uint64_t* room);

// How many times this process asked the kernel (peer_window_room calls): a diagnostic for tests
// and benchmarks, since each ask is two syscalls.
uint64_t peer_window_queries();

// What one answer of peer_window_room() keeps saying while bytes go out. The right edge of the
// window never moves back (above), so room R measured when the socket had taken S bytes of the
// stream means the peer's kernel takes every byte up to S + R, however many are sent since. A
// sender that counts the bytes it gives a socket therefore needs to ask the kernel again only
// when its bytes would pass that edge: two syscalls per socket and message were a third of the
// plugin's syscalls in a 3-rank ring all-reduce of 87 KiB steps (measurements.md, issue 28).
class WindowEdge {
 public:
  // Whether `more` bytes after the first `total` of the stream (sent or still queued ahead of
  // them) are within the remembered edge. False until measured.
  bool covers(uint64_t total, uint64_t more) const { return known_ && total + more <= edge_; }
  // Asks the kernel and remembers the edge. `sent` is what the socket had taken, read before
  // this call: a byte sent in between makes the remembered edge smaller than the truth, never
  // larger. False when the kernel cannot tell (the edge is then forgotten).
  bool measure(int fd, uint64_t sent, uint64_t* room);

 private:
  uint64_t edge_ = 0;
  bool known_ = false;
};

}  // namespace mesh::tcp
