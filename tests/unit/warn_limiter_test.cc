// SPDX-License-Identifier: Apache-2.0
// The rate limit of the handshake service's WARNs about other hosts' sockets (a clock in ms is
// passed in, so every window boundary is exact).
#include "handshake/warn_limiter.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mesh::handshake {
namespace {

constexpr size_t kRefused = 0;
constexpr size_t kExpired = 1;
constexpr int64_t kWindow = 10000;

WarnLimiter make() {
  return WarnLimiter({{"refused", "handshakes"}, {"closed", "silent handshake sockets"}}, kWindow);
}

TEST(WarnLimiterTest, FirstEventWarnsThenEventsInTheWindowAreCountedAndSummarised) {
  WarnLimiter l = make();
  std::string summary;
  EXPECT_TRUE(l.note(kRefused, 1000, 0x0A000001, "10.0.0.1:5000: bad magic", &summary));
  EXPECT_EQ(summary, "");
  // 20 more from 3 addresses inside the window: none warns, nothing is summarised yet.
  for (int i = 0; i < 20; ++i) {
    const uint32_t source = 0x0A000001u + static_cast<uint32_t>(i % 3);
    EXPECT_FALSE(l.note(kRefused, 1000 + i * 100, source,
                        "10.0.0." + std::to_string(1 + i % 3) + ":6000: checksum mismatch",
                        &summary))
        << "event " << i;
    EXPECT_EQ(summary, "");
  }
  EXPECT_TRUE(l.poll(10999).empty()) << "the window is still open 1 ms before its end";
  const std::vector<std::string> due = l.poll(11000);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0],
            "refused 20 more handshakes from 3 sources in the last 10.0 s "
            "(last: 10.0.0.2:6000: checksum mismatch)");
  EXPECT_TRUE(l.poll(11001).empty()) << "a summary is reported once";
}

TEST(WarnLimiterTest, SustainedFloodGivesOneSummaryPerWindow) {
  WarnLimiter l = make();
  std::string summary;
  int warns = 0, summaries = 0;
  // 100 events a second for 60 s from one source.
  for (int64_t t = 0; t < 60000; t += 10) {
    if (l.note(kExpired, t, 7, "1.2.3.4:9: no hello", &summary)) ++warns;
    if (!summary.empty()) {
      ++summaries;
      EXPECT_NE(summary.find("from 1 source in the last 10.0 s"), std::string::npos) << summary;
    }
    for (const std::string& s : l.poll(t)) {
      ++summaries;
      EXPECT_EQ(s.rfind("closed ", 0), 0u) << s;
    }
  }
  EXPECT_EQ(warns, 1) << "only the first event of the flood warns in full";
  EXPECT_EQ(summaries, 5) << "windows closing at 10, 20, 30, 40 and 50 s";
  // The flood stops: the last window is summarised, then the limiter goes quiet and the next
  // event (a new incident) warns in full again.
  ASSERT_EQ(l.poll(60000).size(), 1u);
  EXPECT_TRUE(l.poll(70000).empty()) << "a window with nothing counted ends without a summary";
  EXPECT_TRUE(l.note(kExpired, 70001, 7, "1.2.3.4:9: no hello", &summary));
  EXPECT_EQ(summary, "");
}

TEST(WarnLimiterTest, NextEventAfterTheWindowReportsTheSummaryWhenNotPolled) {
  WarnLimiter l = make();
  std::string summary;
  EXPECT_TRUE(l.note(kRefused, 0, 1, "a", &summary));
  EXPECT_FALSE(l.note(kRefused, 500, 2, "b", &summary));
  EXPECT_FALSE(l.note(kRefused, 12000, 3, "c", &summary));
  EXPECT_EQ(summary, "refused 1 more handshakes from 1 source in the last 12.0 s (last: b)");
  // "c" opened the next window already counted (the summary just went out).
  const std::vector<std::string> due = l.poll(22000);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0], "refused 1 more handshakes from 1 source in the last 10.0 s (last: c)");
}

TEST(WarnLimiterTest, CausesAreLimitedIndependently) {
  WarnLimiter l = make();
  std::string summary;
  EXPECT_TRUE(l.note(kRefused, 0, 1, "a", &summary));
  EXPECT_TRUE(l.note(kExpired, 1, 1, "a", &summary)) << "another cause has its own first WARN";
  EXPECT_FALSE(l.note(kRefused, 2, 1, "a", &summary));
  EXPECT_FALSE(l.note(kExpired, 3, 1, "a", &summary));
  const std::vector<std::string> due = l.poll(kWindow + 5);
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].rfind("refused 1 more handshakes", 0), 0u) << due[0];
  EXPECT_EQ(due[1].rfind("closed 1 more silent handshake sockets", 0), 0u) << due[1];
}

TEST(WarnLimiterTest, DistinctSourcesAreBounded) {
  WarnLimiter l = make();
  std::string summary;
  EXPECT_TRUE(l.note(kRefused, 0, 0, "x", &summary));
  const uint32_t n = static_cast<uint32_t>(WarnLimiter::kMaxTrackedSources) + 100;
  for (uint32_t i = 1; i <= n; ++i) EXPECT_FALSE(l.note(kRefused, 1, i, "x", &summary));
  const std::vector<std::string> due = l.poll(kWindow);
  ASSERT_EQ(due.size(), 1u);
  // Appended, not a chain of std::string operator+ (GCC 12 for aarch64 warned falsely on it).
  std::string want = std::to_string(n);
  want += " more handshakes from at least ";
  want += std::to_string(WarnLimiter::kMaxTrackedSources);
  want += " sources";
  EXPECT_NE(due[0].find(want), std::string::npos) << due[0];
}

TEST(WarnLimiterTest, UnknownCauseAlwaysWarns) {
  WarnLimiter l = make();
  std::string summary = "stale";
  EXPECT_TRUE(l.note(99, 0, 1, "a", &summary));
  EXPECT_TRUE(l.note(99, 1, 1, "a", &summary));
  EXPECT_EQ(summary, "");
}

}  // namespace
}  // namespace mesh::handshake
