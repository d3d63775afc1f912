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

// One recvmsg() for the header and what follows it, where the stage path would need two (a
// header, then the rest of a payload larger than the stage): the header into its buffer, up to
// `expect` bytes into the message's buffer, more into the stage. The caller guesses `expect`
// (the previous message's first part: a ring's or a pipeline's messages have one size), and the
// header then says where the part ends: a shorter part gives the bytes read past its end back
// (carry()), a longer one reads the rest as before. A 64 KiB-1 MiB message whose bytes had all
// arrived took two recv() where a plain TCP ring that knows its sizes takes one (4 ranks,
// 256 KiB all-reduce: 1.04 payload reads per message besides the header's, measurements.md).
ssize_t DataStream::read_header_and_payload(uint8_t* header, uint8_t* data, size_t expect,
                                            size_t* payload) {
  *payload = 0;
  const Guard guard(*this, /*wait=*/false);
  if (!guard.held() || count_ > 0 || !fd_.valid()) return 0;
  // Staged bytes are the stream's next ones: they are read first, the stage way.
  if (ended_ || stage_begin_ != stage_end_ || expect == 0)
    return header_locked(header, kHeaderSize);
  // A stage grown by carry() and served since goes back to its usual size.
  if (stage_.size() > kStageBytes) stage_ = std::vector<uint8_t>(kStageBytes);
  iovec iov[3] = {{header, kHeaderSize}, {data, expect}, {stage_.data(), kStageBytes}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 3;
  ssize_t n = 0;
  do {
    n = recvmsg(fd_.get(), &msg, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  if (n == 0) {
    ended_ = true;
    return kEndOfStream;
  }
  if (n < 0) {
    fail_io(n, errno);
    return -1;
  }
  const auto got = static_cast<size_t>(n);
  if (got <= kHeaderSize) return n;
  *payload = std::min(got - kHeaderSize, expect);
  if (got > kHeaderSize + expect) {
    stage_begin_ = 0;
    stage_end_ = got - kHeaderSize - expect;
  }
  return static_cast<ssize_t>(kHeaderSize);
}

void DataStream::carry(const uint8_t* bytes, size_t len) {
  const Guard guard(*this, /*wait=*/true);
  const size_t staged = stage_end_ - stage_begin_;
  if (len + staged > stage_.size()) {
    std::vector<uint8_t> grown(len + staged);
    std::memcpy(grown.data() + len, stage_.data() + stage_begin_, staged);
    stage_ = std::move(grown);
  } else {
    std::memmove(stage_.data() + len, stage_.data() + stage_begin_, staged);
  }
  std::memcpy(stage_.data(), bytes, len);
  stage_begin_ = 0;
  stage_end_ = len + staged;
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
// messages, or a header and its payload, in one recv), a large one straight into dst.
ssize_t DataStream::receive(uint8_t* dst, size_t want, bool may_end) {
  if (stage_begin_ == stage_end_) {
    const bool staged = want < kStageBytes / 2;
    for (;;) {
      const ssize_t n =
          recv(fd_.get(), staged ? stage_.data() : dst, staged ? kStageBytes : want, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return kWouldBlock;
      if (n == 0 && may_end) return kEndOfStream;
      if (n <= 0) {
        fail_io(n, errno);
        return -1;
      }
      if (!staged) return n;
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
