// SPDX-License-Identifier: Apache-2.0
#include "harness/log_capture.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace conformance {
namespace {

struct LogState {
  std::mutex mu;
  std::vector<std::string> warns;
  std::vector<std::string> connections;
  std::string prefix = "test";
  bool echo_warns = true;
  // MESH_CONF_VERBOSE=1 also echoes INFO/TRACE lines, for debugging the plugin.
  bool echo_all = [] {
    const char* v = std::getenv("MESH_CONF_VERBOSE");
    return v != nullptr && v[0] == '1';
  }();
};

LogState& state() {
  // Leaked on purpose: plugin threads may still log while static destructors run at exit.
  static LogState* s = new LogState;
  return *s;
}

const char* level_name(ncclDebugLogLevel level) {
  switch (level) {
    case NCCL_LOG_WARN:
      return "WARN";
    case NCCL_LOG_INFO:
      return "INFO";
    case NCCL_LOG_ABORT:
      return "ABORT";
    case NCCL_LOG_TRACE:
      return "TRACE";
    default:
      return "LOG";
  }
}

}  // namespace

size_t warn_count() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.warns.size();
}

std::vector<std::string> warns_since(size_t first) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (first >= s.warns.size()) return {};
  return {s.warns.begin() + static_cast<std::ptrdiff_t>(first), s.warns.end()};
}

size_t connection_count() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.connections.size();
}

std::vector<std::string> connections_since(size_t first) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (first >= s.connections.size()) return {};
  return {s.connections.begin() + static_cast<std::ptrdiff_t>(first), s.connections.end()};
}

void set_log_prefix(const std::string& prefix) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.prefix = prefix;
}

QuietWarnings::QuietWarnings() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  previous_ = s.echo_warns;
  s.echo_warns = false;
}

QuietWarnings::~QuietWarnings() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.echo_warns = previous_;
}

}  // namespace conformance

extern "C" void conformance_log(ncclDebugLogLevel level, unsigned long /*flags*/, const char* file,
                                int line, const char* fmt, ...) {
  char text[1024];
  va_list args;
  va_start(args, fmt);
  vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);

  conformance::LogState& s = conformance::state();
  std::lock_guard<std::mutex> lock(s.mu);
  const bool warn = level == NCCL_LOG_WARN;
  if (warn) s.warns.emplace_back(text);
  // The text carries the plugin's prefix: "NET/Mesh : connected: send connection ... (TCP, ...)".
  if (level == NCCL_LOG_INFO && (std::strstr(text, " connected: ") != nullptr ||
                                 std::strstr(text, " accepted: ") != nullptr)) {
    s.connections.emplace_back(text);
  }
  if ((warn && s.echo_warns) || s.echo_all) {
    std::fprintf(stderr, "[%s] NCCL %s %s:%d %s\n", s.prefix.c_str(),
                 conformance::level_name(level), file != nullptr ? file : "?", line, text);
  }
}
