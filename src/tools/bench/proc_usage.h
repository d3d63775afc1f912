// SPDX-License-Identifier: Apache-2.0
// What this process (one rank) spends: CPU time and context switches (getrusage), and how many
// threads it runs (/proc/self/task). The pairs pattern samples it around every transport's run
// of a row, so each row says what a byte costs in CPU and wake-ups, not only how fast it moved.
#pragma once

#include <cstdint>

namespace mesh::bench {

struct ProcUsage {
  double cpu_s = 0;                   // user + system, every thread of the process
  uint64_t voluntary_switches = 0;    // a thread blocked (futex, socket wait, poll)
  uint64_t involuntary_switches = 0;  // a thread was preempted (more runnable threads than cores)
};

ProcUsage sample_usage();

// Threads of this process now; 0 if /proc is unreadable.
int count_threads();

}  // namespace mesh::bench
