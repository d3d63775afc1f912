// SPDX-License-Identifier: Apache-2.0
// Contexts (v11 and v12): NCCL 2.28 and later call init once per communicator and finalize when
// the communicator goes away, so several contexts coexist, and a process can finalize its last one
// and start again.
#include <gtest/gtest.h>

#include "tests/fixture.h"

namespace conformance {
namespace {

class V11ContextTest : public PeerFixture, public ::testing::WithParamInterface<int> {};

TEST_P(V11ContextTest, TwoContextsCarryTrafficAtOnce) {
  ASSERT_NO_FATAL_FAILURE(start(GetParam(), 2, 2));
  if (ctx(0) != nullptr || ctx(1) != nullptr) {
    EXPECT_NE(ctx(0), ctx(1)) << "two communicators got the same context";
  }
  std::vector<Link> out_a, in_a, out_b, in_b, out_x, in_x;
  ASSERT_NO_FATAL_FAILURE(open_both(2, &out_a, &in_a, 0, 0));
  ASSERT_NO_FATAL_FAILURE(open_both(2, &out_b, &in_b, 1, 1));
  // Contexts are per communicator, not per peer: context 0 here talks to context 1 there.
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out_x, &in_x, 0, 1));
  Flow flow;
  flow.messages = exact({0, 1, 4096, 300000, 1u << 20});
  Exchange ex;
  for (const auto* links : {&out_a, &out_b, &out_x}) {
    for (const Link& l : *links) ex.outbound(l, flow);
  }
  for (const auto* links : {&in_a, &in_b, &in_x}) {
    for (const Link& l : *links) ex.inbound(l, flow);
  }
  const ExchangeResult r = run(ex);
  EXPECT_TRUE(r.all_ok()) << r.report();
}

TEST_P(V11ContextTest, FinalizingOneContextLeavesTheOtherWorking) {
  ASSERT_NO_FATAL_FAILURE(start(GetParam(), 2, 2));
  std::vector<Link> out_a, in_a, out_b, in_b;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out_a, &in_a, 0, 0));
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out_b, &in_b, 1, 1));
  ASSERT_NO_FATAL_FAILURE(expect_traffic(out_a, in_a, "context 0 before finalize"));

  // Communicator 0 goes away on both ranks: its connections close, then its context.
  EXPECT_EQ(close_send(out_a[0].local), ncclSuccess);
  EXPECT_EQ(close_recv(in_a[0].local), ncclSuccess);
  EXPECT_EQ(remote_close(CommKind::kRecv, out_a[0].remote).rc, ncclSuccess);
  EXPECT_EQ(remote_close(CommKind::kSend, in_a[0].remote).rc, ncclSuccess);
  EXPECT_EQ(net().finalize(ctx(0)), ncclSuccess);
  finalized_[0] = true;
  StatusReply rep;
  ASSERT_TRUE(peer().call(Op::kFinalize, FinalizeRequest{0}, &rep, scaled(10000)));
  EXPECT_EQ(rep.rc, ncclSuccess) << "peer finalize: " << rep.error;

  expect_traffic(out_b, in_b, "context 1 after context 0 was finalized");
  std::vector<Link> out_c, in_c;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out_c, &in_c, 1, 1));
  expect_traffic(out_c, in_c, "a new connection of context 1");
}

TEST_P(V11ContextTest, InitWorksAgainAfterTheLastFinalize) {
  ASSERT_NO_FATAL_FAILURE(start(GetParam(), 1, 1));
  std::vector<Link> out, in;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out, &in));
  ASSERT_NO_FATAL_FAILURE(expect_traffic(out, in, "first context"));
  EXPECT_EQ(close_send(out[0].local), ncclSuccess);
  EXPECT_EQ(close_recv(in[0].local), ncclSuccess);
  // The last context of this process: a plugin that stops its threads here must restart them.
  EXPECT_EQ(net().finalize(ctx(0)), ncclSuccess);
  finalized_[0] = true;

  void* again = nullptr;
  ASSERT_EQ(net().init(0xA6A1, &again), ncclSuccess);
  ctxs_.push_back(again);
  finalized_.push_back(false);
  std::vector<Link> out2, in2;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out2, &in2, 1, 0));
  expect_traffic(out2, in2, "a context created after the last finalize");
}

TEST_P(V11ContextTest, FinalizeOfANullContextIsHarmless) {
  // NCCL 2.28.9 calls finalize(comm->netContext) even when init failed, so ctx may be NULL. It
  // must not crash nor tear down the live context.
  ASSERT_NO_FATAL_FAILURE(start(GetParam(), 1, 1));
  if (ctx(0) == nullptr) {
    GTEST_SKIP() << "the plugin's contexts are NULL, so finalize(NULL) cannot be told apart";
  }
  net().finalize(nullptr);
  std::vector<Link> out, in;
  ASSERT_NO_FATAL_FAILURE(open_both(1, &out, &in));
  expect_traffic(out, in, "after finalize(NULL)");
}

MESH_INSTANTIATE_VERSIONS(V11ContextTest, 11, 12);

}  // namespace
}  // namespace conformance
