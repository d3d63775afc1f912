// SPDX-License-Identifier: Apache-2.0
// The TCP data path's movers: DataStream (a non-blocking data socket and its queued parts) moved
// by the caller, and IoThread (one thread of the per-process pool) moving several streams, with
// the sleep/wake hand-shake that must never lose a queued part.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/failure_latch.h"
#include "transport/tcp/data_stream.h"
#include "transport/tcp/io_pool.h"

namespace mesh::tcp {
namespace {

using Clock = std::chrono::steady_clock;

struct Pair {
  UniqueFd a, b;
};

Pair socket_pair() {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 12));
  return v;
}

// Waits until `done()` or 10 s; false on timeout (a lost wake-up shows up as a timeout).
template <typename F>
bool wait_for(F done) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

// An explicit count is kept only while the threads and NCCL's proxy thread can each have a
// core; -1 is the automatic size.
TEST(ResolveIoThreads, ExplicitCountBelowTheCoresAutoOtherwiseNone) {
  EXPECT_EQ(resolve_io_threads(-1, 2), 0u);
  EXPECT_EQ(resolve_io_threads(-1, 16), auto_io_threads(16));
  EXPECT_EQ(resolve_io_threads(0, 16), 0u);
  EXPECT_EQ(resolve_io_threads(1, 2), 1u);
  EXPECT_EQ(resolve_io_threads(2, 2), 0u);  // this CI machine: NCCL_MESH_TCP_IO_THREADS=2
  EXPECT_EQ(resolve_io_threads(2, 3), 2u);
  EXPECT_EQ(resolve_io_threads(8, 4), 0u);
  EXPECT_EQ(resolve_io_threads(8, 64), 8u);
}

// The automatic size fits the process's share of the cores (the processes running the plugin
// that may run on them, util/host_roster.h), one core of it left to NCCL's proxy thread; an
// explicit count is the user's and is kept (below the usable cores).
TEST(ResolveIoThreads, AutoFitsTheShareOfTheCoresTheHostsOtherRanksLeave) {
  EXPECT_EQ(resolve_io_threads(-1, 16, 1), 4u);  // alone: a quarter
  EXPECT_EQ(resolve_io_threads(-1, 16, 0), 4u);  // an unknown count is "alone"
  EXPECT_EQ(resolve_io_threads(-1, 16, 2), 4u);  // 8 cores each: the quarter fits
  EXPECT_EQ(resolve_io_threads(-1, 16, 3), 4u);  // 5 each: 4 + the proxy thread
  EXPECT_EQ(resolve_io_threads(-1, 16, 4), 3u);  // the GPU rig's 4 ranks: 4 each
  EXPECT_EQ(resolve_io_threads(-1, 16, 8), 0u);  // 2 each: 1 would fit, and one is none
  EXPECT_EQ(resolve_io_threads(-1, 32, 8), 3u);  // 8 GPUs, 32 cores: was 8 each (72 threads)
  EXPECT_EQ(resolve_io_threads(-1, 64, 8), 7u);
  EXPECT_EQ(resolve_io_threads(-1, 224, 8), 8u);  // a DGX H100's 2 x 56 x 2 threads
  EXPECT_EQ(resolve_io_threads(-1, 2, 1), 0u);
  EXPECT_EQ(resolve_io_threads(-1, 8, 9), 0u);  // more processes than cores
  EXPECT_EQ(resolve_io_threads(4, 16, 8), 4u);  // explicit: kept
  EXPECT_EQ(resolve_io_threads(1, 2, 2), 1u);
  EXPECT_EQ(resolve_io_threads(16, 16, 1), 0u);
}

TEST(AutoIoThreads, NoneBelowEightCoresThenAQuarterCappedAtEight) {
  for (size_t cpus : {1, 2, 4, 6, 7}) EXPECT_EQ(auto_io_threads(cpus), 0u) << cpus;
  EXPECT_EQ(auto_io_threads(8), 2u);
  EXPECT_EQ(auto_io_threads(12), 3u);
  EXPECT_EQ(auto_io_threads(16), 4u);
  EXPECT_EQ(auto_io_threads(20), 5u);  // a DGX Spark's 20 cores
  EXPECT_EQ(auto_io_threads(64), 8u);
  EXPECT_EQ(auto_io_threads(256), 8u);
  EXPECT_GE(usable_cpus(), 1u);
}

