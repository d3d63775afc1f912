// SPDX-License-Identifier: Apache-2.0
// Connection setup cases of the RDMA transport: the listener's accept() must not hand out the
// receive comm before the connector's QPs can receive (its ready byte), and a device that
// advertises GPU memory must not silently fall back to TCP.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "harness/env.h"
#include "tests/fixture.h"

namespace conformance {
namespace {

using ReadyTest = VersionedTest;

// RDMA's ACK timeout of this process (NCCL_MESH_IB_TIMEOUT, default 20): 4.096 us * 2^t.
Millis ack_timeout() {
  const char* v = std::getenv("NCCL_MESH_IB_TIMEOUT");
  const int t = v != nullptr ? std::atoi(v) : 20;
  return Millis(static_cast<int64_t>(std::ceil(4.096e-3 * std::ldexp(1.0, t))));
}

TEST_P(ReadyTest, FirstMessageDoesNotWaitForRetransmissionWhenConnectorIsLate) {
  // One process, both ends (a connection to our own address): connect() once, so the
  // handshake completes in the background, then call connect() again only after more than the
  // retry budget of the ACK timeout (NCCL's runtime connect makes such gaps common). A
  // clear-to-send written while the connector's QPs were still in INIT would be dropped and
  // retried until the QP fails; the first message must instead complete right after connect().
  const bool rdma = expected_transport() == "rdma";
  const Millis pause = rdma ? std::max(scaled(200), ack_timeout() * 8) : scaled(200);
  HandleBytes h{};
  void* lc = nullptr;
  uint64_t us = 0;
  std::string err;
  ASSERT_TRUE(listen_once(net(), ctx(), 0, &h, &lc, &us, &err)) << err;
  void* send = nullptr;
  void* recv = nullptr;
  ncclNetDeviceHandle_v11_t* devh = nullptr;
  ASSERT_EQ(net().connect(ctx(), 0, h.data(), &send, &devh), ncclSuccess);
  ASSERT_EQ(send, nullptr) << "connect() returned a comm on its first call";
  // Give the handshake time to finish; accept() may or may not hand out the comm meanwhile.
  const auto accept_until = Clock::now() + scaled(1000);
  while (recv == nullptr && Clock::now() < accept_until) {
    ASSERT_EQ(net().accept(lc, &recv, &devh), ncclSuccess);
    std::this_thread::sleep_for(Millis(1));
  }
  static uint8_t sbuf[4096], rbuf[4096];
  for (size_t i = 0; i < sizeof(sbuf); ++i) sbuf[i] = static_cast<uint8_t>(i * 7 + 1);
  void* smh = nullptr;
  void* rmh = nullptr;
  void* rreq = nullptr;
  auto post_recv = [&] {
    ASSERT_EQ(net().reg_mr(recv, rbuf, sizeof(rbuf), NCCL_PTR_HOST, &rmh), ncclSuccess);
    ASSERT_EQ(net().irecv(recv, rbuf, sizeof(rbuf), 0, rmh, &rreq), ncclSuccess);
    ASSERT_NE(rreq, nullptr);
  };
  if (recv != nullptr) {
    ASSERT_NO_FATAL_FAILURE(post_recv());  // its clear-to-send goes now
  }
  std::printf(
      "[ready] accept() %s before the second connect(); pausing %lld ms (ACK timeout "
      "%lld ms)\n",
      recv != nullptr ? "returned" : "did not return", static_cast<long long>(pause.count()),
      static_cast<long long>(ack_timeout().count()));
  std::this_thread::sleep_for(pause);

  const auto t0 = Clock::now();
  while (send == nullptr) {
    ASSERT_EQ(net().connect(ctx(), 0, h.data(), &send, &devh), ncclSuccess);
    ASSERT_LT(Clock::now(), t0 + scaled(30000)) << "the second connect() never completed";
  }
  track_send(send);
  while (recv == nullptr) {
    ASSERT_EQ(net().accept(lc, &recv, &devh), ncclSuccess);
    ASSERT_LT(Clock::now(), t0 + scaled(30000)) << "accept() never returned the receive comm";
  }
  if (rreq == nullptr) {
    ASSERT_NO_FATAL_FAILURE(post_recv());
  }
  ASSERT_EQ(net().reg_mr(send, sbuf, sizeof(sbuf), NCCL_PTR_HOST, &smh), ncclSuccess);
  void* sreq = nullptr;
  const auto limit = t0 + scaled(5000);
  while (sreq == nullptr) {
    ASSERT_EQ(net().isend(send, sbuf, sizeof(sbuf), 0, smh, &sreq), ncclSuccess);
    ASSERT_LT(Clock::now(), limit) << "isend kept waiting for the clear-to-send";
  }
  int sdone = 0, rdone = 0, size = -1;
  while (!sdone || !rdone) {
    if (!sdone) {
      ASSERT_EQ(net().test(sreq, &sdone, nullptr), ncclSuccess);
    }
    if (!rdone) {
      ASSERT_EQ(net().test(rreq, &rdone, &size), ncclSuccess);
    }
    ASSERT_LT(Clock::now(), limit) << "the first message did not complete";
  }
  const auto took = std::chrono::duration_cast<Millis>(Clock::now() - t0);
  std::printf("[ready] first message complete %lld ms after the second connect()\n",
              static_cast<long long>(took.count()));
  EXPECT_EQ(size, static_cast<int>(sizeof(sbuf)));
  EXPECT_EQ(std::memcmp(sbuf, rbuf, sizeof(sbuf)), 0);
  EXPECT_LT(took, scaled(100)) << "the first message waited (a retransmission?)";
  EXPECT_EQ(net().dereg_mr(send, smh), ncclSuccess);
  EXPECT_EQ(net().dereg_mr(recv, rmh), ncclSuccess);
  EXPECT_EQ(close_recv(recv), ncclSuccess);
  EXPECT_EQ(net().close_listen(lc), ncclSuccess);
}

MESH_INSTANTIATE_VERSIONS(ReadyTest, 11);

using GpuOverTcpTest = VersionedTest;

TEST_P(GpuOverTcpTest, GpuDeviceRefusesTcpConnectionWithOneClearWarn) {
  // auto mode, our device advertises NCCL_PTR_CUDA (NCCL_MESH_TEST_HOST_AS_GPU=1 in the lane's
  // stand-in pass), the peer has no RDMA (NCCL_MESH_TRANSPORT=tcp): GPU buffers cannot travel
  // over TCP, so connect() fails at once with a WARN naming the cable and the fix, instead of
  // NCCL failing later in regMr.
  DeviceProps p;
  ASSERT_EQ(net().get_properties(0, &p), ncclSuccess);
  if ((p.ptr_support & (NCCL_PTR_CUDA | NCCL_PTR_DMABUF)) == 0) {
    GTEST_SKIP() << "device 0 advertises no GPU memory (set NCCL_MESH_TEST_HOST_AS_GPU=1 on an "
                    "RDMA device, as the Soft-RoCE lane's stand-in pass does)";
  }
  set_peer_env({"NCCL_MESH_TRANSPORT=tcp"});
  respawn_peer();
  ListenReply listened;
  ASSERT_TRUE(peer().call(Op::kListen, ListenRequest{0, 0, 1}, &listened, scaled(30000)))
      << peer().error();
  ASSERT_EQ(listened.handles.size(), 1u);
  const size_t warns = local_warnings().size();
  void* send = nullptr;
  ncclNetDeviceHandle_v11_t* devh = nullptr;
  HandleBytes h = listened.handles[0];
  const ncclResult_t rc = net().connect(ctx(), 0, h.data(), &send, &devh);
  EXPECT_NE(rc, ncclSuccess) << "a GPU-advertising device connected over TCP";
  EXPECT_EQ(send, nullptr);
  const auto w = local_warnings();
  ASSERT_EQ(w.size(), warns + 1) << join_lines(w);
  EXPECT_NE(w.back().find("TCP"), std::string::npos) << w.back();
  EXPECT_NE(w.back().find("NCCL_MESH_TRANSPORT=tcp"), std::string::npos) << w.back();
  EXPECT_NE(w.back().find(rank_ifname(Rank::kTest).substr(0, 3)), std::string::npos)
      << "the WARN must name the cable: " << w.back();
}

MESH_INSTANTIATE_VERSIONS(GpuOverTcpTest, 11);

}  // namespace
}  // namespace conformance
