// SPDX-License-Identifier: Apache-2.0
// TcpConnection's message protocol between a sender and a receiver in one process (socket
// pairs stand in for the handshake's sockets): eager sends that go out before the receiver has
// posted (bounded by NCCL_MESH_TCP_EAGER_BYTES and the request window), the size check that an
// eager send still gets, and the receiver's staged data streams (several messages read at once,
// each handed to its own receive, a large one-part payload read straight into its buffer).
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tcp_test_requests.h"
#include "transport/tcp/tcp_connection.h"
#include "transport/tcp/wire.h"

namespace mesh::tcp {
namespace {

using namespace mesh::tcp::tcp_test;
using Clock = std::chrono::steady_clock;

struct Endpoints {
  std::unique_ptr<TcpConnection> send;
  std::unique_ptr<TcpConnection> recv;
};

Endpoints connect_pair(const TcpOptions& options, size_t streams = 2) {
  handshake::ConnectedSockets s, r;
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  s.control.reset(fds[0]);
  r.control.reset(fds[1]);
  for (size_t i = 0; i < streams; ++i) {
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    s.data.emplace_back(fds[0]);
    r.data.emplace_back(fds[1]);
  }
  s.peer = r.local = "receiver";
  r.peer = s.local = "sender";
  Endpoints e;
  e.send = std::make_unique<TcpConnection>(true, std::move(s), options);
  e.recv = std::make_unique<TcpConnection>(false, std::move(r), options);
  return e;
}

TcpOptions options(size_t eager_bytes) {
  TcpOptions o;
  o.user_timeout_ms = 0;
  o.eager_bytes = eager_bytes;
  return o;
}

TEST(TcpEager, SmallSendCompletesBeforeTheReceiverPosts) {
  Endpoints e = connect_pair(options(64 * 1024));
  auto msg = pattern(1024, 1);
  // No receive is posted, so no clear-to-send exists: an eager send still goes out and completes.
  void* sreq = post_send(*e.send, msg);
  ASSERT_NE(sreq, nullptr) << "a 1 KiB send waited for a clear-to-send";
  ASSERT_EQ(wait_done(*e.send, sreq), ncclSuccess);
  std::vector<uint8_t> buf(4096, 0xee);
  void* rreq = post_recv(*e.recv, buf);
  int size = 0;
  ASSERT_EQ(wait_done(*e.recv, rreq, &size), ncclSuccess);
  EXPECT_EQ(size, 1024);
  EXPECT_TRUE(std::equal(msg.begin(), msg.end(), buf.begin()));
  EXPECT_EQ(buf[1024], 0xee) << "bytes past the message were written";
}

TEST(TcpEager, OffWaitsForTheClearToSend) {
  Endpoints e = connect_pair(options(0));
  auto msg = pattern(1024, 2);
  EXPECT_EQ(post_send(*e.send, msg), nullptr) << "NCCL_MESH_TCP_EAGER_BYTES=0 sent eagerly";
  std::vector<uint8_t> buf(1024);
  void* rreq = post_recv(*e.recv, buf);
  void* sreq = nullptr;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while ((sreq = post_send(*e.send, msg)) == nullptr && Clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_NE(sreq, nullptr);
  ASSERT_EQ(wait_done(*e.send, sreq), ncclSuccess);
  ASSERT_EQ(wait_done(*e.recv, rreq), ncclSuccess);
  EXPECT_EQ(msg, buf);
}

TEST(TcpEager, BytesAheadOfTheReceiverAreBounded) {
  constexpr size_t kBudget = 16 * 1024;
  Endpoints e = connect_pair(options(kBudget));
  // 1000-byte messages charge 1064 bytes each (header included): 15 fit in 16 KiB, the 16th
  // must wait for a clear-to-send.
  std::vector<std::vector<uint8_t>> msgs;
  for (int i = 0; i < 20; ++i) msgs.push_back(pattern(1000, static_cast<uint8_t>(i)));
  size_t sent = 0;
  for (auto& m : msgs) {
    void* req = post_send(*e.send, m);
    if (req == nullptr) break;
    ASSERT_EQ(wait_done(*e.send, req), ncclSuccess);
    ++sent;
  }
  EXPECT_EQ(sent, kBudget / (1000 + kHeaderSize));
  // A message larger than the budget never goes eagerly.
  auto big = pattern(kBudget + 1, 9);
  Endpoints e2 = connect_pair(options(kBudget));
  EXPECT_EQ(post_send(*e2.send, big), nullptr);

  // The receiver posts: every message arrives in order, and the rest can follow.
  for (size_t i = 0; i < msgs.size(); ++i) {
    std::vector<uint8_t> buf(1000);
    void* rreq = post_recv(*e.recv, buf);
    if (i >= sent) {
      void* sreq = nullptr;
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while ((sreq = post_send(*e.send, msgs[i])) == nullptr && Clock::now() < deadline) {
        std::this_thread::yield();
      }
      ASSERT_NE(sreq, nullptr) << "message " << i;
      ASSERT_EQ(wait_done(*e.send, sreq), ncclSuccess);
    }
    ASSERT_EQ(wait_done(*e.recv, rreq), ncclSuccess) << "message " << i;
    EXPECT_EQ(buf, msgs[i]) << "message " << i;
  }
}

TEST(TcpEager, AtMostOneRequestWindowOfMessagesAhead) {
  Endpoints e = connect_pair(options(1024 * 1024));
  // Empty messages charge only their header: the request window (32) bounds them.
  std::vector<uint8_t> empty;
  size_t sent = 0;
  for (int i = 0; i < 40; ++i) {
    void* req = nullptr;
    ASSERT_EQ(e.send->isend(nullptr, 0, 0, nullptr, &req), ncclSuccess);
    if (req == nullptr) break;
    ASSERT_EQ(wait_done(*e.send, req), ncclSuccess);
    ++sent;
  }
  EXPECT_EQ(sent, static_cast<size_t>(NCCL_NET_MAX_REQUESTS));
}

TEST(TcpEager, TooLargeForThePostedBufferFailsBothSides) {
  Endpoints e = connect_pair(options(64 * 1024));
  auto msg = pattern(4096, 3);
  void* sreq = post_send(*e.send, msg);
  ASSERT_NE(sreq, nullptr);
  std::vector<uint8_t> buf(1024, 0xee);
  void* rreq = post_recv(*e.recv, buf);
  EXPECT_EQ(wait_done(*e.recv, rreq), ncclInvalidUsage);
  EXPECT_EQ(buf, std::vector<uint8_t>(1024, 0xee)) << "bytes written into a buffer too small";
  // The sender learns the capacity from the clear-to-send and fails as well.
  ncclResult_t rc = ncclSuccess;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (rc == ncclSuccess && Clock::now() < deadline) {
    void* req = nullptr;
    auto next = pattern(8, 4);
    rc = e.send->isend(next.data(), next.size(), 0, nullptr, &req);
    std::this_thread::yield();
  }
  EXPECT_EQ(rc, ncclInvalidUsage);
}

// The sender closes its comm once its sends are done, while the receiver may still hold
// receives posted for messages that never come (GIN keeps its slots posted until the goodbye).
// The end of the data streams then fails only a receive that is tested and whose header is
// missing; a message sent before the close still completes, even though reading its header
// made the receiver look at the next header's stream, which had ended. (When every data
// stream's end of stream failed the connection, the first receive below failed as well, and
// GIN's ordering test logged a WARN for nearly every stream it closed.)
TEST(TcpClose, TheSendersCloseFailsOnlyTheReceivesWhoseMessagesNeverCame) {
  Endpoints e = connect_pair(options(64 * 1024), 4);
  auto msg = pattern(3 * 128 * 1024, 5);  // three parts: the next header is on stream 3
  std::vector<uint8_t> b0(msg.size()), b1(4096);
  void* r0 = post_recv(*e.recv, b0);
  void* r1 = post_recv(*e.recv, b1);
  void* s0 = nullptr;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while ((s0 = post_send(*e.send, msg)) == nullptr && Clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_NE(s0, nullptr);
  ASSERT_EQ(wait_done(*e.send, s0), ncclSuccess);
  e.send->close();
  int size = 0;
  ASSERT_EQ(wait_done(*e.recv, r0, &size), ncclSuccess) << "a completed send was lost";
  EXPECT_EQ(static_cast<size_t>(size), msg.size());
  EXPECT_EQ(b0, msg);
  EXPECT_EQ(wait_done(*e.recv, r1), ncclRemoteError) << "a receive whose message never came";
}

TEST(TcpStagedReceive, MessagesThatArrivedTogetherGoToTheirOwnReceives) {
  Endpoints e = connect_pair(options(64 * 1024));
  // Small messages, an empty one, then a 40 KiB one-part one (mostly read straight into its
  // buffer), all sent before any receive is posted: a stream's first read stages what follows.
  std::vector<std::vector<uint8_t>> msgs = {pattern(1, 1), pattern(100, 2), pattern(0, 0),
                                            pattern(3000, 3), pattern(40 * 1024, 4)};
  // The last one does not fit the eager budget with the others: let the receiver post first.
  std::vector<std::vector<uint8_t>> bufs;
  for (auto& m : msgs) bufs.emplace_back(m.size() + 7, 0xee);
  std::vector<void*> sreqs;
  for (size_t i = 0; i + 1 < msgs.size(); ++i) {
    sreqs.push_back(post_send(*e.send, msgs[i]));
    ASSERT_NE(sreqs.back(), nullptr) << "message " << i;
  }
  std::vector<void*> rreqs;
  for (auto& b : bufs) rreqs.push_back(post_recv(*e.recv, b));
  void* last = nullptr;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while ((last = post_send(*e.send, msgs.back())) == nullptr && Clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_NE(last, nullptr);
  sreqs.push_back(last);
  for (void* s : sreqs) ASSERT_EQ(wait_done(*e.send, s), ncclSuccess);
  for (size_t i = 0; i < msgs.size(); ++i) {
    int size = -1;
    ASSERT_EQ(wait_done(*e.recv, rreqs[i], &size), ncclSuccess) << "message " << i;
    EXPECT_EQ(static_cast<size_t>(size), msgs[i].size()) << "message " << i;
    EXPECT_TRUE(std::equal(msgs[i].begin(), msgs[i].end(), bufs[i].begin())) << "message " << i;
    EXPECT_EQ(bufs[i][msgs[i].size()], 0xee) << "message " << i << " overran its size";
  }
}

// Small one-part messages and messages of 1, 2 and 3 parts, interleaved, receives
// trailing the sends (some eager, some waiting), every byte checked.
void exchange_sizes(const TcpOptions& opt, const std::vector<size_t>& sizes, size_t streams) {
  Endpoints e = connect_pair(opt, streams);
  std::vector<std::vector<uint8_t>> msgs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    msgs.push_back(pattern(sizes[i], static_cast<uint8_t>(i)));
  }
  std::vector<std::vector<uint8_t>> bufs;
  for (auto& m : msgs) bufs.emplace_back(m.size());
  size_t posted = 0, sent = 0, sdone = 0, rdone = 0;
  std::vector<void*> sreqs(msgs.size()), rreqs(msgs.size());
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (rdone < msgs.size() && Clock::now() < deadline) {
    // Receives trail the sends by a few messages, so some sends are eager and some wait.
    if (posted < msgs.size() && posted < sent + 1) {
      rreqs[posted] = post_recv(*e.recv, bufs[posted]);
      ++posted;
    }
    if (sent < msgs.size() && sent < sdone + 4) {
      if ((sreqs[sent] = post_send(*e.send, msgs[sent])) != nullptr) ++sent;
    }
    int done = 0;
    if (sdone < sent) {
      ASSERT_EQ(e.send->test(static_cast<RequestHeader*>(sreqs[sdone]), &done, nullptr),
                ncclSuccess);
      if (done) ++sdone;
    }
    if (rdone < posted) {
      int size = 0;
      ASSERT_EQ(e.recv->test(static_cast<RequestHeader*>(rreqs[rdone]), &done, &size), ncclSuccess);
      if (done) {
        EXPECT_EQ(bufs[rdone], msgs[rdone]) << "message " << rdone;
        ++rdone;
      }
    }
  }
  EXPECT_EQ(rdone, msgs.size());
}

void exchange_mixed(const TcpOptions& opt) {
  std::vector<size_t> sizes;
  for (int i = 0; i < 36; ++i) {
    const size_t big = (i / 3 % 3 + 1) * 128 * 1024 + static_cast<size_t>(i);  // 1..3 parts
    sizes.push_back(i % 3 == 0 ? big : 64 + 97u * static_cast<size_t>(i));
  }
  exchange_sizes(opt, sizes, 3);
}

TEST(TcpStagedReceive, LargeMessagesStayInOrderWithSmallOnes) {
  exchange_mixed(options(64 * 1024));
}

// Runs of small one-part messages, which leave the next message on their data socket (wire.h
// next_first_stream), around the 4 KiB edge, between one-part and several-part ones: the
// receiver must look for each header where the sender put it.
TEST(TcpStagedReceive, BothEndsAgreeWhereMessagesAroundTheSpreadEdgeGo) {
  std::vector<size_t> sizes;
  const size_t edge = kSpreadMinBytes;
  const std::vector<size_t> cycle = {1,  edge - 1, edge,      0,         edge + 1, 300 * 1024,
                                     64, 64,       edge - 64, 20 * 1024, 3,        512 * 1024 + 7};
  for (int round = 0; round < 4; ++round) {
    for (size_t i = 0; i < cycle.size(); ++i) sizes.push_back(cycle[(i + round) % cycle.size()]);
  }
  exchange_sizes(options(64 * 1024), sizes, 4);
  TcpOptions threads = options(64 * 1024);
  threads.io_threads = 2;
  exchange_sizes(threads, sizes, 4);
  EXPECT_TRUE(IoPool::stop_if_idle()) << "a stream is still attached to the pool";
}

TEST(TcpIoPool, CallerMovesOnePartMessagesThreadsTheOthersInOrder) {
  // With a pool the caller moves one-part messages and the I/O threads the others, often on the
  // same stream: the bytes of every stream must still arrive in order.
  TcpOptions opt = options(64 * 1024);
  opt.io_threads = 2;
  exchange_mixed(opt);
  EXPECT_TRUE(IoPool::stop_if_idle()) << "a stream is still attached to the pool";
}

// This process's I/O threads (named mesh-io*): how many, and their context switches so far
// (each one a wake-up from epoll or the eventfd, or a preemption).
struct IoThreadStats {
  size_t threads = 0;
  uint64_t switches = 0;
};

IoThreadStats io_thread_stats() {
  IoThreadStats st;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return st;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    const std::string base = std::string("/proc/self/task/") + e->d_name;
    std::ifstream comm(base + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind("mesh-io", 0) != 0) continue;
    ++st.threads;
    std::ifstream status(base + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.find("ctxt_switches:") != std::string::npos) {
        st.switches += std::stoull(line.substr(line.find(':') + 1));
      }
    }
  }
  closedir(dir);
  return st;
}

TEST(TcpIoPool, ThreadsSleepWhileTheCallerMovesOnePartMessages) {
  // One-part messages are the caller's to move; their sockets must not wake the I/O threads
  // (with edge-triggered watching every arriving segment did: a context switch per message on
  // top of the caller's own work, which on a host with fewer cores than busy threads takes the
  // core from a rank that has work).
  TcpOptions opt = options(64 * 1024);
  opt.io_threads = 2;
  {
    Endpoints e = connect_pair(opt, 2);
    std::vector<uint8_t> msg = pattern(100 * 1024, 7);  // above inline, below min_chunk: 1 part
    std::vector<uint8_t> buf(msg.size());
    auto exchange = [&] {
      void* r = post_recv(*e.recv, buf);
      void* s = nullptr;
      const auto deadline = Clock::now() + std::chrono::seconds(10);
      while ((s = post_send(*e.send, msg)) == nullptr && Clock::now() < deadline) {
        int done = 0;
        ASSERT_EQ(e.recv->test(static_cast<RequestHeader*>(r), &done, nullptr), ncclSuccess);
      }
      ASSERT_NE(s, nullptr);
      // Both ends progress from this thread, as NCCL's proxy would for two comms.
      int sdone = 0, rdone = 0;
      while (!sdone || !rdone) {
        ASSERT_LT(Clock::now(), deadline);
        if (!sdone) {
          ASSERT_EQ(e.send->test(static_cast<RequestHeader*>(s), &sdone, nullptr), ncclSuccess);
        }
        if (!rdone) {
          ASSERT_EQ(e.recv->test(static_cast<RequestHeader*>(r), &rdone, nullptr), ncclSuccess);
        }
      }
      ASSERT_EQ(buf, msg);
    };
    exchange();
    // The threads name themselves when they first run: wait until both have run and slept
    // (on a loaded machine that can take a while), so their start-up is not counted below.
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    IoThreadStats st;
    while ((st = io_thread_stats()).threads < 2 || st.switches < 2) {
      ASSERT_LT(Clock::now(), deadline)
          << "the pool's 2 threads did not start (" << st.threads << " found)";
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    constexpr int kMessages = 300;
    for (int i = 0; i < kMessages; ++i) exchange();
    const uint64_t woke = io_thread_stats().switches - st.switches;
    EXPECT_LT(woke, static_cast<uint64_t>(kMessages / 10))
        << "the I/O threads switched " << woke << " times for " << kMessages
        << " one-part messages that the caller moved";
  }
  EXPECT_TRUE(IoPool::stop_if_idle()) << "a stream is still attached to the pool";
}

}  // namespace
}  // namespace mesh::tcp
