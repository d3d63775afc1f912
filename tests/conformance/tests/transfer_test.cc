// SPDX-License-Identifier: Apache-2.0
// Data transfer as NCCL's proxy progress thread drives it: isend/irecv posted (retried on a NULL
// request), test() on the oldest request until done, every byte checked, both directions at once.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "harness/env.h"
#include "tests/fixture.h"

namespace conformance {
namespace {

class TransferTest : public VersionedTest {
 protected:
  void SetUp() override {
    VersionedTest::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_NO_FATAL_FAILURE(open_both(1, &out_, &in_));
  }
  std::vector<Link> out_, in_;
};

// The edge sizes, then 20 random sizes up to 8 MiB (fixed seed: the run is reproducible).
std::vector<uint64_t> conformance_sizes(int version) {
  std::vector<uint64_t> sizes = {0, 1, 7, 4096, 65536, MiB + 3, 64 * MiB};
  std::mt19937_64 rng(20240601u + static_cast<uint64_t>(version));
  std::uniform_int_distribution<uint64_t> dist(0, 8 * MiB);
  for (int i = 0; i < 20; ++i) sizes.push_back(dist(rng));
  return sizes;
}

TEST_P(TransferTest, AllSizesArriveIntactInBothDirections) {
  Flow flow;
  flow.messages = exact(conformance_sizes(version()));
  flow.window = 4;
  Exchange ex;
  ex.outbound(out_[0], flow);
  ex.inbound(in_[0], flow);
  const ExchangeResult r = run(ex, scaled(90000));
  EXPECT_TRUE(r.all_ok()) << r.report();
  EXPECT_TRUE(local_warnings().empty())
      << "WARN during a clean run:" << join_lines(local_warnings());
}

TEST_P(TransferTest, ReceiveBufferLargerThanMessageReportsSentSize) {
  // NCCL posts receives of the slot size; the sender's size is what test() must report.
  Flow flow;
  flow.messages = {{0, 4096},    {1, MiB},           {7, 8},         {3, 64 * KiB},
                   {4095, 4096}, {65537, 128 * KiB}, {MiB, 4 * MiB}, {0, 1}};
  Exchange ex;
  ex.outbound(out_[0], flow);
  ex.inbound(in_[0], flow);
  const ExchangeResult r = run(ex);
  EXPECT_TRUE(r.all_ok()) << r.report();
}

TEST_P(TransferTest, AnyThirtyTwoRequestsMayBeOutstandingInAnyOrder) {
  // NCCL_NET_MAX_REQUESTS bounds the requests outstanding, not the spread of their sequence
  // numbers: message 0 stays untested while 1..31 complete and are tested, then message 32 is
  // posted (32 outstanding again). A plugin that maps sequence s to slot s % 32 refuses it.
  std::vector<uint64_t> sizes;
  for (uint64_t i = 0; i < 48; ++i) sizes.push_back(4096 + 61 * i);
  Flow flow;
  flow.messages = exact(sizes);
  flow.window = NCCL_NET_MAX_REQUESTS;
  flow.local_out_of_order = true;  // our sends and our receives
  Exchange ex;
  ex.outbound(out_[0], flow);
  ex.inbound(in_[0], flow);
  // 48 small messages: seconds even on a TCG VM; a plugin that refuses message 32 leaves the
  // peer's streams waiting for this deadline.
  const ExchangeResult r = run(ex, scaled(20000));
  EXPECT_TRUE(r.all_ok()) << r.report();
  EXPECT_TRUE(local_warnings().empty())
      << "WARN during a clean run:" << join_lines(local_warnings());
}

TEST_P(TransferTest, GpuReceivesAreFlushedOnRdma) {
  // NCCL registers GPU buffers as NCCL_PTR_CUDA (when the device advertises it) and calls iflush
  // after each receive before its kernel reads the data. Over RDMA the flush is a loopback RDMA
  // READ of the buffer, which must complete and leave the data intact. Host memory stands in for
  // GPU memory here: the NIC registers and reads both alike.
  if (expected_transport() != "rdma") {
    GTEST_SKIP() << "needs the RDMA transport (MESH_CONFORMANCE_EXPECT_TRANSPORT=rdma, the "
                    "Soft-RoCE lane): TCP comms take host memory only and need no flush";
  }
  Flow flow;
  flow.messages = exact({1, 4096, 0, MiB + 3, 128, 64 * KiB});
  flow.recv_flush_as_gpu = true;
  Exchange ex;
  ex.inbound(in_[0], flow);
  const ExchangeResult r = run(ex);
  ASSERT_TRUE(r.all_ok()) << r.report();
  ASSERT_EQ(r.local.size(), 1u);
  EXPECT_EQ(r.local[0].flushes, 5u);         // every non-empty message
  EXPECT_EQ(r.local[0].flush_requests, 5u);  // each a real READ, tested to completion
}

TEST_P(TransferTest, MaxRequestsInFlightPerComm) {
  // NCCL_NET_MAX_REQUESTS per comm (32; 8 for v6, the limit of NCCL 2.13-2.18): a whole window is
  // posted before the first test(), on the send and on the receive side, then the window keeps
  // sliding for two more rounds.
  const int window = max_requests(version());
  Flow flow;
  for (uint64_t i = 0; i < 3 * static_cast<uint64_t>(window); ++i) {
    const uint64_t size = i % 5 == 0 ? 0 : (i * 7919) % (64 * KiB);
    flow.messages.push_back({size, size});
  }
  flow.window = static_cast<uint32_t>(window);
  flow.post_window_first = true;
  Exchange ex;
  ex.outbound(out_[0], flow);
  ex.inbound(in_[0], flow);
  const ExchangeResult r = run(ex);
  EXPECT_TRUE(r.all_ok()) << r.report();
}

// Threads of this process named mesh-io* (the TCP I/O pool's), once they have named themselves.
size_t io_pool_threads() {
  size_t n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string name;
      std::getline(comm, name);
      if (name.rfind("mesh-io", 0) == 0) ++n;
    }
    closedir(dir);
  }
  return n;
}

