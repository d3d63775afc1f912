// SPDX-License-Identifier: Apache-2.0
// The handshake service's admission policy for unauthenticated sockets (admission_queue.h):
// the pending cap, the per-source share, the eviction victim and the arrival order that the
// no-hello deadline follows. End to end the same policy is driven by the conformance flood test
// (HandshakeFloodTest) and the netns flood; here every decision is checked exactly.
#include "handshake/admission_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

namespace mesh::handshake {
namespace {

constexpr uint32_t kHostA = 0x0A000001;  // 10.0.0.1
constexpr uint32_t kHostB = 0x0A000002;
constexpr uint32_t kHostC = 0x0A000003;
constexpr uint32_t kHostD = 0x0A000004;
constexpr uint32_t kHostE = 0x0A000005;

TEST(AdmissionQueueTest, PerSourceShareIsAQuarterOfTheCapAndAtLeastOne) {
  EXPECT_EQ(AdmissionQueue(256).max_per_source(), 64u);
  EXPECT_EQ(AdmissionQueue(8).max_per_source(), 2u);
  EXPECT_EQ(AdmissionQueue(7).max_per_source(), 1u);
  EXPECT_EQ(AdmissionQueue(3).max_per_source(), 1u);
  EXPECT_EQ(AdmissionQueue(1).max_per_source(), 1u);
  EXPECT_EQ(AdmissionQueue(0).max_pending(), 1u) << "a cap of 0 would admit nothing";
}

TEST(AdmissionQueueTest, BelowBothCapsNothingIsEvicted) {
  AdmissionQueue q(8);  // 2 per source
  EXPECT_FALSE(q.make_room(kHostA).has_value());
  ASSERT_TRUE(q.add(10, kHostA, 100));
  EXPECT_FALSE(q.make_room(kHostA).has_value()) << "1 of 2 from A";
  ASSERT_TRUE(q.add(11, kHostB, 101));
  EXPECT_EQ(q.size(), 2u);
  EXPECT_EQ(q.pending_from(kHostA), 1u);
  EXPECT_EQ(q.pending_from(kHostB), 1u);
  EXPECT_EQ(q.pending_from(kHostC), 0u);
}

TEST(AdmissionQueueTest, AtTheTotalCapTheOldestSilentSocketOfAnySourceIsEvicted) {
  AdmissionQueue q(8);  // 2 per source
  int id = 0;
  for (uint32_t host : {kHostA, kHostB, kHostC, kHostD}) {
    for (int i = 0; i < 2; ++i, ++id) ASSERT_TRUE(q.add(id, host, 100 + id));
  }
  ASSERT_EQ(q.size(), 8u);
  const auto e = q.make_room(kHostE);
  ASSERT_TRUE(e.has_value());
  EXPECT_FALSE(e->per_source);
  EXPECT_EQ(e->pending, 8u);
  EXPECT_EQ(e->victim.id, 0);
  EXPECT_EQ(e->victim.source, kHostA);
  EXPECT_EQ(e->victim.since_ms, 100);
  // make_room only decides: nothing changed until the caller removes the victim.
  EXPECT_EQ(q.size(), 8u);
  q.remove(e->victim.id);
  EXPECT_FALSE(q.make_room(kHostE).has_value());
}

TEST(AdmissionQueueTest, ASocketWithACompleteHelloIsEvictedOnlyAfterEverySilentOne) {
  AdmissionQueue q(4);  // 1 per source
  ASSERT_TRUE(q.add(1, kHostA, 10));
  ASSERT_TRUE(q.add(2, kHostB, 20));
  ASSERT_TRUE(q.add(3, kHostC, 30));
  ASSERT_TRUE(q.add(4, kHostD, 40));
  q.hello_complete(1);
  q.hello_complete(2);
  auto e = q.make_room(kHostE);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->victim.id, 3) << "the oldest socket that has not sent a whole hello";
  EXPECT_FALSE(e->victim.have_hello);

  q.hello_complete(3);
  q.hello_complete(4);
  e = q.make_room(kHostE);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->victim.id, 1) << "all have a hello: the oldest";
  EXPECT_TRUE(e->victim.have_hello);
}

TEST(AdmissionQueueTest, AtTheSourceShareOnlyThatSourcesSocketsAreEvicted) {
  AdmissionQueue q(8);                // 2 per source
  ASSERT_TRUE(q.add(1, kHostB, 10));  // older than every socket of A
  ASSERT_TRUE(q.add(2, kHostA, 20));
  ASSERT_TRUE(q.add(3, kHostA, 30));
  const auto e = q.make_room(kHostA);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->per_source);
  EXPECT_EQ(e->pending, 2u);
  EXPECT_EQ(e->victim.id, 2) << "A's oldest, not B's older socket";
  EXPECT_FALSE(q.make_room(kHostB).has_value()) << "B has 1 of its 2";
}

