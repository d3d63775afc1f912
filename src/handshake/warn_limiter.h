// SPDX-License-Identifier: Apache-2.0
// Rate limit for the WARN lines the handshake service logs about other hosts' sockets (refused
// hellos, sockets that never sent one, half-established connections, evictions). Whoever can
// reach the handshake port decides how many such events there are, so one WARN per event lets a
// flood of garbage connections flood the log. Per cause:
//  - the first event logs its full WARN (the peer and what to check), and opens a window;
//  - events inside the window are only counted (the caller logs them at INFO);
//  - when the window closes with events counted, one summary WARN ("refused K more handshakes
//    from M sources in the last T s (last: ADDR: why)") reports them and a new window opens at
//    once, so a sustained flood gives one WARN per cause per window;
//  - a window that closes with nothing counted ends quietly: the next event warns in full again.
// Not thread-safe: the handshake service thread owns its limiter. Time is passed in (ms on any
// monotonic clock) so the tests can drive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

namespace mesh::handshake {

class WarnLimiter {
 public:
  // How the summary names the events of one cause: "<verb> K more <noun> from M sources ...".
  struct Cause {
    std::string verb;  // "refused"
    std::string noun;  // "handshakes"
  };
  // Distinct source addresses counted per window; past it the summary says "at least".
  static constexpr size_t kMaxTrackedSources = 4096;

  WarnLimiter(std::vector<Cause> causes, int64_t window_ms);

  // One event of cause `cause` (an index into the constructor's list) from `source` (an IPv4
  // address, host order), described by `detail` ("10.0.0.3:41234: bad magic"). Returns true
  // when the caller should log its full WARN now, false when the event was counted for the
  // next summary. `*summary` gets a summary that is due first ("" if none): log it before.
  bool note(size_t cause, int64_t now_ms, uint32_t source, const std::string& detail,
            std::string* summary);
  // Summaries of windows that have closed by `now_ms`; call it regularly (the service does at
  // every loop turn) so a flood that stops is still reported.
  std::vector<std::string> poll(int64_t now_ms);

  int64_t window_ms() const { return window_ms_; }

 private:
  struct State {
    bool open = false;
    int64_t start_ms = 0;
    uint64_t suppressed = 0;
    std::unordered_set<uint32_t> sources;
    std::string last;
  };
  // Closes the window of `s` if it has run out; returns its summary ("" if none was due).
  std::string roll(size_t cause, int64_t now_ms);

  std::vector<Cause> causes_;
  std::vector<State> states_;
  int64_t window_ms_;
};

}  // namespace mesh::handshake
