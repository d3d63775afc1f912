// SPDX-License-Identifier: Apache-2.0
#include "context.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <cstring>

#include "sizes.h"

namespace mesh::bench {
namespace {
constexpr uint64_t kMaxMismatchReports = 10;
}

void Context::progress(const std::string& line) const {
  if (opt.quiet) return;
  fmt::print(stderr, "[rank {}] {}\n", rank, line);
  std::fflush(stderr);
}

void Context::report_failure(const std::string& detail) {
  ++mismatches;
  if (mismatches > kMaxMismatchReports) return;
  fmt::print(stderr, "VERIFY rank {}: {}{}\n", rank, detail,
             mismatches == kMaxMismatchReports ? " (further mismatches are only counted)" : "");
  std::fflush(stderr);
}

void Context::report_mismatch(const char* transport, int sender, uint64_t index,
                              size_t expected_size, size_t got_size,
                              const std::optional<Mismatch>& m) {
  std::string detail;
  if (got_size != expected_size) {
    detail = fmt::format("received {} bytes, expected {}", got_size, expected_size);
  } else if (m) {
    detail =
        fmt::format("{} of {} bytes differ, first at offset {}: got 0x{:02x}, expected 0x{:02x}",
                    m->bad_bytes, expected_size, m->offset, m->got, m->expected);
  }
  report_failure(fmt::format("{} message {} (stream 0x{:08x}) from rank {}: {}", transport,
                             index & 0xffffffffu, static_cast<uint32_t>(index >> 32), sender,
                             detail));
}

bool Context::verify_message(const char* transport, const void* buf, size_t got_size,
                             size_t expected_size, int sender, uint64_t index) {
  if (got_size != expected_size) {
    report_mismatch(transport, sender, index, expected_size, got_size, std::nullopt);
    return false;
  }
  const auto m = check_pattern(buf, expected_size, sender, index);
  if (m) {
    report_mismatch(transport, sender, index, expected_size, got_size, m);
    return false;
  }
  return true;
}

Arena::Arena(Context& ctx, size_t bytes) : ctx_(ctx), size_(bytes == 0 ? 4096 : bytes) {
  void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    throw setup_error(
        fmt::format("cannot map {} of buffers: {}", format_size(size_), std::strerror(errno)));
  }
  base_ = static_cast<uint8_t*>(p);
  std::memset(base_, 0, size_);  // pre-fault every page outside the timed loops
  const int channels = ctx.channels();
  send_mh_.assign(static_cast<size_t>(channels * ctx.nranks), nullptr);
  recv_mh_.assign(static_cast<size_t>(channels * ctx.nranks), nullptr);
  for (int ch = 0; ch < channels; ++ch) {
    for (int peer = 0; peer < ctx.nranks; ++peer) {
      if (peer == ctx.rank) continue;
      PeerLink& l = ctx.link(peer, ch);
      const auto i = static_cast<size_t>(ch * ctx.nranks + peer);
      send_mh_[i] = ctx.net->reg_mr(l.send_comm, base_, size_, peer);
      recv_mh_[i] = ctx.net->reg_mr(l.recv_comm, base_, size_, peer);
    }
  }
}

void Arena::release() {
  for (int ch = 0; ch < ctx_.channels(); ++ch) {
    for (int peer = 0; peer < ctx_.nranks; ++peer) {
      if (peer == ctx_.rank) continue;
      PeerLink& l = ctx_.link(peer, ch);
      const auto i = static_cast<size_t>(ch * ctx_.nranks + peer);
      if (send_mh_[i] != nullptr) ctx_.net->dereg_mr(l.send_comm, send_mh_[i], peer);
      if (recv_mh_[i] != nullptr) ctx_.net->dereg_mr(l.recv_comm, recv_mh_[i], peer);
      send_mh_[i] = recv_mh_[i] = nullptr;
    }
  }
}

Arena::~Arena() {
  if (base_ != nullptr) munmap(base_, size_);
}

}  // namespace mesh::bench
