// SPDX-License-Identifier: Apache-2.0
// Times one plugin call and tells "the call took long" apart from "the machine was busy". The
// suite runs on shared 2-core machines where a thread can sit preempted for hundreds of
// milliseconds; that is not the plugin's fault. The kernel's per-thread schedstat says how long the
// thread was runnable but waiting for a CPU; the time charged to the call is the wall time minus
// that wait. What remains was spent running or sleeping (in poll, connect, a lock...) inside the
// plugin, and NCCL's proxy threads cannot afford either for long.
#pragma once

#include <cstdint>

#include "harness/timing.h"

namespace conformance {

class CallTimer {
 public:
  CallTimer();
  // Ends the measurement; later calls keep the first values.
  void stop();
  uint64_t wall_us() const { return wall_us_; }
  // Wall time minus run-queue wait (the wall time where schedstat is unavailable).
  uint64_t charged_us() const { return charged_us_; }

 private:
  Clock::time_point start_;
  uint64_t queued_ns_ = 0;
  bool have_sched_ = false;
  bool stopped_ = false;
  uint64_t wall_us_ = 0;
  uint64_t charged_us_ = 0;
};

}  // namespace conformance
