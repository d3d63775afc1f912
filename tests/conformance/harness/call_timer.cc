// SPDX-License-Identifier: Apache-2.0
#include "harness/call_timer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace conformance {
namespace {

// This thread's /proc/thread-self/schedstat, open for the thread's life and closed when it ends
// (a descriptor per exited thread would show up in the suite's own descriptor-leak checks).
class ThreadSchedstat {
 public:
  ThreadSchedstat() : fd_(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}
  ~ThreadSchedstat() {
    if (fd_ >= 0) close(fd_);
  }
  ThreadSchedstat(const ThreadSchedstat&) = delete;
  ThreadSchedstat& operator=(const ThreadSchedstat&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// /proc/thread-self/schedstat: "<ns on cpu> <ns runnable in the run queue> <timeslices>".
bool read_run_queue_wait(uint64_t* queued_ns) {
  thread_local const ThreadSchedstat schedstat;
  const int fd = schedstat.fd();
  if (fd < 0) return false;
  char buf[128];
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  unsigned long long cpu = 0, queued = 0;
  if (std::sscanf(buf, "%llu %llu", &cpu, &queued) != 2) return false;
  *queued_ns = queued;
  return true;
}

}  // namespace

CallTimer::CallTimer() {
  have_sched_ = read_run_queue_wait(&queued_ns_);
  start_ = Clock::now();
}

void CallTimer::stop() {
  if (stopped_) return;
  stopped_ = true;
  wall_us_ = elapsed_us(start_);
  charged_us_ = wall_us_;
  uint64_t queued = 0;
  if (have_sched_ && read_run_queue_wait(&queued)) {
    const uint64_t waited_us = (queued - queued_ns_) / 1000;
    charged_us_ = waited_us >= wall_us_ ? 0 : wall_us_ - waited_us;
  }
}

}  // namespace conformance
