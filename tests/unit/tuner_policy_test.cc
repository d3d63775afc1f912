// SPDX-License-Identifier: Apache-2.0
// The tuner's policy over synthetic NCCL cost tables: 3 or more nodes send large ring-able
// collectives to Ring and leave small ones and other collectives alone, two nodes and the off
// setting leave everything, and a table without a usable Ring row is never emptied. That every
// rank of a communicator decides alike is tuner_agreement_test's job.
#include "plugin/tuner_policy.h"

#include <gtest/gtest.h>

#include <array>

#include "nccl/tuner.h"

namespace mesh {
namespace {

constexpr int kAlgos = 7;
constexpr int kProtos = 3;
using Table = std::array<float, kAlgos * kProtos>;

// A table as NCCL fills it for a 4-node job: Tree and PAT cheaper than Ring (NCCL's choice
// would be a diagonal-connecting algorithm), CollNet/NVLS ignored.
Table nccl_table() {
  Table t;
  t.fill(static_cast<float>(NCCL_ALGO_PROTO_IGNORE));
  for (int p = 0; p < kProtos; ++p) {
    t[NCCL_ALGO_TREE * kProtos + p] = 10.0f + static_cast<float>(p);
    t[NCCL_ALGO_RING * kProtos + p] = 50.0f + static_cast<float>(p);
    t[NCCL_ALGO_PAT * kProtos + p] = 5.0f + static_cast<float>(p);
  }
  return t;
}

// The algorithm NCCL's topoGetAlgoInfo would pick.
int picked(const Table& t) {
  return picked_algorithm(t.data(), kAlgos, kProtos);
}

constexpr TunerConfig kAuto{TunerMode::kAuto, 1 << 20};

TEST(TunerPolicy, RingOfFourIsPartialAndSteersLargeAllReduceToRing) {
  const TunerState s = decide_tuner(kAuto, 4);
  ASSERT_TRUE(s.steer);
  Table t = nccl_table();
  ASSERT_EQ(picked(t), NCCL_ALGO_PAT);
  EXPECT_TRUE(steer_cost_table(s, ncclFuncAllReduce, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_EQ(picked(t), NCCL_ALGO_RING);
  for (int p = 0; p < kProtos; ++p) {
    EXPECT_EQ(t[NCCL_ALGO_RING * kProtos + p], 50.0f + static_cast<float>(p))
        << "Ring costs stay NCCL's, so NCCL still picks the protocol";
  }
}

TEST(TunerPolicy, EveryRingAbleCollectiveIsSteered) {
  const TunerState s = decide_tuner(kAuto, 4);
  for (ncclFunc_t f : {ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather, ncclFuncReduceScatter,
                       ncclFuncAllReduce}) {
    Table t = nccl_table();
    EXPECT_TRUE(steer_cost_table(s, f, 1 << 20, t.data(), kAlgos, kProtos)) << f;
    EXPECT_EQ(picked(t), NCCL_ALGO_RING) << f;
  }
}

TEST(TunerPolicy, SmallCollectivesAndOthersKeepNcclsChoice) {
  const TunerState s = decide_tuner(kAuto, 4);
  Table t = nccl_table();
  const Table before = t;
  EXPECT_FALSE(steer_cost_table(s, ncclFuncAllReduce, (1 << 20) - 1, t.data(), kAlgos, kProtos));
  EXPECT_EQ(t, before);
  EXPECT_FALSE(steer_cost_table(s, ncclFuncSendRecv, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_FALSE(steer_cost_table(s, ncclFuncAlltoAll, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_EQ(t, before);
}

TEST(TunerPolicy, TwoNodesAreUntouched) {
  // Two nodes share one cable: every algorithm is direct, nothing to steer.
  const TunerState s = decide_tuner(kAuto, 2);
  EXPECT_FALSE(s.steer);
  Table t = nccl_table();
  const Table before = t;
  EXPECT_FALSE(steer_cost_table(s, ncclFuncAllReduce, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_EQ(t, before);
}

TEST(TunerPolicy, ThreeOrMoreNodesSteerWhateverTheWiring) {
  // The node count is all the decision sees: a triangle, a line of 3 and a 16-host ring decide
  // alike (the wiring differs per host and is never an input).
  for (size_t nodes : std::initializer_list<size_t>{3, 4, 5, 8, 16})
    EXPECT_TRUE(decide_tuner(kAuto, nodes).steer) << nodes;
}

TEST(TunerPolicy, DefaultThresholdIs128KiB) {
  // The default threshold (docs/measurements.md, "Tuner: the rule for auto"): from 128 KiB on
  // NCCL's own model picks Ring for AllReduce on full meshes of 3-8 single-GPU nodes anyway.
  Settings defaults;
  EXPECT_EQ(defaults.tuner_min_bytes, 128 * 1024);
  EXPECT_EQ(defaults.tuner, TunerMode::kAuto);
}

TEST(TunerPolicy, DigestChangesWithEveryInput) {
  const uint32_t d = tuner_decision_digest(kAuto, 4);
  EXPECT_EQ(d, tuner_decision_digest(kAuto, 4));
  EXPECT_NE(d, tuner_decision_digest(kAuto, 5));
  EXPECT_NE(d, tuner_decision_digest({TunerMode::kRing, kAuto.min_bytes}, 4));
  EXPECT_NE(d, tuner_decision_digest({TunerMode::kAuto, 1}, 4));
}

TEST(TunerPolicy, OffSettingLeavesEverything) {
  const TunerState s = decide_tuner({TunerMode::kOff, 0}, 4);
  EXPECT_FALSE(s.steer);
  Table t = nccl_table();
  const Table before = t;
  EXPECT_FALSE(steer_cost_table(s, ncclFuncAllReduce, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_EQ(t, before);
}

TEST(TunerPolicy, RingSettingSteersFromTwoNodes) {
  EXPECT_TRUE(decide_tuner({TunerMode::kRing, 0}, 2).steer);
  EXPECT_FALSE(decide_tuner({TunerMode::kRing, 0}, 1).steer) << "one node: no network";
}

TEST(TunerPolicy, NeverLeavesNcclWithoutAChoice) {
  const TunerState s = decide_tuner(kAuto, 4);
  Table t = nccl_table();
  for (int p = 0; p < kProtos; ++p)
    t[NCCL_ALGO_RING * kProtos + p] = static_cast<float>(NCCL_ALGO_PROTO_IGNORE);
  const Table before = t;
  EXPECT_FALSE(steer_cost_table(s, ncclFuncAllReduce, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_EQ(t, before);
  EXPECT_EQ(picked(t), NCCL_ALGO_PAT);
}

TEST(TunerPolicy, SixAlgorithmTableOfNccl222) {
  const TunerState s = decide_tuner(kAuto, 4);
  std::array<float, 6 * kProtos> t{};
  t.fill(7.0f);
  EXPECT_TRUE(steer_cost_table(s, ncclFuncAllReduce, 64 << 20, t.data(), 6, kProtos));
  for (int a = 0; a < 6; ++a)
    EXPECT_EQ(t[static_cast<size_t>(a * kProtos)], a == NCCL_ALGO_RING ? 7.0f : -1.0f);
}

TEST(TunerPolicy, ValidatesTableDimensions) {
  float t[21] = {};
  const char* why = nullptr;
  EXPECT_TRUE(validate_cost_table(t, 7, 3, &why));
  EXPECT_FALSE(validate_cost_table(nullptr, 7, 3, &why));
  EXPECT_FALSE(validate_cost_table(t, 1, 3, &why)) << "no Ring row";
  EXPECT_FALSE(validate_cost_table(t, -7, 3, &why));
  EXPECT_FALSE(validate_cost_table(t, 7, 0, &why));
  EXPECT_FALSE(validate_cost_table(t, 100000, 3, &why));
  EXPECT_FALSE(validate_cost_table(t, 7, 100000, &why));
}

}  // namespace
}  // namespace mesh
