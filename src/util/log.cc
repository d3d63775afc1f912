// SPDX-License-Identifier: Apache-2.0
#include "util/log.h"

#include <strings.h>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace mesh {
namespace {

std::atomic<ncclDebugLogger_t> g_logger{nullptr};

int fallback_level() {
  static const int level = [] {
    const char* v = std::getenv("NCCL_DEBUG");
    if (v == nullptr) return static_cast<int>(NCCL_LOG_WARN);
    if (strcasecmp(v, "INFO") == 0) return static_cast<int>(NCCL_LOG_INFO);
    if (strcasecmp(v, "TRACE") == 0) return static_cast<int>(NCCL_LOG_TRACE);
    if (strcasecmp(v, "VERSION") == 0) return static_cast<int>(NCCL_LOG_VERSION);
    return static_cast<int>(NCCL_LOG_WARN);
  }();
  return level;
}

}  // namespace

void set_logger(ncclDebugLogger_t logger) {
  g_logger.store(logger, std::memory_order_release);
}

void log_message(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                 const char* fmt, ...) {
  char msg[1024];
  std::memcpy(msg, "NET/Mesh : ", 11);
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg + 11, sizeof(msg) - 11, fmt, ap);
  va_end(ap);
  ncclDebugLogger_t logger = g_logger.load(std::memory_order_acquire);
  if (logger != nullptr) {
    logger(level, flags, file, line, "%s", msg);
    return;
  }
  if (static_cast<int>(level) > fallback_level()) return;
  const char* tag = level == NCCL_LOG_WARN ? "WARN" : (level == NCCL_LOG_INFO ? "INFO" : "TRACE");
  std::fprintf(stderr, "nccl-mesh %s %s\n", tag, msg);
}

}  // namespace mesh
