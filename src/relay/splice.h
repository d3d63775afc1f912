// One relayed socket pair in the relay agent: bytes read from each side are written to the
// other through a bounded buffer per direction. A side is read only while its buffer has room,
// so a slow receiver stops the agent reading, the sender's TCP window closes and backpressure
// reaches the sender end to end: memory per pair is 2 x capacity, whatever the traffic.
// EOF on one side is passed on (shutdown(SHUT_WR) of the other once the buffer has drained);
// an error on either side resets both (SO_LINGER 0), so both endpoints see the failure.
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
  Splice(UniqueFd a, UniqueFd b, size_t capacity);
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
  // Resets both sockets (the agent is stopping, or the pair failed).
  void reset();
  // Closes both sockets normally (the pair finished: every byte was handed to the kernel).
  void close();

 private:
  struct Direction {  // bytes read from side `from`, to be written to the other side
    std::vector<uint8_t> buf;
    size_t head = 0, size = 0;
    bool eof = false;       // `from` reached EOF
    bool shut = false;      // EOF passed on: the other side was shut down for writing
    uint64_t total = 0;
  };
  bool pump_direction(int from);
  UniqueFd a_, b_;
  Direction dir_[2];
  std::string error_;
};

}  // namespace mesh::relay
