// SPDX-License-Identifier: Apache-2.0
// The one clock of the plugin: the steady clock (CLOCK_MONOTONIC on Linux; never jumps with wall
// time), in milliseconds for deadlines, timeouts and grace periods on every layer, and in
// nanoseconds for the data path's short back-offs.
#pragma once

#include <chrono>
#include <cstdint>

namespace mesh {

inline int64_t monotonic_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline int64_t monotonic_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace mesh
