// SPDX-License-Identifier: Apache-2.0
// One relayed socket pair in the relay agent: bytes read from each side are written to the
// other through a bounded buffer per direction. A side is read only while its buffer has room,
// so a slow receiver stops the agent reading, the sender's TCP window closes and backpressure
// reaches the sender end to end: memory per pair is 2 x capacity, whatever the traffic.
// EOF on one side is passed on (shutdown(SHUT_WR) of the other once the buffer has drained);
// an error on either side resets both (SO_LINGER 0), so both endpoints see the failure, after
// the bytes the failed side sent before it (and the other side takes at once) were passed on.
// Zero copy (the default): each direction is a pipe of `capacity` bytes, filled with splice(2)
// from the source socket and drained with splice(2) into the destination, so payload pages move
// by reference and the relay's CPU never copies them (docs/relay.md: line rate on real NICs).
// Without pipes (zero_copy false, or pipe2 failing) a user-space ring buffer does the same.
// Non-blocking sockets only; pump() never blocks. Single-threaded (the agent's thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/socket_util.h"

namespace mesh::relay {

class Splice {
 public:
  // splice(2) into a socket whose peer is gone raises SIGPIPE (it has no MSG_NOSIGNAL). The
  // thread that pumps splices calls this once: SIGPIPE is then blocked in that thread only (the
  // application's disposition is left alone) and pump() discards the pending signal itself.
  static void block_sigpipe_in_this_thread();

  Splice(UniqueFd a, UniqueFd b, size_t capacity, bool zero_copy = true);
  Splice(const Splice&) = delete;
  Splice& operator=(const Splice&) = delete;

  int fd(int side) const { return side == 0 ? a_.get() : b_.get(); }
  // Queues bytes to be written to `side` before anything spliced (the relay's forwarded request
  // or its status reply). At most the capacity; call before the first pump().
  void preload(int side, const uint8_t* data, size_t len);
  // Moves what it can both ways. False once the pair is finished: both directions closed
  // cleanly, or an error (then error() says which side and why, and both sockets are reset).
  bool pump();
  // The epoll events each side needs now (EPOLLIN while its buffer towards the other side has
  // room, EPOLLOUT while bytes wait for it).
  uint32_t events(int side) const;
  const std::string& error() const { return error_; }
  uint64_t bytes(int from_side) const { return dir_[from_side].total; }
  bool zero_copy() const { return dir_[0].pipe_w.valid(); }
  // Resets both sockets (the agent is stopping, or the pair failed).
  void reset();
  // Closes both sockets normally (the pair finished: every byte was handed to the kernel).
  void close();

 private:
  struct Direction {            // bytes read from side `from`, to be written to the other side
    std::vector<uint8_t> buf;   // copy mode: the ring buffer
    UniqueFd pipe_r, pipe_w;    // zero-copy mode: the pipe
    size_t cap = 0;             // bytes held at most (the pipe's or the buffer's size)
    bool pipe_full = false;     // the pipe refused more (all its slots used) until drained
    size_t head = 0, size = 0;  // size: bytes held now (both modes)
    bool eof = false;           // `from` reached EOF
    bool shut = false;          // EOF passed on: the other side was shut down for writing
    uint64_t total = 0;
  };
  bool pump_direction(int from);
  bool pump_pipe(int from, bool* progress);
  bool pump_copy(int from, bool* progress);
  // Records the pair's failure (the first one stays: later ones are its consequences); the
  // pump functions then return false.
  void fail(const std::string& why);
  UniqueFd a_, b_;
  Direction dir_[2];
  std::string error_;
};

}  // namespace mesh::relay