TEST(DataStream, CallerMovesPartsInOrderUntilTheSocketWouldBlock) {
  Pair p = socket_pair();
  FailureLatch fa, fb;
  DataStream tx(std::move(p.a), true, 0, &fa);
  DataStream rx(std::move(p.b), false, 0, &fb);
  const std::vector<uint8_t> src = pattern(3 << 20, 1);  // far more than the socket buffers
  std::vector<uint8_t> dst(src.size(), 0);
  std::atomic<int> sent{3}, received{3};
  const size_t third = src.size() / 3;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(tx.push({const_cast<uint8_t*>(src.data()) + i * third, third, &sent}));
    ASSERT_TRUE(rx.push({dst.data() + i * third, third, &received}));
  }
  EXPECT_TRUE(tx.has_work());
  // One thread alternates the two ends: neither call may block, or this would hang.
  ASSERT_TRUE(wait_for([&] {
    tx.pump();
    rx.pump();
    return received.load() == 0;
  }));
  EXPECT_EQ(sent.load(), 0);
  EXPECT_FALSE(tx.has_work());
  EXPECT_EQ(dst, src);
  EXPECT_FALSE(fa.failed());
  EXPECT_FALSE(fb.failed());
}

TEST(DataStream, PeerCloseFailsTheConnectionWithARemoteError) {
  Pair p = socket_pair();
  FailureLatch f;
  DataStream rx(std::move(p.b), false, 3, &f);
  std::vector<uint8_t> dst(4096);
  std::atomic<int> pending{1};
  ASSERT_TRUE(rx.push({dst.data(), dst.size(), &pending}));
  p.a.reset();  // the peer process died
  rx.pump();
  ASSERT_TRUE(f.failed());
  EXPECT_EQ(f.report("receive connection test"), ncclRemoteError);
  EXPECT_EQ(pending.load(), 1);  // the part never completed
  EXPECT_FALSE(rx.has_work());
}

TEST(DataStream, ClosedStreamRefusesParts) {
  Pair p = socket_pair();
  FailureLatch f;
  DataStream tx(std::move(p.a), true, 0, &f);
  tx.close();
  std::vector<uint8_t> buf(16);
  std::atomic<int> pending{1};
  EXPECT_FALSE(tx.push({buf.data(), buf.size(), &pending}));
}

TEST(DataStream, QueueHoldsOnePartPerRequestInFlight) {
  Pair p = socket_pair();
  FailureLatch f;
  DataStream tx(std::move(p.a), true, 0, &f);
  std::vector<uint8_t> buf(16);
  std::atomic<int> pending{NCCL_NET_MAX_REQUESTS + 1};
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; ++i) {
    ASSERT_TRUE(tx.push({buf.data(), buf.size(), &pending}));
  }
  EXPECT_FALSE(tx.push({buf.data(), buf.size(), &pending}));
}

// Two I/O threads, one per direction, as the pool would place a connection's streams.
class IoThreadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    ASSERT_TRUE(tx_thread_.start(&why)) << why;
    ASSERT_TRUE(rx_thread_.start(&why)) << why;
  }
  void TearDown() override {
    if (tx_) tx_thread_.detach(tx_.get());
    if (rx_) rx_thread_.detach(rx_.get());
  }
  // A connected sender/receiver stream pair, each attached to its thread.
  void attach_pair() {
    Pair p = socket_pair();
    tx_ = std::make_unique<DataStream>(std::move(p.a), true, 0, &tx_failure_);
    rx_ = std::make_unique<DataStream>(std::move(p.b), false, 0, &rx_failure_);
    tx_thread_.attach(tx_.get());
    rx_thread_.attach(rx_.get());
  }
  IoThread tx_thread_{0};
  IoThread rx_thread_{1};
  FailureLatch tx_failure_, rx_failure_;
  std::unique_ptr<DataStream> tx_, rx_;
};

TEST_F(IoThreadTest, ThreadsMoveLargeMessagesIntact) {
  attach_pair();
  DataStream& tx = *tx_;
  DataStream& rx = *rx_;
  EXPECT_EQ(tx_thread_.streams(), 1u);
  const std::vector<uint8_t> src = pattern(8 << 20, 9);
  std::vector<uint8_t> dst(src.size(), 0);
  std::atomic<int> sent{8}, received{8};
  const size_t part = src.size() / 8;
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(rx.push({dst.data() + i * part, part, &received}));
    rx_thread_.notify();
    ASSERT_TRUE(tx.push({const_cast<uint8_t*>(src.data()) + i * part, part, &sent}));
    tx_thread_.notify();
  }
  // The sender's counter may drop after the receiver has every byte: wait for both.
  ASSERT_TRUE(wait_for([&] { return received.load() == 0 && sent.load() == 0; }));
  EXPECT_EQ(dst, src);
  tx_thread_.detach(&tx);
  EXPECT_EQ(tx_thread_.streams(), 0u);
  tx_.reset();
}

