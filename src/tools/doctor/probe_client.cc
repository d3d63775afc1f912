// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/probe_client.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "tools/doctor/probe_protocol.h"
#include "tools/doctor/probe_socket.h"
#include "util/byte_order.h"
#include "util/ipv4.h"

namespace mesh::doctor::probe {
namespace {

using Clock = std::chrono::steady_clock;

struct Conn {
  uint32_t local;
  uint32_t peer;
  const ProbeParams& params;

  // Connected socket with the request already sent; invalid with *error otherwise.
  UniqueFd open(Op op, uint32_t arg, std::string* error) const {
    UniqueFd fd = connect_bound(local, peer, params.port, params.connect_timeout_ms, error);
    if (!fd.valid()) return fd;
    // Longer than the server's own limits, so the server's answer (or EOF) comes first.
    set_io_timeout(fd.get(), static_cast<int>(kMaxDurationMs) + 10000);
    const auto req = encode_request({op, arg});
    if (!send_all(fd.get(), req.data(), req.size())) {
      *error = "sending the request: " + errno_text(errno);
      return {};
    }
    return fd;
  }
};

uint32_t duration_ms(const ProbeParams& p) {
  return static_cast<uint32_t>(std::clamp(p.seconds, 0.05, kMaxDurationMs / 1000.0) * 1000);
}

bool run_info(const Conn& c, CableProbe* out) {
  UniqueFd fd = c.open(Op::kInfo, 0, &out->error);
  if (!fd.valid()) return false;
  uint8_t len_bytes[4];
  if (!recv_all(fd.get(), len_bytes, sizeof(len_bytes))) {
    out->error = "INFO: " + errno_text(errno) + " (is the peer a nccl-mesh-doctor --serve?)";
    return false;
  }
  const uint32_t len = get_u32(len_bytes);
  if (len > kMaxInfoBytes) {
    out->error = "INFO: reply of " + std::to_string(len) + " bytes is too large";
    return false;
  }
  std::string text(len, '\0');
  if (!recv_all(fd.get(), text.data(), len)) {
    out->error = "INFO: " + errno_text(errno);
    return false;
  }
  std::string why;
  out->info = decode_info(text, &why);
  if (!out->info) out->error = why;
  return out->info.has_value();
}

bool run_ping(const Conn& c, CableProbe* out) {
  const uint32_t n = static_cast<uint32_t>(std::clamp(c.params.pings, 1, 1000));
  UniqueFd fd = c.open(Op::kPing, n, &out->error);
  if (!fd.valid()) return false;
  std::vector<double> rtts;
  for (uint32_t i = 0; i < n; ++i) {
    uint8_t stamp[8];
    put_u64(stamp, i);
    const auto t0 = Clock::now();
    if (!send_all(fd.get(), stamp, sizeof(stamp)) || !recv_all(fd.get(), stamp, sizeof(stamp))) {
      out->error = "PING: " + errno_text(errno);
      return false;
    }
    rtts.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  std::sort(rtts.begin(), rtts.end());
  out->rtt_min_us = rtts.front();
  out->rtt_median_us = rtts[rtts.size() / 2];
  return true;
}

// `streams` parallel SINK (send) or SOURCE (receive) connections; MB/s over all of them, from
// the first connect to the last byte (SINK: to the server's count, so it is received data).
bool run_bandwidth(const Conn& c, Op op, double* mbytes_per_s, std::string* error) {
  const int streams = std::clamp(c.params.streams, 1, 64);
  const uint32_t ms = duration_ms(c.params);
  std::vector<uint64_t> bytes(static_cast<size_t>(streams), 0);
  std::vector<std::string> errors(static_cast<size_t>(streams));
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (size_t s = 0; s < static_cast<size_t>(streams); ++s) {
    threads.emplace_back([&, s] {
      std::string& err = errors[s];
      UniqueFd fd = c.open(op, ms, &err);
      if (!fd.valid()) return;
      std::vector<char> buf(kIoChunk, 'd');
      if (op == Op::kSink) {
        const auto end = Clock::now() + std::chrono::milliseconds(ms);
        while (Clock::now() < end) {
          if (!send_all(fd.get(), buf.data(), buf.size())) {
            err = "SINK: " + errno_text(errno);
            return;
          }
        }
        ::shutdown(fd.get(), SHUT_WR);
        uint8_t count[8];
        if (!recv_all(fd.get(), count, sizeof(count))) {
          err = "SINK: no byte count from the peer: " + errno_text(errno);
          return;
        }
        bytes[s] = get_u64(count);
      } else {
        for (;;) {
          const ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) {
            err = "SOURCE: " + errno_text(errno);
            return;
          }
          if (n == 0) break;
          bytes[s] += static_cast<uint64_t>(n);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const std::string& e : errors) {
    if (!e.empty()) {
      *error = e;
      return false;
    }
  }
  uint64_t total = 0;
  for (uint64_t b : bytes) total += b;
  *mbytes_per_s = secs > 0 ? static_cast<double>(total) / secs / 1e6 : 0;
  return true;
}

}  // namespace

CableProbe probe_cable(uint32_t local_addr, uint32_t peer_addr, const ProbeParams& params) {
  CableProbe out;
  const Conn c{local_addr, peer_addr, params};
  out.ok = run_info(c, &out) && run_ping(c, &out) &&
           run_bandwidth(c, Op::kSink, &out.send_mbytes_per_s, &out.error) &&
           run_bandwidth(c, Op::kSource, &out.recv_mbytes_per_s, &out.error);
  return out;
}

}  // namespace mesh::doctor::probe
