// SPDX-License-Identifier: Apache-2.0
// Wall-clock bounds used by the suite. Every bound that a slow machine could hit is multiplied by
// kSlowdown under sanitizers, so the ASan and TSan lanes test the same behaviour as the plain one
// instead of failing on speed, and by MESH_CONF_TIME_SCALE (env.h) on slow machines.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>

#include "harness/env.h"

namespace conformance {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

#if defined(__SANITIZE_THREAD__)
inline constexpr int kSlowdown = 5;
#elif defined(__SANITIZE_ADDRESS__)
inline constexpr int kSlowdown = 3;
#else
inline constexpr int kSlowdown = 1;
#endif

// Every scaled bound: kSlowdown times MESH_CONF_TIME_SCALE.
inline Millis scaled(int64_t ms) {
  return Millis(std::llround(static_cast<double>(ms * kSlowdown) * time_scale()));
}

// NCCL calls listen/connect/accept/closeListen on its single proxy service thread, so a call that
// blocks stalls every other connection of the process. "Returns quickly" is pinned to this bound.
inline const Millis kSetupCallLimit = scaled(200);
// isend/irecv/test run on the progress thread in a tight loop; a call may copy a chunk of data but
// must not wait for the network.
inline const Millis kDataCallLimit = scaled(1000);
// Every process of the suite runs with NCCL_MESH_CONNECT_TIMEOUT_MS set to connect_timeout_ms()
// (env.h: 2000 unless MESH_CONFORMANCE_CONNECT_TIMEOUT_MS says otherwise), so a connect to an
// unreachable or hostile listener must fail within it.
inline constexpr int kDefaultConnectTimeoutMs = 2000;
inline Millis connect_timeout() {
  return Millis(connect_timeout_ms());
}

inline uint64_t elapsed_us(Clock::time_point since) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - since).count());
}

inline Clock::time_point deadline_after(Millis ms) {
  return Clock::now() + ms;
}

}  // namespace conformance
