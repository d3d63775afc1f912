// SPDX-License-Identifier: Apache-2.0
#include "wait.h"

#include <fmt/format.h>

#include <thread>
#include <utility>

namespace mesh::bench {
namespace {

int g_rank = -1;
std::function<void()> g_watch;
bool g_watch_paused = false;
const auto g_process_start = std::chrono::steady_clock::now();
std::chrono::steady_clock::time_point g_traffic_start = g_process_start;

const char* result_name(int code) {
  switch (code) {
    case 0:
      return "ncclSuccess";
    case 1:
      return "ncclUnhandledCudaError";
    case 2:
      return "ncclSystemError";
    case 3:
      return "ncclInternalError";
    case 4:
      return "ncclInvalidArgument";
    case 5:
      return "ncclInvalidUsage";
    case 6:
      return "ncclRemoteError";
    case 7:
      return "ncclInProgress";
    default:
      return "unknown";
  }
}

}  // namespace

void set_my_rank(int rank) {
  g_rank = rank;
}
int my_rank() {
  return g_rank;
}

void mark_traffic_start() {
  g_traffic_start = std::chrono::steady_clock::now();
}

double run_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - g_traffic_start).count();
}

void set_peer_watch(std::function<void()> watch) {
  g_watch = std::move(watch);
}

PeerWatchPause::PeerWatchPause() : was_paused_(g_watch_paused) {
  g_watch_paused = true;
}
PeerWatchPause::~PeerWatchPause() {
  g_watch_paused = was_paused_;
}

BenchError plugin_error(const char* call, int code, int peer) {
  return BenchError(kExitPlugin,
                    fmt::format("ERROR rank {} peer {}: {} returned {} ({}) after "
                                "{:.3f} s",
                                g_rank, peer, call, code, result_name(code), run_seconds()));
}

BenchError timeout_error(int peer, double waited_s, const std::string& what) {
  return BenchError(kExitTimeout,
                    fmt::format("TIMEOUT rank {} peer {}: nothing progressed for {:.1f} s while "
                                "waiting for {}",
                                g_rank, peer, waited_s, what));
}

Waiter::Waiter(double timeout_s, int peer, std::function<std::string()> what)
    : timeout_(std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::duration<double>(timeout_s))),
      peer_(peer),
      what_(std::move(what)),
      last_progress_(Clock::now()),
      next_watch_(last_progress_ + std::chrono::milliseconds(100)) {}

void Waiter::progressed() {
  last_progress_ = Clock::now();
}

void Waiter::idle() {
  std::this_thread::yield();
  const auto now = Clock::now();
  if (now - last_progress_ > timeout_) {
    const double waited = std::chrono::duration<double>(now - last_progress_).count();
    throw timeout_error(peer_, waited, what_ ? what_() : std::string("?"));
  }
  if (now >= next_watch_) {
    next_watch_ = now + std::chrono::milliseconds(100);
    if (g_watch && !g_watch_paused) g_watch();
  }
}

}  // namespace mesh::bench
