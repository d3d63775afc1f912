// The one clock of the plugin: milliseconds of the steady clock (CLOCK_MONOTONIC on Linux; never
// jumps with wall time), for deadlines, timeouts and grace periods on every layer.
#pragma once

#include <chrono>
#include <cstdint>

namespace mesh {

inline int64_t monotonic_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace mesh
