// SPDX-License-Identifier: Apache-2.0
#include "proc_usage.h"

#include <dirent.h>
#include <sys/resource.h>

namespace mesh::bench {

ProcUsage sample_usage() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  ProcUsage u;
  u.cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
            static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  u.voluntary_switches = static_cast<uint64_t>(ru.ru_nvcsw);
  u.involuntary_switches = static_cast<uint64_t>(ru.ru_nivcsw);
  return u;
}

int count_threads() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return 0;
  int n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

}  // namespace mesh::bench
