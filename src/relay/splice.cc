// SPDX-License-Identifier: Apache-2.0
#include "relay/splice.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mesh::relay {

namespace {
// Discards a SIGPIPE that the last splice(2) raised for this thread (blocked, so still pending).
void consume_sigpipe() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  sigset_t pending;
  sigpending(&pending);
  if (!sigismember(&pending, SIGPIPE)) return;
  const timespec zero{0, 0};
  sigtimedwait(&set, nullptr, &zero);
}
}  // namespace

void Splice::block_sigpipe_in_this_thread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

Splice::Splice(UniqueFd a, UniqueFd b, size_t capacity, bool zero_copy)
    : a_(std::move(a)), b_(std::move(b)) {
  bool pipes = zero_copy;
  for (Direction& d : dir_) {
    int p[2];
    if (!pipes || pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
      pipes = false;
      break;
    }
    d.pipe_r.reset(p[0]);
    d.pipe_w.reset(p[1]);
    // The pipe holds what the ring buffer would (rounded to pages by the kernel; an
    // unprivileged process gets at most /proc/sys/fs/pipe-max-size, 1 MiB by default).
    const int got = fcntl(d.pipe_w.get(), F_SETPIPE_SZ, static_cast<int>(capacity));
    d.cap = got > 0 ? static_cast<size_t>(got) : 65536;
  }
  for (Direction& d : dir_) {
    if (!pipes) {
      d.pipe_r.reset();
      d.pipe_w.reset();
      d.buf.resize(capacity);
      d.cap = capacity;
    }
  }
}

void Splice::preload(int side, const uint8_t* data, size_t len) {
  Direction& d = dir_[1 - side];  // bytes for `side` travel in the direction from the other
  len = std::min(len, d.cap - d.size);
  if (d.pipe_w.valid()) {
    const ssize_t n = ::write(d.pipe_w.get(), data, len);  // an empty pipe takes a few bytes
    d.size += n > 0 ? static_cast<size_t>(n) : 0;
    return;
  }
  std::memcpy(d.buf.data() + d.size, data, len);
  d.size += len;
}

bool Splice::pump_pipe(int from, bool* progress) {
  Direction& d = dir_[from];
  const int src = fd(from), dst = fd(1 - from);
  bool read_failed = false;
  while (!d.eof && !d.pipe_full && d.size < d.cap) {
    const ssize_t n = ::splice(src, nullptr, d.pipe_w.get(), nullptr, d.cap - d.size,
                               SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      d.size += static_cast<size_t>(n);
      d.total += static_cast<uint64_t>(n);
      *progress = true;
      continue;
    }
    if (n == 0) {
      d.eof = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      // Either the socket is empty or the pipe has no free slot (a slot per page fragment, so
      // it can fill before `cap` bytes). With bytes in the pipe, assume full until they drain:
      // the destination's EPOLLOUT brings us back, so no busy loop on a readable socket.
      if (d.size > 0) d.pipe_full = true;
      break;
    }
    // The side failed (reset): what it sent before still goes out below, then the pair ends.
    fail(std::string(from == 0 ? "upstream" : "downstream") + " read: " + errno_text(errno));
    read_failed = true;
    break;
  }
  while (d.size > 0) {
    const ssize_t n =
        ::splice(d.pipe_r.get(), nullptr, dst, nullptr, d.size, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (n > 0) {
      d.size -= static_cast<size_t>(n);
      d.pipe_full = false;
      *progress = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    const int err = errno;
    if (n < 0 && err == EPIPE) consume_sigpipe();
    fail(std::string(from == 0 ? "downstream" : "upstream") +
         " write: " + (n == 0 ? std::string("pipe empty") : errno_text(err)));
    return false;
  }
  if (d.size == 0) d.pipe_full = false;
  return !read_failed;
}

bool Splice::pump_copy(int from, bool* any) {
  Direction& d = dir_[from];
  const int src = fd(from), dst = fd(1 - from);
  const size_t cap = d.buf.size();
  bool read_failed = false;
  for (;;) {
    bool progress = false;
    while (!read_failed && !d.eof && d.size < cap) {
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
      // The side failed (reset): what it sent before still goes out below, then the pair ends.
      fail(std::string(from == 0 ? "upstream" : "downstream") + " read: " + errno_text(errno));
      read_failed = true;
      break;
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
      fail(std::string(from == 0 ? "downstream" : "upstream") + " write: " + errno_text(errno));
      return false;
    }
    if (d.size == 0) d.head = 0;
    if (progress) *any = true;
    if (!progress || read_failed) break;
  }
  return !read_failed;
}

bool Splice::pump_direction(int from) {
  Direction& d = dir_[from];
  const int dst = fd(1 - from);
  for (;;) {
    bool progress = false;
    if (!(d.pipe_w.valid() ? pump_pipe(from, &progress) : pump_copy(from, &progress))) return false;
    if (!progress) break;
  }
  if (d.eof && d.size == 0 && !d.shut) {
    ::shutdown(dst, SHUT_WR);
    d.shut = true;
  }
  return true;
}

// Both directions are pumped even when the first fails: a side that reset its connection may
// have answered first (a handshake listener's "busy", closing a socket whose hello it did not
// read), and TCP delivers what a peer sent before its reset; so does the relay, as far as the
// other side takes it without waiting. Then both are reset.
bool Splice::pump() {
  if (!error_.empty()) return false;
  const bool up_ok = pump_direction(0);
  const bool down_ok = pump_direction(1);
  if (!up_ok || !down_ok) {
    reset();
    return false;
  }
  return !(dir_[0].shut && dir_[1].shut);
}

void Splice::fail(const std::string& why) {
  if (error_.empty()) error_ = why;  // the first cause; what follows is its consequence
}

uint32_t Splice::events(int side) const {
  const Direction& out = dir_[side];     // read from this side
  const Direction& in = dir_[1 - side];  // written to this side
  uint32_t ev = 0;
  if (!out.eof && !out.pipe_full && out.size < out.cap) ev |= EPOLLIN | EPOLLRDHUP;
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
