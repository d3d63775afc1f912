// SPDX-License-Identifier: Apache-2.0
// Test helpers for a process that runs out of file descriptors: the soft RLIMIT_NOFILE is lowered
// and every descriptor below it opened, so that accept4 (and socket, pipe) fail with EMFILE
// until release(). Each test binary is its own process under ctest, so nothing else is affected.
#pragma once

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <vector>

namespace mesh::test {

class FdExhaustion {
 public:
  explicit FdExhaustion(rlim_t soft) {
    getrlimit(RLIMIT_NOFILE, &saved_);
    rlimit low = saved_;
    if (low.rlim_cur > soft) low.rlim_cur = soft;
    lowered_ = setrlimit(RLIMIT_NOFILE, &low) == 0;
    for (;;) {
      const int fd = dup(STDERR_FILENO);
      if (fd < 0) {
        errno_at_end_ = errno;
        break;
      }
      fds_.push_back(fd);
    }
  }
  ~FdExhaustion() { release(); }
  FdExhaustion(const FdExhaustion&) = delete;
  FdExhaustion& operator=(const FdExhaustion&) = delete;
  // Closes the descriptors it holds and restores the limit.
  void release() {
    for (int fd : fds_) close(fd);
    fds_.clear();
    if (lowered_) setrlimit(RLIMIT_NOFILE, &saved_);
    lowered_ = false;
  }
  bool lowered() const { return lowered_; }
  int errno_at_end() const { return errno_at_end_; }

 private:
  rlimit saved_{};
  bool lowered_ = false;
  int errno_at_end_ = 0;
  std::vector<int> fds_;
};

// CPU seconds of the whole process (every thread): a test thread that only sleeps meanwhile
// measures the threads under test.
inline double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace mesh::test

// The ASan+UBSan runtime needs free descriptors for its own checks (UBSan's vptr check opens a
// pipe to test whether memory is readable), and these tests exhaust them on purpose: under it
// every virtual call reports a false "invalid vptr". The release and TSan lanes run them.
#if defined(__SANITIZE_ADDRESS__)
#define MESH_FD_LIMIT_TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MESH_FD_LIMIT_TEST_UNDER_ASAN 1
#endif
#endif
