// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/data_stream.h"

#include <sys/socket.h>

#include <cerrno>
#include <string>

namespace mesh::tcp {

DataStream::DataStream(UniqueFd fd, bool sender, int index, FailureLatch* failure)
    : fd_(std::move(fd)), sender_(sender), index_(index), failure_(failure) {
  set_nonblocking(fd_.get(), true);
}

bool DataStream::push(const Part& part) {
  std::lock_guard<std::mutex> lock(mu_);
  if (count_ == ring_.size() || !fd_.valid()) return false;
  ring_[(head_ + count_) % ring_.size()] = part;
  ++count_;
  unmoved_bytes_.fetch_add(part.length, std::memory_order_acq_rel);
  pushed_bytes_.fetch_add(part.length, std::memory_order_acq_rel);
  queued_.store(count_, std::memory_order_release);
  return true;
}

bool DataStream::pump() {
  std::lock_guard<std::mutex> lock(mu_);
  return pump_locked();
}

bool DataStream::try_pump() {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  return lock.owns_lock() && pump_locked();
}

bool DataStream::pump_locked() {
  bool moved = false;
  while (count_ > 0 && fd_.valid()) {
    Part& part = ring_[head_];
    if (done_ < part.length) {
      const ssize_t n =
          sender_
              ? send(fd_.get(), part.ptr + done_, part.length - done_, MSG_NOSIGNAL | MSG_DONTWAIT)
              : recv(fd_.get(), part.ptr + done_, part.length - done_, MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return moved;
      if (n <= 0) {
        const int err = n == 0 ? 0 : errno;
        const bool remote = n == 0 || err == ECONNRESET || err == EPIPE;
        failure_->fail(
            remote ? ncclRemoteError : ncclSystemError,
            std::string(sender_ ? "send" : "receive") + " on data stream " +
                std::to_string(index_) +
                " failed: " + (n == 0 ? std::string("end of stream") : errno_text(err)) +
                (remote             ? " (the peer closed the connection or its process died)"
                 : err == ETIMEDOUT ? " (no acknowledgement within NCCL_MESH_TCP_USER_TIMEOUT_MS: "
                                      "cable cut or peer hung?)"
                                    : ""));
        count_ = 0;  // nothing more moves on a failed connection
        unmoved_bytes_.store(0, std::memory_order_release);
        queued_.store(0, std::memory_order_release);
        return moved;
      }
      moved = true;
      done_ += static_cast<size_t>(n);
      unmoved_bytes_.fetch_sub(static_cast<size_t>(n), std::memory_order_acq_rel);
      if (done_ < part.length) continue;
    }
    part.pending->fetch_sub(1, std::memory_order_release);
    done_ = 0;
    head_ = (head_ + 1) % ring_.size();
    --count_;
    queued_.store(count_, std::memory_order_release);
  }
  return moved;
}

void DataStream::close() {
  std::lock_guard<std::mutex> lock(mu_);
  if (fd_.valid()) shutdown(fd_.get(), SHUT_RDWR);
  fd_.reset();
  count_ = 0;
  unmoved_bytes_.store(0, std::memory_order_release);
  queued_.store(0, std::memory_order_release);
}

}  // namespace mesh::tcp
