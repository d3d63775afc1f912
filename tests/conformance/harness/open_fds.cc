// SPDX-License-Identifier: Apache-2.0
#include "harness/open_fds.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

namespace conformance {

std::set<std::string> open_fds() {
  std::set<std::string> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  const int own = dirfd(dir);
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.' || std::atoi(e->d_name) == own) continue;
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    fds.insert(std::string(e->d_name) + " -> " + (n > 0 ? std::string(target, n) : "?"));
  }
  closedir(dir);
  return fds;
}

std::string fds_missing_from(const std::set<std::string>& before,
                             const std::set<std::string>& after) {
  std::string out;
  for (const std::string& fd : after)
    if (before.count(fd) == 0) out += "\n  " + fd;
  return out;
}

std::set<std::string> open_fds_settled(const std::set<std::string>& baseline,
                                       std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::set<std::string> now = open_fds();
  while (now.size() > baseline.size() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    now = open_fds();
  }
  return now;
}

std::set<std::string> open_fds_quiet(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::set<std::string> now = open_fds();
  int same = 0;
  while (same < 5 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::set<std::string> next = open_fds();
    same = next.size() == now.size() ? same + 1 : 0;
    now = std::move(next);
  }
  return now;
}

}  // namespace conformance
