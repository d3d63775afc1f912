// SPDX-License-Identifier: Apache-2.0
// What an accept4() failure means and what to tell the user, for every listener of the library
// (the handshake service, the relay agent). Errors about one connection are retried at once;
// the others (no descriptor, no kernel memory) last until something changes, and a caller on a
// level-triggered listener must stop watching it for a while rather than be woken at once again.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mesh {

// Errors that Linux's accept4 returns for one connection in the backlog (already taken off it:
// accept(2) says to treat them like EAGAIN by retrying), not for the listener or the process.
bool accept_error_is_per_connection(int err);

// What to do about an accept4 error that is not about one connection. `holders` says what
// takes this process's descriptors ("every connection takes several (...)"), and `otherwise`
// the alternative to a higher limit ("open fewer communicators per process"); both only for
// EMFILE.
std::string accept_error_advice(int err, std::string_view holders, std::string_view otherwise);

// When a set of level-triggered listeners pauses after accept4 failed for want of a resource
// (the handshake service, the relay agent): the caller takes its listeners out of its epoll set
// while paused() and puts them back when resume_due() says so. One thread owns it.
class AcceptPause {
 public:
  static constexpr int64_t kPauseMs = 100;
  enum class Next { kRetry, kDrained, kPause };
  // After accept4 failed with `err`: kRetry (about one connection: take the next), kDrained
  // (EAGAIN), or kPause (now paused for kPauseMs, and counted: the caller leaves the listeners).
  Next on_error(int err, int64_t now_ms);
  bool paused() const { return until_ms_ != 0; }
  // True once when the pause is over: the caller puts the listeners back.
  bool resume_due(int64_t now_ms);
  // Pauses since accept4 last worked (for the WARN).
  uint64_t pauses() const { return pauses_; }
  // An accept4 worked: the pauses before it (0: none, nothing to log), and the count restarts.
  uint64_t accepted();
  void reset() { *this = AcceptPause(); }

 private:
  int64_t until_ms_ = 0;  // 0: not paused
  uint64_t pauses_ = 0;
};

}  // namespace mesh
