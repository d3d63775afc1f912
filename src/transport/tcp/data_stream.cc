// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/data_stream.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

namespace mesh::tcp {

DataStream::DataStream(UniqueFd fd, bool sender, int index, FailureLatch* failure)
    : fd_(std::move(fd)), sender_(sender), index_(index), failure_(failure) {
  set_nonblocking(fd_.get(), true);
}

namespace {

// Bytes a part puts on the stream: its header (sender, part 0) and its payload.
size_t part_bytes(const Part& part) {
  return part.length + (part.header != nullptr ? kHeaderSize : 0);
}

}  // namespace

DataStream::Guard::Guard(DataStream& s, bool wait) {
  if (!s.shared_.load(std::memory_order_acquire)) return;
  lock_ = std::unique_lock<std::mutex>(s.mu_, std::defer_lock);
  if (wait) {
    lock_.lock();
  } else {
    held_ = lock_.try_lock();
  }
}

bool DataStream::push(const Part& part) {
  const Guard guard(*this, /*wait=*/true);
  if (count_ == ring_.size() || !fd_.valid()) return false;
  ring_[(head_ + count_) % ring_.size()] = part;
  ++count_;
  unmoved_bytes_.fetch_add(part_bytes(part), std::memory_order_acq_rel);
  pushed_bytes_.fetch_add(part_bytes(part), std::memory_order_acq_rel);
  queued_.store(count_, std::memory_order_release);
  return true;
}

bool DataStream::pump() {
  const Guard guard(*this, /*wait=*/true);
  return pump_locked();
}

bool DataStream::try_pump() {
  const Guard guard(*this, /*wait=*/false);
  return guard.held() && pump_locked();
}

ssize_t DataStream::read_header(uint8_t* dst, size_t want) {
  const Guard guard(*this, /*wait=*/false);
  // Parts still queued: their bytes come first on the stream; pump() moves them.
  if (!guard.held() || count_ > 0 || !fd_.valid()) return 0;
  return header_locked(dst, want);
}

ssize_t DataStream::header_locked(uint8_t* dst, size_t want) {
  if (ended_) return kEndOfStream;
  // Nothing of this header read yet (and nothing staged): an end of stream here is the sender's.
  const ssize_t n = receive(dst, want, /*may_end=*/want == kHeaderSize);
  if (n == kEndOfStream) ended_ = true;
  return n == kWouldBlock ? 0 : n;
}

bool DataStream::pump_locked() {
  bool moved = false;
  while (count_ > 0 && fd_.valid()) {
    Part& part = ring_[head_];
    const size_t total = part_bytes(part);
    while (done_ < total) {
      const ssize_t n = sender_ ? send_part(part) : receive(part.ptr + done_, total - done_);
      if (n < 0) return moved;  // would block, or failed (fail_io stopped the stream)
      moved = true;
      done_ += static_cast<size_t>(n);
      unmoved_bytes_.fetch_sub(static_cast<size_t>(n), std::memory_order_acq_rel);
    }
    part.pending->fetch_sub(1, std::memory_order_release);
    done_ = 0;
    head_ = (head_ + 1) % ring_.size();
    --count_;
    queued_.store(count_, std::memory_order_release);
  }
  return moved;
}

// The rest of the head part: header and payload in one sendmsg while the header is not out. A
// small message's header and payload are copied into one buffer for send() instead: the msghdr
// and its two iovecs cost the kernel more than the copy of a few cache lines (3 ranks, 1 KiB
// all-reduce on one core: sendmsg's entry and iovec import were 2% of the plugin's CPU samples).
// A partial send leaves done_ past 0, and the rest goes by the iovecs.
ssize_t DataStream::send_part(const Part& part) {
  iovec iov[2];
  size_t cnt = 0;
  const size_t header = part.header != nullptr ? kHeaderSize : 0;
  if (done_ < header) {
    iov[cnt++] = {const_cast<uint8_t*>(part.header) + done_, header - done_};
    if (part.length > 0) iov[cnt++] = {part.ptr, part.length};
  } else {
    iov[cnt++] = {part.ptr + (done_ - header), part.length - (done_ - header)};
  }
  const bool small = done_ == 0 && header > 0 && header + part.length <= kSmallSendBytes;
  uint8_t one[kSmallSendBytes];
  if (small) {
    std::memcpy(one, part.header, header);
    if (part.length > 0) std::memcpy(one + header, part.ptr, part.length);
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = cnt;
  for (;;) {
    const ssize_t n = small
                          ? send(fd_.get(), one, header + part.length, MSG_NOSIGNAL | MSG_DONTWAIT)
                          : sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return kWouldBlock;
    if (n <= 0) {
      fail_io(n, errno);
      return -1;
    }
    return n;
  }
}

// Staged bytes first; then a small want reads what has arrived into the stage (several small
// messages, or a header and its payload, in one recv), a large one straight into dst, with
// what follows it on the stream into the stage in the same recvmsg(): the next message's header
// and the start of its payload, often there already in a pipeline, then cost no read of their
// own. Nothing is ever read into dst past `want`: a posted buffer beyond the message's end is
// NCCL's. (A header read that guessed the payload's length from the message before, 44edcc7,
// wrote the next message's bytes there when the guess was long; measurements.md, twenty-eighth
// pass.)
ssize_t DataStream::receive(uint8_t* dst, size_t want, bool may_end) {
  if (stage_begin_ == stage_end_) {
    const bool staged = want < kStageBytes / 2;
    iovec iov[2] = {{dst, want}, {stage_.data(), kStageBytes}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    for (;;) {
      const ssize_t n = staged ? recv(fd_.get(), stage_.data(), kStageBytes, MSG_DONTWAIT)
                               : recvmsg(fd_.get(), &msg, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return kWouldBlock;
      if (n == 0 && may_end) return kEndOfStream;
      if (n <= 0) {
        fail_io(n, errno);
        return -1;
      }
      if (!staged) {
        const auto got = static_cast<size_t>(n);
        if (got <= want) return n;
        stage_begin_ = 0;
        stage_end_ = got - want;
        return static_cast<ssize_t>(want);
      }
      stage_begin_ = 0;
      stage_end_ = static_cast<size_t>(n);
      break;
    }
  }
  const size_t k = std::min(want, stage_end_ - stage_begin_);
  std::memcpy(dst, stage_.data() + stage_begin_, k);
  stage_begin_ += k;
  return static_cast<ssize_t>(k);
}

void DataStream::fail_io(ssize_t n, int err) {
  if (n == 0) err = 0;
  const bool remote = n == 0 || err == ECONNRESET || err == EPIPE;
  failure_->fail(
      remote ? ncclRemoteError : ncclSystemError,
      std::string(sender_ ? "send" : "receive") + " on data stream " + std::to_string(index_) +
          " failed: " + (n == 0 ? std::string("end of stream") : errno_text(err)) +
          (remote             ? " (the peer closed the connection or its process died)"
           : err == ETIMEDOUT ? " (no acknowledgement within NCCL_MESH_TCP_USER_TIMEOUT_MS: "
                                "cable cut or peer hung?)"
                              : ""));
  count_ = 0;  // nothing more moves on a failed connection
  unmoved_bytes_.store(0, std::memory_order_release);
  queued_.store(0, std::memory_order_release);
}

void DataStream::close() {
  const Guard guard(*this, /*wait=*/true);
  if (fd_.valid()) shutdown(fd_.get(), SHUT_RDWR);
  fd_.reset();
  count_ = 0;
  unmoved_bytes_.store(0, std::memory_order_release);
  queued_.store(0, std::memory_order_release);
}

}  // namespace mesh::tcp
