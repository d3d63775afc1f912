#include "relay/splice.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mesh::relay {

Splice::Splice(UniqueFd a, UniqueFd b, size_t capacity) : a_(std::move(a)), b_(std::move(b)) {
  for (Direction& d : dir_) d.buf.resize(capacity);
}

void Splice::preload(int side, const uint8_t* data, size_t len) {
  Direction& d = dir_[1 - side];  // bytes for `side` travel in the direction from the other
  len = std::min(len, d.buf.size() - d.size);
  std::memcpy(d.buf.data() + d.size, data, len);
  d.size += len;
}

bool Splice::pump_direction(int from) {
  Direction& d = dir_[from];
  const int src = fd(from), dst = fd(1 - from);
  const size_t cap = d.buf.size();
  for (;;) {
    bool progress = false;
    while (!d.eof && d.size < cap) {
      const size_t tail = (d.head + d.size) % cap;
      const size_t room = std::min(cap - d.size, cap - tail);
      const ssize_t n = ::read(src, d.buf.data() + tail, room);
      if (n > 0) {
        d.size += static_cast<size_t>(n);
        d.total += static_cast<uint64_t>(n);
        progress = true;
        continue;
      }
      if (n == 0) {
        d.eof = true;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      error_ = std::string(from == 0 ? "upstream" : "downstream") + " read: " + errno_text(errno);
      return false;
    }
    while (d.size > 0) {
      const size_t chunk = std::min(d.size, cap - d.head);
      const ssize_t n = ::send(dst, d.buf.data() + d.head, chunk, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        d.head = (d.head + static_cast<size_t>(n)) % cap;
        d.size -= static_cast<size_t>(n);
        progress = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      error_ = std::string(from == 0 ? "downstream" : "upstream") + " write: " + errno_text(errno);
      return false;
    }
    if (d.size == 0) d.head = 0;
    if (!progress) break;
  }
  if (d.eof && d.size == 0 && !d.shut) {
    ::shutdown(dst, SHUT_WR);
    d.shut = true;
  }
  return true;
}

bool Splice::pump() {
  if (!error_.empty()) return false;
  if (!pump_direction(0) || !pump_direction(1)) {
    reset();
    return false;
  }
  return !(dir_[0].shut && dir_[1].shut);
}

uint32_t Splice::events(int side) const {
  const Direction& out = dir_[side];      // read from this side
  const Direction& in = dir_[1 - side];   // written to this side
  uint32_t ev = 0;
  if (!out.eof && out.size < out.buf.size()) ev |= EPOLLIN | EPOLLRDHUP;
  if (in.size > 0) ev |= EPOLLOUT;
  return ev;
}

void Splice::reset() {
  for (UniqueFd* f : {&a_, &b_}) {
    if (!f->valid()) continue;
    linger lg{1, 0};
    setsockopt(f->get(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    f->reset();
  }
}

void Splice::close() {
  a_.reset();
  b_.reset();
}

}  // namespace mesh::relay
