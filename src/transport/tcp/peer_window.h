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

// How many times this process asked the kernel (peer_window_room calls and WindowEdge
// measurements), and the syscalls those asks made (two for an ask that needs the socket's queue,
// one for a calibrated WindowEdge): diagnostics for tests and benchmarks.
uint64_t peer_window_queries();
uint64_t peer_window_syscalls();

// What one answer of peer_window_room() keeps saying while bytes go out. The right edge of the
// window never moves back (above), so room R measured when the socket had taken S bytes of the
// stream means the peer's kernel takes every byte up to S + R, however many are sent since. A
// sender that counts the bytes it gives a socket therefore needs to ask the kernel again only
// when its bytes would pass that edge: two syscalls per socket and message were a third of the
// plugin's syscalls in a 3-rank ring all-reduce of 87 KiB steps (measurements.md, issue 28).
//
// An ask needs two numbers: the window (TCP_INFO) and what the socket still holds (SIOCOUTQ),
// two syscalls. Once the edge knows how many bytes the socket took before the stream's own
// count began (the handshake's, on a data socket), TCP_INFO alone tells the edge: the peer takes
// every byte up to the ones acknowledged plus the window (tcpi_bytes_acked + tcpi_snd_wnd, one
// snapshot under the socket's lock), less that offset in the stream's count. The offset is
// learnt from an ask that finds nothing unacknowledged (SIOCOUTQ 0: every byte the socket took
// is acknowledged, so it is exact, and no acknowledgement can arrive between the two reads)
// while the caller's count is exact too (nothing queued that another thread could be moving).
// On loopback and on an idle cable that is the first ask; a syscall per ask less after it
// (measurements.md, sixteenth pass: a syscall cost 1.2-1.8 us on the 2-core rig).
class WindowEdge {
 public:
  // Whether `more` bytes after the first `total` of the stream (sent or still queued ahead of
  // them) are within the remembered edge. False until measured.
  bool covers(uint64_t total, uint64_t more) const { return known_ && total + more <= edge_; }
  // Asks the kernel and remembers the edge. `sent` is what the socket had taken, read before
  // this call: a byte sent in between makes the remembered edge smaller than the truth, never
  // larger. `exact`: `sent` is everything the socket has taken (the caller has nothing queued
  // on it that another thread could send meanwhile), so this ask may learn the offset. False
  // when the kernel cannot tell (the edge is then forgotten).
  bool measure(int fd, uint64_t sent, uint64_t* room, bool exact = false);
  bool calibrated() const { return calibrated_; }

 private:
  uint64_t edge_ = 0;
  bool known_ = false;
  bool calibrated_ = false;
  uint64_t offset_ = 0;  // bytes the socket took before the stream's count began
};

}  // namespace mesh::tcp