// One small part at a time, each queued only after the previous one completed: the threads
// go to sleep between parts, so every part must wake them (a lost notify() hangs here).
TEST_F(IoThreadTest, EveryQueuedPartWakesASleepingThread) {
  attach_pair();
  DataStream& tx = *tx_;
  DataStream& rx = *rx_;
  std::vector<uint8_t> src(512), dst(512);
  for (int round = 0; round < 3000; ++round) {
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(round + i);
    std::atomic<int> sent{1}, received{1};
    // Receive first half the time, send first the other half: both orders occur in NCCL.
    if (round % 2 == 0) {
      ASSERT_TRUE(rx.push({dst.data(), dst.size(), &received}));
      rx_thread_.notify();
    }
    ASSERT_TRUE(tx.push({src.data(), src.size(), &sent}));
    tx_thread_.notify();
    if (round % 2 == 1) {
      if (round % 4 == 1) std::this_thread::sleep_for(std::chrono::microseconds(100));
      ASSERT_TRUE(rx.push({dst.data(), dst.size(), &received}));
      rx_thread_.notify();
    }
    ASSERT_TRUE(wait_for([&] { return received.load() == 0 && sent.load() == 0; }))
        << "round " << round << ": sent " << sent.load() << ", received " << received.load();
    ASSERT_EQ(dst, src) << "round " << round;
  }
}

// A connection closes while its streams still have queued parts on a busy thread: once
// detach() returns the thread no longer touches the stream, which is then destroyed (ASan and
// TSan lanes see any later access).
TEST_F(IoThreadTest, DetachedStreamIsNeverTouchedAgain) {
  for (int round = 0; round < 50; ++round) {
    Pair p = socket_pair();
    FailureLatch fa, fb;
    auto tx = std::make_unique<DataStream>(std::move(p.a), true, 0, &fa);
    auto rx = std::make_unique<DataStream>(std::move(p.b), false, 0, &fb);
    tx_thread_.attach(tx.get());
    rx_thread_.attach(rx.get());
    std::vector<uint8_t> src(1 << 20, 5), dst(1 << 20);
    std::atomic<int> sent{1}, received{1};
    ASSERT_TRUE(tx->push({src.data(), src.size(), &sent}));
    tx_thread_.notify();
    ASSERT_TRUE(rx->push({dst.data(), dst.size(), &received}));
    rx_thread_.notify();
    std::this_thread::sleep_for(std::chrono::microseconds(round * 20));
    tx_thread_.detach(tx.get());
    rx_thread_.detach(rx.get());
    tx->close();
    rx->close();
    tx.reset();
    rx.reset();
  }
  EXPECT_EQ(tx_thread_.streams(), 0u);
  EXPECT_EQ(rx_thread_.streams(), 0u);
}

// The process-wide pool: one size for the process, kept while streams are attached, stopped
// (threads joined) when idle so nothing of ours runs after the last communicator, and started
// again by the next connection.
TEST(IoPool, SharedStoppedWhenIdleAndStartedAgain) {
  std::string why;
  EXPECT_EQ(IoPool::get(0, &why), nullptr);  // zero threads: the caller moves the bytes
  IoPool* pool = IoPool::get(3, &why);
  ASSERT_NE(pool, nullptr) << why;
  EXPECT_EQ(pool->size(), 3u);
  EXPECT_EQ(IoPool::get(5, &why), pool);  // the size was decided by the first connection
  Pair p = socket_pair();
  FailureLatch f;
  DataStream a(std::move(p.a), true, 0, &f), b(std::move(p.b), true, 1, &f);
  IoThread* ta = pool->pick();
  ta->attach(&a);
  IoThread* tb = pool->pick();
  EXPECT_NE(ta, tb);  // the least loaded thread
  tb->attach(&b);
  EXPECT_FALSE(IoPool::stop_if_idle());
  ta->detach(&a);
  EXPECT_FALSE(IoPool::stop_if_idle());
  tb->detach(&b);
  EXPECT_TRUE(IoPool::stop_if_idle());
  IoPool* again = IoPool::get(2, &why);
  ASSERT_NE(again, nullptr) << why;
  EXPECT_EQ(again->size(), 2u);
  EXPECT_TRUE(IoPool::stop_if_idle());
}

}  // namespace
}  // namespace mesh::tcp
