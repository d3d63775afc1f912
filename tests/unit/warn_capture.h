// SPDX-License-Identifier: Apache-2.0
// The WARN lines the library logs during a unit test: installs a logger in place of NCCL's
// (util/log.h) and keeps every WARN, formatted, until taken. One per process at a time (the
// logger is a process-wide pointer); thread-safe, as the library logs from its own threads.
#pragma once

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "util/log.h"

namespace mesh::test {

class WarnCapture {
 public:
  WarnCapture() {
    take();
    set_logger(&WarnCapture::log);
  }
  ~WarnCapture() { set_logger(nullptr); }
  WarnCapture(const WarnCapture&) = delete;
  WarnCapture& operator=(const WarnCapture&) = delete;

  // The WARNs logged since the last take() (or since construction), and forgets them.
  static std::vector<std::string> take() {
    std::lock_guard<std::mutex> lock(mu());
    return std::exchange(lines(), {});
  }
  // The WARNs logged so far that contain `needle` (kept).
  static std::vector<std::string> containing(const std::string& needle) {
    std::lock_guard<std::mutex> lock(mu());
    std::vector<std::string> out;
    for (const std::string& w : lines())
      if (w.find(needle) != std::string::npos) out.push_back(w);
    return out;
  }

 private:
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::string>& lines() {
    static std::vector<std::string> l;
    return l;
  }
  static void log(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
    if (level != NCCL_LOG_WARN) return;
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    std::lock_guard<std::mutex> lock(mu());
    lines().emplace_back(line);
  }
};

}  // namespace mesh::test
