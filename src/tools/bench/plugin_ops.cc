// SPDX-License-Identifier: Apache-2.0
#include "plugin_ops.h"

#include <fmt/format.h>

namespace mesh::bench {

SendStream::SendStream(Context& ctx, int peer, void* mhandle, uint8_t* slots, size_t size,
                       int window, uint64_t count, uint32_t stream)
    : ctx_(ctx),
      peer_(peer),
      mh_(mhandle),
      slots_(slots),
      size_(size),
      window_(window),
      count_(count),
      stream_(stream) {}

bool SendStream::poll() {
  bool moved = false;
  // Post while the window has room and the plugin accepts.
  while (posted_ < count_ && posted_ - completed_ < static_cast<uint64_t>(window_)) {
    uint8_t* slot = slots_ + (posted_ % static_cast<uint64_t>(window_)) * size_;
    if (ctx_.opt.verify && filled_ == posted_) {
      fill_pattern(slot, size_, ctx_.rank, message_index(stream_, posted_));
      ++filled_;
    }
    void* req = ctx_.net->isend(ctx_.link(peer_).send_comm, slot, size_, ctx_.rank, mh_, peer_);
    if (req == nullptr) break;  // plugin busy: retry on the next pass, same slot, same data
    reqs_[posted_ % static_cast<uint64_t>(window_)] = req;
    ++posted_;
    moved = true;
  }
  // Complete in order, oldest first, as NCCL does.
  while (completed_ < posted_) {
    int size = 0;
    if (!ctx_.net->test(reqs_[completed_ % static_cast<uint64_t>(window_)], &size, peer_)) break;
    ++completed_;
    moved = true;
  }
  return moved;
}

std::string SendStream::state() const {
  return fmt::format("isend/test to rank {}: {} of {} messages of {} B complete, {} in flight",
                     peer_, completed_, count_, size_, posted_ - completed_);
}

RecvStream::RecvStream(Context& ctx, int peer, void* mhandle, uint8_t* slots, size_t size,
                       int window, uint64_t count, uint32_t stream)
    : ctx_(ctx),
      peer_(peer),
      mh_(mhandle),
      slots_(slots),
      size_(size),
      window_(window),
      count_(count),
      stream_(stream) {}

bool RecvStream::poll() {
  bool moved = false;
  while (posted_ < count_ && posted_ - completed_ < static_cast<uint64_t>(window_)) {
    uint8_t* slot = slots_ + (posted_ % static_cast<uint64_t>(window_)) * size_;
    void* req = ctx_.net->irecv(ctx_.link(peer_).recv_comm, slot, size_, peer_, mh_, peer_);
    if (req == nullptr) break;
    reqs_[posted_ % static_cast<uint64_t>(window_)] = req;
    ++posted_;
    moved = true;
  }
  while (completed_ < posted_) {
    int size = 0;
    if (!ctx_.net->test(reqs_[completed_ % static_cast<uint64_t>(window_)], &size, peer_)) break;
    if (ctx_.opt.verify) {
      const uint8_t* slot = slots_ + (completed_ % static_cast<uint64_t>(window_)) * size_;
      ctx_.verify_message("plugin", slot, static_cast<size_t>(size), size_, peer_,
                          message_index(stream_, completed_));
    } else if (static_cast<size_t>(size) != size_) {
      ctx_.report_mismatch("plugin", peer_, message_index(stream_, completed_), size_,
                           static_cast<size_t>(size), std::nullopt);
    }
    ++completed_;
    moved = true;
  }
  return moved;
}

std::string RecvStream::state() const {
  return fmt::format("irecv/test from rank {}: {} of {} messages of {} B complete, {} posted",
                     peer_, completed_, count_, size_, posted_ - completed_);
}

SingleOp::SingleOp(Context& ctx, Kind kind, int peer, void* mhandle, void* data, size_t size)
    : ctx_(ctx), kind_(kind), peer_(peer), mh_(mhandle), data_(data), bytes_(size) {}

bool SingleOp::poll() {
  if (done_) return false;
  bool moved = false;
  if (req_ == nullptr) {
    auto& l = ctx_.link(peer_);
    req_ = kind_ == kSend ? ctx_.net->isend(l.send_comm, data_, bytes_, ctx_.rank, mh_, peer_)
                          : ctx_.net->irecv(l.recv_comm, data_, bytes_, peer_, mh_, peer_);
    if (req_ == nullptr) return false;
    moved = true;
  }
  done_ = ctx_.net->test(req_, &size_, peer_);
  return moved || done_;
}

std::string SingleOp::state() const {
  return fmt::format("{} of {} B {} rank {} ({})", kind_ == kSend ? "isend" : "irecv", bytes_,
                     kind_ == kSend ? "to" : "from", peer_,
                     req_ == nullptr ? "not posted yet" : "test not done");
}

}  // namespace mesh::bench
