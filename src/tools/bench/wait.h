// SPDX-License-Identifier: Apache-2.0
// Waiting without hanging. Every spin loop in the bench (plugin test() loops, connection setup,
// TCP sockets, the rendezvous) owns a Waiter: when nothing has progressed for --timeout seconds
// it throws a TIMEOUT error naming what it was waiting for, and every 100 ms it asks the
// rendezvous whether another rank died, so one failing rank stops the others quickly.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "errors.h"

namespace mesh::bench {

using Clock = std::chrono::steady_clock;

// Seconds elapsed since t0 (timed loops of the patterns).
inline double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// This process's rank, for error lines ("ERROR rank R peer P: ..."). -1 in the local launcher.
void set_my_rank(int rank);
int my_rank();

// Seconds since traffic started (mark_traffic_start()), or since the process started before
// that: the "<seconds>" of an ERROR line.
void mark_traffic_start();
double run_seconds();

// The hook the rendezvous installs: throws when a peer rank has gone away.
void set_peer_watch(std::function<void()> watch);

// Turns the peer watch off for its lifetime. The rendezvous itself uses it: its own reads see a
// dead rank as EOF anyway, and a rank that got the final reply may legitimately exit while
// rank 0 is still replying to the others.
class PeerWatchPause {
 public:
  PeerWatchPause();
  ~PeerWatchPause();
  PeerWatchPause(const PeerWatchPause&) = delete;
  PeerWatchPause& operator=(const PeerWatchPause&) = delete;

 private:
  bool was_paused_;
};

// "ERROR rank R peer P: <call> returned <code> (<name>) after <seconds> s", exit code 3.
BenchError plugin_error(const char* call, int code, int peer);

// "TIMEOUT rank R peer P: nothing progressed for S s while waiting for <what>", exit code 4.
BenchError timeout_error(int peer, double waited_s, const std::string& what);

class Waiter {
 public:
  // `what` is only evaluated when the wait times out.
  Waiter(double timeout_s, int peer, std::function<std::string()> what);

  // Something completed: the deadline starts over.
  void progressed();
  // Nothing happened in this pass: yields the CPU (two cores, plugin threads want them), checks
  // the deadline and, every 100 ms, the other ranks.
  void idle();

 private:
  using Clock = std::chrono::steady_clock;
  std::chrono::nanoseconds timeout_;
  int peer_;
  std::function<std::string()> what_;
  Clock::time_point last_progress_;
  Clock::time_point next_watch_;
};

}  // namespace mesh::bench
