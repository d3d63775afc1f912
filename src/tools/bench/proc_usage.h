// SPDX-License-Identifier: Apache-2.0
// What this process (one rank) spends: CPU time and context switches (getrusage), and how many
// threads and descriptors it holds (/proc/self/task, /proc/self/fd). The pairs pattern samples
// it around every transport's run of a row, so each row says what a byte costs in CPU and
// wake-ups, not only how fast it moved; the CLOSE line compares threads and descriptors with
// those before the plugin's init.
#pragma once

#include <cstdint>
#include <string>

namespace mesh::bench {

struct ProcUsage {
  double cpu_s = 0;                   // user + system, every thread of the process
  uint64_t voluntary_switches = 0;    // a thread blocked (futex, socket wait, poll)
  uint64_t involuntary_switches = 0;  // a thread was preempted (more runnable threads than cores)
};

ProcUsage sample_usage();

// Threads of this process now; 0 if /proc is unreadable.
int count_threads();

// Open file descriptors of this process now; -1 if /proc is unreadable.
int count_open_fds();

// count_threads() once threads that were joined have left /proc/self/task, waiting at most
// `timeout_s` for it to fall to `want`. pthread_join returns when the kernel clears the thread's
// id, early in its exit; the task leaves /proc/self/task only when it is released, later, and on
// a loaded host the joiner can run in between (on the 2-core CI machine: 6 of 3,000 joins of a
// thread that slept 200 us still listed it right after the join, none 100 ms later). A finalize
// that joined every thread could read as one thread more than before init; a thread left
// running stays, and is counted.
int count_threads_settled(int want, double timeout_s);

// This process's threads other than the main one, as "tid name (state), ...": which thread a
// count above the baseline is.
std::string threads_but_main();

}  // namespace mesh::bench