// Who moves the TCP data is what NCCL_MESH_TCP_IO_THREADS says (README): unset or -1, a quarter
// of the usable cores from 8 up, fewer where other processes running the plugin share the cores
// (io_pool.h resolve_io_threads: other tests' processes on a large machine); an explicit count
// below the usable cores, that many threads; otherwise none. The io_pool: variants of this suite
// rely on it to run the pool at all.
TEST_P(TransferTest, IoThreadsAreWhatTheSettingAsks) {
  if (expected_transport() == "rdma") {
    GTEST_SKIP() << "connections are RDMA here (MESH_CONFORMANCE_EXPECT_TRANSPORT=rdma): the TCP "
                    "I/O pool is not used";
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const long cores = CPU_COUNT(&set);
  const char* env = std::getenv("NCCL_MESH_TCP_IO_THREADS");
  const long asked = env == nullptr ? -1 : std::strtol(env, nullptr, 10);
  // Auto: the size when alone, the most it can be.
  const long expected =
      asked < 0 ? (cores / 4 < 2 ? 0 : std::min(cores / 4, 8L)) : (asked < cores ? asked : 0);
  Flow flow;
  flow.messages = exact({4 * MiB});  // several parts: the pool's threads move them
  Exchange ex;
  ex.outbound(out_[0], flow);
  ex.inbound(in_[0], flow);
  const ExchangeResult r = run(ex);
  ASSERT_TRUE(r.all_ok()) << r.report();
  // A thread names itself when it first runs: give a loaded machine time for that.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (io_pool_threads() < static_cast<size_t>(expected) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (asked < 0) {
    EXPECT_LE(io_pool_threads(), static_cast<size_t>(expected))
        << "NCCL_MESH_TCP_IO_THREADS unset on " << cores << " usable cores";
    EXPECT_NE(io_pool_threads(), 1u) << "auto never starts a single I/O thread";
  } else {
    EXPECT_EQ(io_pool_threads(), static_cast<size_t>(expected))
        << "NCCL_MESH_TCP_IO_THREADS=" << env << " on " << cores << " usable cores";
  }
}

TEST_P(TransferTest, MessageLargerThanReceiveBufferFailsTheReceiver) {
  // A second pair, so each direction has one oversized case on its own connection.
  std::vector<Link> out2, in2;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out2, &in2));
  const std::vector<std::pair<uint64_t, uint64_t>> cases = {{4096, 1024}, {65536, 65535}};
  Exchange ex;
  for (size_t i = 0; i < cases.size(); ++i) {
    Flow flow;
    flow.messages = {{cases[i].first, cases[i].second}};
    flow.window = 1;
    flow.recv_expect_error_at = 0;  // the receiver's test() (or irecv) must return an error
    // The sender may complete (the bytes fit in socket buffers), fail, or stay pending: NCCL
    // aborts the job on the receiver's error.
    flow.send_tolerate_error_from = 0;
    flow.send_tolerate_timeout = true;
    ex.outbound(i == 0 ? out_[0] : out2[0], flow);
    ex.inbound(i == 0 ? in_[0] : in2[0], flow);
  }
  const ExchangeResult r = run(ex, scaled(10000));
  EXPECT_TRUE(r.all_ok()) << r.report();
  EXPECT_FALSE(local_warnings().empty()) << "the receiver's error must be explained by a WARN";
  EXPECT_FALSE(remote_warnings().empty()) << "the peer's receive error logged no WARN";

  // Both processes keep working on new connections.
  std::vector<Link> out3, in3;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out3, &in3));
  expect_traffic(out3, in3, "on a new connection after the size error");
}

MESH_INSTANTIATE_ALL_VERSIONS(TransferTest);

// v9+ plugins see NCCL_NET_OPTIONAL_RECV_COMPLETION in *request before irecv (LL/LL128 receives);
// NCCL's v6-v8 shims clear it, so those are not instantiated.
class OptionalCompletionTest : public TransferTest {};

TEST_P(OptionalCompletionTest, IrecvAlwaysOverwritesThePresetRequest) {
  Flow flow;
  for (uint64_t i = 0; i < 24; ++i) {
    const uint64_t size = (i * 3001) % (64 * KiB);
    flow.messages.push_back({size, 64 * KiB});  // LL/LL128 slots are larger than most messages
  }
  flow.preset_optional_completion = true;
  Exchange ex;
  ex.outbound(out_[0], flow);
  ex.inbound(in_[0], flow);
  const ExchangeResult r = run(ex);
  EXPECT_TRUE(r.all_ok()) << r.report();
}

MESH_INSTANTIATE_VERSIONS(OptionalCompletionTest, 9, 10, 11, 12);

}  // namespace
}  // namespace conformance
