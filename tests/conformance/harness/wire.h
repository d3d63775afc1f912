// SPDX-License-Identifier: Apache-2.0
// Framing and field encoding for the out-of-band channel between the test and its peer process
// (the suite's stand-in for NCCL's bootstrap): length-prefixed frames over a socketpair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/timing.h"

namespace conformance {

class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void bytes(const void* data, size_t size);
  void str(const std::string& s);
  const std::vector<uint8_t>& data() const { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

// Reads fields in order. Reading past the end yields zeros and clears ok(): callers check once.
class Reader {
 public:
  explicit Reader(std::vector<uint8_t> data) : buf_(std::move(data)) {}
  uint8_t u8();
  uint32_t u32();
  uint64_t u64();
  int32_t i32() { return static_cast<int32_t>(u32()); }
  bool boolean() { return u8() != 0; }
  void bytes(void* out, size_t size);
  std::string str();
  bool ok() const { return ok_; }
  void fail() { ok_ = false; }
  bool at_end() const { return pos_ == buf_.size(); }

 private:
  bool take(size_t n);
  std::vector<uint8_t> buf_;
  size_t pos_ = 0;
  bool ok_ = true;
};

enum class FrameStatus { kOk, kTimeout, kClosed, kError };

// Writes a whole frame (never raises SIGPIPE). Returns false with *error set on failure.
bool write_frame(int fd, const std::vector<uint8_t>& payload, std::string* error);
// Waits up to `timeout` for a whole frame.
FrameStatus read_frame(int fd, Millis timeout, std::vector<uint8_t>* payload, std::string* error);
// True when at least one byte is readable now (a reply has started to arrive).
bool frame_pending(int fd);

}  // namespace conformance
