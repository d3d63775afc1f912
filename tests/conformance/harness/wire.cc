// SPDX-License-Identifier: Apache-2.0
#include "harness/wire.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace conformance {

namespace {
constexpr uint32_t kMaxFrame = 64u << 20;  // far above any real request; guards a corrupt length
}

void Writer::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Writer::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void Writer::bytes(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  buf_.insert(buf_.end(), p, p + size);
}

void Writer::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  bytes(s.data(), s.size());
}

bool Reader::take(size_t n) {
  if (!ok_ || buf_.size() - pos_ < n) {
    ok_ = false;
    return false;
  }
  return true;
}

uint8_t Reader::u8() {
  if (!take(1)) return 0;
  return buf_[pos_++];
}

uint32_t Reader::u32() {
  if (!take(4)) return 0;
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(buf_[pos_++]) << (8 * i);
  return v;
}

uint64_t Reader::u64() {
  if (!take(8)) return 0;
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(buf_[pos_++]) << (8 * i);
  return v;
}

void Reader::bytes(void* out, size_t size) {
  if (!take(size)) {
    std::memset(out, 0, size);
    return;
  }
  std::memcpy(out, buf_.data() + pos_, size);
  pos_ += size;
}

std::string Reader::str() {
  const uint32_t n = u32();
  if (!take(n)) return {};
  std::string s(reinterpret_cast<const char*>(buf_.data() + pos_), n);
  pos_ += n;
  return s;
}

bool write_frame(int fd, const std::vector<uint8_t>& payload, std::string* error) {
  Writer header;
  header.u32(static_cast<uint32_t>(payload.size()));
  for (const std::vector<uint8_t>* part : {&header.data(), &payload}) {
    size_t off = 0;
    while (off < part->size()) {
      const ssize_t n = send(fd, part->data() + off, part->size() - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *error = std::string("control channel write: ") + std::strerror(errno);
        return false;
      }
      off += static_cast<size_t>(n);
    }
  }
  return true;
}

namespace {

FrameStatus read_exact(int fd, uint8_t* out, size_t size, Clock::time_point deadline,
                       std::string* error) {
  size_t off = 0;
  while (off < size) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
    if (left <= 0) return FrameStatus::kTimeout;
    pollfd p{fd, POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *error = std::string("control channel poll: ") + std::strerror(errno);
      return FrameStatus::kError;
    }
    if (r == 0) continue;
    const ssize_t n = recv(fd, out + off, size - off, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return FrameStatus::kClosed;
    if (n < 0) {
      *error = std::string("control channel read: ") + std::strerror(errno);
      return errno == ECONNRESET ? FrameStatus::kClosed : FrameStatus::kError;
    }
    off += static_cast<size_t>(n);
  }
  return FrameStatus::kOk;
}

}  // namespace

FrameStatus read_frame(int fd, Millis timeout, std::vector<uint8_t>* payload, std::string* error) {
  const auto deadline = Clock::now() + timeout;
  uint8_t header[4];
  FrameStatus st = read_exact(fd, header, sizeof(header), deadline, error);
  if (st != FrameStatus::kOk) return st;
  const uint32_t size = static_cast<uint32_t>(header[0]) | static_cast<uint32_t>(header[1]) << 8 |
                        static_cast<uint32_t>(header[2]) << 16 |
                        static_cast<uint32_t>(header[3]) << 24;
  if (size > kMaxFrame) {
    *error = "control channel frame of " + std::to_string(size) + " bytes";
    return FrameStatus::kError;
  }
  payload->resize(size);
  return read_exact(fd, payload->data(), size, deadline, error);
}

bool frame_pending(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & POLLIN) != 0;
}

}  // namespace conformance
