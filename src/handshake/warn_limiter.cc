// SPDX-License-Identifier: Apache-2.0
#include "handshake/warn_limiter.h"

#include <cstdio>
#include <utility>

namespace mesh::handshake {

WarnLimiter::WarnLimiter(std::vector<Cause> causes, int64_t window_ms)
    : causes_(std::move(causes)),
      states_(causes_.size()),
      window_ms_(window_ms > 0 ? window_ms : 1) {}

std::string WarnLimiter::roll(size_t cause, int64_t now_ms) {
  State& s = states_[cause];
  if (!s.open || now_ms - s.start_ms < window_ms_) return "";
  if (s.suppressed == 0) {
    s.open = false;  // a quiet window: the next event warns in full
    return "";
  }
  char span[32];
  std::snprintf(span, sizeof(span), "%.1f", static_cast<double>(now_ms - s.start_ms) / 1000.0);
  const size_t nsources = s.sources.size();
  std::string out = causes_[cause].verb;
  out.append(" ")
      .append(std::to_string(s.suppressed))
      .append(" more ")
      .append(causes_[cause].noun)
      .append(" from ")
      .append(nsources >= kMaxTrackedSources ? "at least " : "")
      .append(std::to_string(nsources))
      .append(nsources == 1 ? " source" : " sources")
      .append(" in the last ")
      .append(span)
      .append(" s (last: ")
      .append(s.last)
      .append(")");
  // Still busy: the next window starts now and counts from zero, so a flood that goes on is
  // summarised once per window instead of alternating full WARNs and summaries.
  s.start_ms = now_ms;
  s.suppressed = 0;
  s.sources.clear();
  s.last.clear();
  return out;
}

bool WarnLimiter::note(size_t cause, int64_t now_ms, uint32_t source, const std::string& detail,
                       std::string* summary) {
  summary->clear();
  if (cause >= states_.size()) return true;  // unknown cause: never hide a WARN
  *summary = roll(cause, now_ms);
  State& s = states_[cause];
  if (!s.open) {
    s.open = true;
    s.start_ms = now_ms;
    return true;
  }
  ++s.suppressed;
  if (s.sources.size() < kMaxTrackedSources) s.sources.insert(source);
  s.last = detail;
  return false;
}

std::vector<std::string> WarnLimiter::poll(int64_t now_ms) {
  std::vector<std::string> out;
  for (size_t i = 0; i < states_.size(); ++i) {
    std::string line = roll(i, now_ms);
    if (!line.empty()) out.push_back(std::move(line));
  }
  return out;
}

}  // namespace mesh::handshake
