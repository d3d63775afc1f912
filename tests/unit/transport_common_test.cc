// SPDX-License-Identifier: Apache-2.0
// What both transports share (transport/): the failure latch, the request helpers, the
// connection factory's TCP path and the capability query; and TCP's stream plan.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <array>
#include <climits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transport/connection_factory.h"
#include "transport/failure_latch.h"
#include "transport/requests.h"
#include "transport/tcp/stream_plan.h"

namespace mesh {
namespace {

TEST(FailureLatch, KeepsTheFirstFailure) {
  FailureLatch latch;
  EXPECT_FALSE(latch.failed());
  latch.fail(ncclRemoteError, "the peer closed the connection");
  latch.fail(ncclSystemError, "a consequence");
  EXPECT_TRUE(latch.failed());
  EXPECT_EQ(latch.report("conn"), ncclRemoteError);
  EXPECT_EQ(latch.report("conn"), ncclRemoteError);  // the same code on every later call
}

TEST(FailureLatch, ReportWithoutFailureIsAnInternalError) {
  FailureLatch latch;
  EXPECT_EQ(latch.report("conn"), ncclInternalError);
  EXPECT_FALSE(latch.failed());
}

TEST(FailureLatch, OneWinnerAmongThreads) {
  FailureLatch latch;
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&latch, i] {
      latch.fail(i % 2 == 0 ? ncclRemoteError : ncclSystemError, "thread " + std::to_string(i));
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(latch.failed());
  const ncclResult_t code = latch.report("conn");
  EXPECT_TRUE(code == ncclRemoteError || code == ncclSystemError) << code;
}

TEST(Requests, ReportedSizeClampsToInt) {
  EXPECT_EQ(reported_size(0), 0);
  EXPECT_EQ(reported_size(12345), 12345);
  EXPECT_EQ(reported_size(static_cast<size_t>(INT_MAX)), INT_MAX);
  EXPECT_EQ(reported_size(static_cast<size_t>(INT_MAX) + 1), INT_MAX);
  EXPECT_EQ(reported_size(size_t{1} << 40), INT_MAX);
}

TEST(Requests, InFlightOnlyForPoolMembersInUse) {
  struct Request {
    bool in_use = false;
  };
  std::array<Request, 4> pool;
  std::array<Request, 1> other;
  other[0].in_use = true;
  pool[2].in_use = true;
  EXPECT_TRUE(is_in_flight(pool, &pool[2]));
  EXPECT_FALSE(is_in_flight(pool, &pool[1]));   // completed
  EXPECT_FALSE(is_in_flight(pool, &other[0]));  // another comm's
}

TEST(Requests, WarningsReturnTheirCodes) {
  EXPECT_EQ(warn_pool_exhausted("conn", true), ncclInternalError);
  EXPECT_EQ(warn_pool_exhausted("conn", false), ncclInternalError);
  EXPECT_EQ(warn_not_in_flight("conn"), ncclInternalError);
  EXPECT_EQ(warn_grouped_receive("conn", 2), ncclInternalError);
}

TEST(Requests, OversizeTextsNameBothSizesAndTheSide) {
  const std::string r = oversize_at_receiver(4096, 1024);
  const std::string s = oversize_at_sender(4096, 1024);
  for (const std::string& t : {r, s}) {
    EXPECT_NE(t.find("4096 bytes"), std::string::npos) << t;
    EXPECT_NE(t.find("1024 bytes"), std::string::npos) << t;
  }
  EXPECT_NE(r.find("posted receive buffer"), std::string::npos) << r;
  EXPECT_NE(s.find("receiver's posted buffer"), std::string::npos) << s;
}

TEST(StreamPlan, RoundsUpToAMultipleOfTheRails) {
  EXPECT_EQ(tcp::plan_data_streams(4, 1), 4u);
  EXPECT_EQ(tcp::plan_data_streams(4, 2), 4u);
  EXPECT_EQ(tcp::plan_data_streams(4, 3), 6u);
  EXPECT_EQ(tcp::plan_data_streams(1, 2), 2u);
  EXPECT_EQ(tcp::plan_data_streams(5, 4), 8u);
}

TEST(StreamPlan, CappedAtTheHelloLimit) {
  EXPECT_EQ(tcp::plan_data_streams(64, 1), 64u);
  EXPECT_EQ(tcp::plan_data_streams(64, 3), 64u);  // 66 would exceed the hello's 64
}

// A finished handshake without transport state becomes a TCP connection on either side, with
// the capability of TCP: host memory only.
TEST(MakeConnection, WithoutTransportStateBuildsTcp) {
  for (const bool sender : {true, false}) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    UniqueFd keep(fds[1]);
    handshake::ConnectedSockets sockets;
    sockets.control = UniqueFd(fds[0]);
    sockets.local = "10.0.0.1:1";
    sockets.peer = "10.0.0.2:2";
    std::unique_ptr<Connection> c = make_connection(sender, std::move(sockets), tcp::TcpOptions{});
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->tag(), sender ? ObjectTag::kSend : ObjectTag::kRecv);
    EXPECT_NE(c->describe().find("TCP"), std::string::npos) << c->describe();
    EXPECT_NE(c->describe().find("10.0.0.2:2"), std::string::npos) << c->describe();
    EXPECT_TRUE(c->accepts_memory(NCCL_PTR_HOST));
    EXPECT_FALSE(c->accepts_memory(NCCL_PTR_CUDA));
    EXPECT_FALSE(c->accepts_memory(NCCL_PTR_DMABUF));
    c->close();
  }
}

}  // namespace
}  // namespace mesh
