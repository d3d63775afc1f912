// SPDX-License-Identifier: Apache-2.0
#include "proc_usage.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

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

namespace {

// Entries of a /proc directory, -1 when it cannot be read.
int count_entries(const char* path) {
  DIR* d = opendir(path);
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

}  // namespace

int count_threads() {
  const int n = count_entries("/proc/self/task");
  return n < 0 ? 0 : n;
}

int count_open_fds() {
  const int n = count_entries("/proc/self/fd");
  return n < 0 ? -1 : n - 1;  // without the descriptor opendir itself holds
}

int count_threads_settled(int want, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_s));
  int n = count_threads();
  while (n > want && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    n = count_threads();
  }
  return n;
}

namespace {

// The first line of a small /proc file, without its newline ("" if unreadable).
std::string first_line(const std::string& path) {
  std::string line;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[512] = {};
    if (std::fgets(buf, sizeof(buf), f) != nullptr) line = buf;
    std::fclose(f);
  }
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

}  // namespace

std::string threads_but_main() {
  std::string out;
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return out;
  const std::string main_tid = std::to_string(getpid());
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.' || e->d_name == main_tid) continue;
    const std::string base = std::string("/proc/self/task/") + e->d_name;
    // "tid (comm) S ...": the state follows the last ')' (a name may hold parentheses).
    const std::string stat = first_line(base + "/stat");
    const size_t close = stat.rfind(')');
    const std::string state =
        close != std::string::npos && close + 2 < stat.size() ? stat.substr(close + 2, 1) : "?";
    if (!out.empty()) out += ", ";
    out += std::string(e->d_name) + " " + first_line(base + "/comm") + " (" + state + ")";
  }
  closedir(d);
  return out;
}

}  // namespace mesh::bench
