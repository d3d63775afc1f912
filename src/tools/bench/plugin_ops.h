// SPDX-License-Identifier: Apache-2.0
// Windowed traffic over the plugin, shaped like NCCL's proxy: up to `window` requests in flight
// per direction, posted in order, tested oldest first, and a NULL request from isend/irecv just
// means "try again on the next pass". poll() never blocks, so one thread can drive several
// streams (both directions of a pair, or every peer at once in --duration mode).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "context.h"

namespace mesh::bench {

inline constexpr int kMaxWindow = NCCL_NET_MAX_REQUESTS;

// `count` messages of `size` bytes to `peer`. Message i lives in slot i % window of `slots`
// and, with verify on, is filled with its pattern just before it is posted.
class SendStream {
 public:
  SendStream(Context& ctx, int peer, void* mhandle, uint8_t* slots, size_t size, int window,
             uint64_t count, uint32_t stream);
  bool poll();  // true when something was posted or completed
  bool done() const { return completed_ == count_; }
  uint64_t completed() const { return completed_; }
  std::string state() const;

 private:
  Context& ctx_;
  int peer_;
  void* mh_;
  uint8_t* slots_;
  size_t size_;
  int window_;
  uint64_t count_;
  uint32_t stream_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  uint64_t filled_ = 0;  // messages whose slot already holds their pattern
  void* reqs_[kMaxWindow] = {};
};

// `count` messages of up to `size` bytes from `peer`, each checked when it completes.
class RecvStream {
 public:
  RecvStream(Context& ctx, int peer, void* mhandle, uint8_t* slots, size_t size, int window,
             uint64_t count, uint32_t stream);
  bool poll();
  bool done() const { return completed_ == count_; }
  uint64_t completed() const { return completed_; }
  std::string state() const;

 private:
  Context& ctx_;
  int peer_;
  void* mh_;
  uint8_t* slots_;
  size_t size_;
  int window_;
  uint64_t count_;
  uint32_t stream_;
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  void* reqs_[kMaxWindow] = {};
};

// One message, for acknowledgements and ping-pong. poll() posts it first if needed (retrying
// while the plugin says not now), then tests it. size() is what test() reported.
class SingleOp {
 public:
  enum Kind { kSend, kRecv };
  SingleOp(Context& ctx, Kind kind, int peer, void* mhandle, void* data, size_t size);
  bool poll();  // true when it was posted or completed in this call
  bool done() const { return done_; }
  int size() const { return size_; }
  std::string state() const;

 private:
  Context& ctx_;
  Kind kind_;
  int peer_;
  void* mh_;
  void* data_;
  size_t bytes_;
  void* req_ = nullptr;
  bool done_ = false;
  int size_ = 0;
};

}  // namespace mesh::bench
