// SPDX-License-Identifier: Apache-2.0
#include "metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mesh::bench {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

double gbps(uint64_t bytes, double seconds) {
  if (!(seconds > 0.0)) return kNaN;
  return static_cast<double>(bytes) / seconds / 1e9;
}

double allreduce_busbw(double algbw, int nranks) {
  if (nranks < 1) return kNaN;
  return algbw * 2.0 * (nranks - 1) / nranks;
}

double allgather_busbw(double algbw, int nranks) {
  if (nranks < 1) return kNaN;
  return algbw * (nranks - 1) / nranks;
}

double ratio(double a, double b) {
  if (std::isnan(a) || std::isnan(b) || !(b > 0.0)) return kNaN;
  return a / b;
}

double half_rtt_us(double total_seconds, int round_trips) {
  if (round_trips <= 0 || !(total_seconds > 0.0)) return kNaN;
  return total_seconds / round_trips / 2.0 * 1e6;
}

uint64_t pair_payload_bytes(uint64_t bytes, int iters, int warmup, bool bidir, bool latency) {
  const auto messages = static_cast<uint64_t>(std::max(iters, 0) + std::max(warmup, 0));
  uint64_t total = bytes * messages * (bidir ? 2 : 1);
  if (latency) total += 2 * bytes * messages;  // a ping and a pong per round trip
  return total;
}

double per_gb(double amount, uint64_t bytes) {
  if (bytes == 0 || std::isnan(amount)) return std::numeric_limits<double>::quiet_NaN();
  return amount * 1e9 / static_cast<double>(bytes);
}

}  // namespace mesh::bench
