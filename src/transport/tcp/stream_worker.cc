#include "transport/tcp/stream_worker.h"

#include <pthread.h>
#include <sys/socket.h>

#include <cerrno>

namespace mesh::tcp {

StreamWorker::StreamWorker(UniqueFd fd, bool sender, int index, ErrorFn on_error)
    : fd_(std::move(fd)), sender_(sender), index_(index), on_error_(std::move(on_error)) {
  set_nonblocking(fd_.get(), false);
  thread_ = std::thread([this] { run(); });
}

StreamWorker::~StreamWorker() {
  stop();
}

bool StreamWorker::push(const Part& part) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == ring_.size() || stopping_) return false;
    ring_[(head_ + count_) % ring_.size()] = part;
    ++count_;
  }
  cv_.notify_one();
  return true;
}

void StreamWorker::request_stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (fd_.valid()) shutdown(fd_.get(), SHUT_RDWR);  // wakes a blocked send/recv
}

void StreamWorker::join() {
  if (thread_.joinable()) thread_.join();
  fd_.reset();
}

void StreamWorker::run() {
  char name[16];
  snprintf(name, sizeof(name), "mesh-%s%d", sender_ ? "tx" : "rx", index_);
  pthread_setname_np(pthread_self(), name);
  for (;;) {
    Part part;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return count_ > 0 || stopping_; });
      if (stopping_) return;
      part = ring_[head_];
    }
    const bool ok = sender_ ? send_all(fd_.get(), part.ptr, part.length)
                            : recv_all(fd_.get(), part.ptr, part.length);
    if (!ok) {
      const int err = errno;
      bool stopping;
      {
        std::lock_guard<std::mutex> lock(mu_);
        stopping = stopping_;
      }
      if (!stopping) {
        const bool remote = err == ECONNRESET || err == EPIPE;
        on_error_(remote ? ncclRemoteError : ncclSystemError,
                  std::string(sender_ ? "send" : "receive") + " on data stream " +
                      std::to_string(index_) + " failed: " + errno_text(err) +
                      (remote             ? " (the peer closed the connection or its process died)"
                       : err == ETIMEDOUT ? " (no acknowledgement within "
                                            "NCCL_MESH_TCP_USER_TIMEOUT_MS: cable cut or "
                                            "peer hung?)"
                                          : ""));
      }
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      head_ = (head_ + 1) % ring_.size();
      --count_;
    }
    part.pending->fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace mesh::tcp