TEST(AdmissionQueueTest, TheSourceShareIsCheckedBeforeTheTotalCap) {
  AdmissionQueue q(4);  // 1 per source
  ASSERT_TRUE(q.add(1, kHostB, 10));
  ASSERT_TRUE(q.add(2, kHostC, 20));
  ASSERT_TRUE(q.add(3, kHostD, 30));
  ASSERT_TRUE(q.add(4, kHostA, 40));
  const auto e = q.make_room(kHostA);  // both caps reached
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->per_source);
  EXPECT_EQ(e->victim.id, 4);
}

TEST(AdmissionQueueTest, PerSourceShareFallsBackToTheOldestOfThatSourceWhenAllHaveAHello) {
  AdmissionQueue q(8);               // 2 per source
  ASSERT_TRUE(q.add(1, kHostB, 5));  // silent, but another source
  ASSERT_TRUE(q.add(2, kHostA, 10));
  ASSERT_TRUE(q.add(3, kHostA, 20));
  q.hello_complete(2);
  q.hello_complete(3);
  const auto e = q.make_room(kHostA);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->victim.id, 2);
}

// A host that floods the port (evicting and re-adding at its share) never evicts another
// host's pending handshakes, and never holds more than its share.
TEST(AdmissionQueueTest, AFloodFromOneSourceNeverEvictsAnotherSourcesSockets) {
  AdmissionQueue q(16);  // 4 per source
  ASSERT_TRUE(q.add(1, kHostB, 0));
  ASSERT_TRUE(q.add(2, kHostC, 1));
  ASSERT_TRUE(q.add(3, kHostD, 2));
  int next = 100;
  std::set<int> evicted;
  for (int i = 0; i < 1000; ++i) {
    if (const auto e = q.make_room(kHostA)) {
      EXPECT_EQ(e->victim.source, kHostA);
      evicted.insert(e->victim.id);
      q.remove(e->victim.id);
    }
    ASSERT_TRUE(q.add(next++, kHostA, 10 + i));
    ASSERT_LE(q.pending_from(kHostA), q.max_per_source());
  }
  EXPECT_EQ(evicted.size(), 1000u - q.max_per_source());
  for (int id : {1, 2, 3}) EXPECT_NE(q.find(id), nullptr) << "socket " << id << " was evicted";
  EXPECT_EQ(q.size(), 3u + q.max_per_source());
}

TEST(AdmissionQueueTest, OldestFollowsArrivalOrderAcrossRemovals) {
  AdmissionQueue q(16);
  EXPECT_EQ(q.oldest(), nullptr);
  ASSERT_TRUE(q.add(7, kHostA, 100));
  ASSERT_TRUE(q.add(3, kHostB, 200));
  ASSERT_TRUE(q.add(9, kHostA, 300));
  ASSERT_NE(q.oldest(), nullptr);
  EXPECT_EQ(q.oldest()->id, 7);
  q.remove(3);  // from the middle
  EXPECT_EQ(q.oldest()->id, 7);
  q.remove(7);
  ASSERT_NE(q.oldest(), nullptr);
  EXPECT_EQ(q.oldest()->id, 9);
  EXPECT_EQ(q.oldest()->since_ms, 300);
  q.remove(9);
  EXPECT_EQ(q.oldest(), nullptr);
  EXPECT_EQ(q.size(), 0u);
}

TEST(AdmissionQueueTest, RemoveKeepsTheCountsAndIgnoresUnknownIds) {
  AdmissionQueue q(16);
  ASSERT_TRUE(q.add(1, kHostA, 0));
  ASSERT_TRUE(q.add(2, kHostA, 1));
  ASSERT_TRUE(q.add(3, kHostB, 2));
  q.remove(42);  // never added
  EXPECT_EQ(q.size(), 3u);
  q.remove(1);
  q.remove(1);  // twice
  EXPECT_EQ(q.pending_from(kHostA), 1u);
  EXPECT_EQ(q.size(), 2u);
  q.remove(2);
  EXPECT_EQ(q.pending_from(kHostA), 0u);
  EXPECT_EQ(q.pending_from(kHostB), 1u);
  q.hello_complete(2);  // no longer pending: ignored
  EXPECT_EQ(q.find(2), nullptr);
}

TEST(AdmissionQueueTest, AnIdIsPendingOnceAndCanBeReusedAfterRemoval) {
  AdmissionQueue q(16);
  ASSERT_TRUE(q.add(5, kHostA, 0));
  EXPECT_FALSE(q.add(5, kHostB, 1)) << "the same fd cannot be pending twice";
  EXPECT_EQ(q.size(), 1u);
  EXPECT_EQ(q.pending_from(kHostB), 0u);
  q.hello_complete(5);
  q.remove(5);
  // The kernel reuses fd numbers: a new socket with the same number starts afresh.
  ASSERT_TRUE(q.add(5, kHostB, 50));
  ASSERT_NE(q.find(5), nullptr);
  EXPECT_FALSE(q.find(5)->have_hello);
  EXPECT_EQ(q.find(5)->source, kHostB);
}

}  // namespace
}  // namespace mesh::handshake
