// SPDX-License-Identifier: Apache-2.0
// The tuner's policy over synthetic NCCL cost tables: full meshes untouched, a ring of 4 sends
// large ring-able collectives to Ring and leaves small ones and other collectives alone, the off
// setting leaves everything, and a table without a usable Ring row is never emptied.
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

// The algorithm NCCL's topoGetAlgoInfo would pick: the smallest entry >= 0.
int picked_algorithm(const Table& t) {
  int best = -1;
  float best_cost = 3600000000.0f;
  for (int i = 0; i < kAlgos * kProtos; ++i) {
    if (t[static_cast<size_t>(i)] >= 0.0f && t[static_cast<size_t>(i)] < best_cost) {
      best_cost = t[static_cast<size_t>(i)];
      best = i / kProtos;
    }
  }
  return best;
}

constexpr TunerConfig kAuto{TunerMode::kAuto, 1 << 20};

TEST(TunerPolicy, RingOfFourIsPartialAndSteersLargeAllReduceToRing) {
  const TunerState s = decide_tuner(kAuto, 4, 2, false);
  ASSERT_TRUE(s.steer);
  Table t = nccl_table();
  ASSERT_EQ(picked_algorithm(t), NCCL_ALGO_PAT);
  EXPECT_TRUE(steer_cost_table(s, ncclFuncAllReduce, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_EQ(picked_algorithm(t), NCCL_ALGO_RING);
  for (int p = 0; p < kProtos; ++p) {
    EXPECT_EQ(t[NCCL_ALGO_RING * kProtos + p], 50.0f + static_cast<float>(p))
        << "Ring costs stay NCCL's, so NCCL still picks the protocol";
  }
}

TEST(TunerPolicy, EveryRingAbleCollectiveIsSteered) {
  const TunerState s = decide_tuner(kAuto, 4, 2, false);
  for (ncclFunc_t f : {ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather, ncclFuncReduceScatter,
                       ncclFuncAllReduce}) {
    Table t = nccl_table();
    EXPECT_TRUE(steer_cost_table(s, f, 1 << 20, t.data(), kAlgos, kProtos)) << f;
    EXPECT_EQ(picked_algorithm(t), NCCL_ALGO_RING) << f;
  }
}

TEST(TunerPolicy, SmallCollectivesAndOthersKeepNcclsChoice) {
  const TunerState s = decide_tuner(kAuto, 4, 2, false);
  Table t = nccl_table();
  const Table before = t;
  EXPECT_FALSE(steer_cost_table(s, ncclFuncAllReduce, (1 << 20) - 1, t.data(), kAlgos, kProtos));
  EXPECT_EQ(t, before);
  EXPECT_FALSE(steer_cost_table(s, ncclFuncSendRecv, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_FALSE(steer_cost_table(s, ncclFuncAlltoAll, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_EQ(t, before);
}

TEST(TunerPolicy, FullMeshIsUntouched) {
  // Triangle (3 nodes, 2 cables each) and a 4-node full mesh (3 cables each); dual cables only
  // add cables.
  for (auto [nodes, cables] : {std::pair<size_t, size_t>{3, 2}, {4, 3}, {4, 6}, {2, 1}}) {
    const TunerState s = decide_tuner(kAuto, nodes, cables, false);
    EXPECT_FALSE(s.steer) << nodes << " nodes, " << cables << " cables";
    Table t = nccl_table();
    const Table before = t;
    EXPECT_FALSE(steer_cost_table(s, ncclFuncAllReduce, 64 << 20, t.data(), kAlgos, kProtos));
    EXPECT_EQ(t, before);
  }
}

TEST(TunerPolicy, LineEndsAndMiddlesDecideAlike) {
  // A line of 4: the ends have one cable, the middles two; all must steer (one algorithm
  // everywhere), and so must a line of 3.
  EXPECT_TRUE(decide_tuner(kAuto, 4, 1, false).steer);
  EXPECT_TRUE(decide_tuner(kAuto, 4, 2, false).steer);
  EXPECT_TRUE(decide_tuner(kAuto, 3, 1, false).steer);
}

TEST(TunerPolicy, OffSettingLeavesEverything) {
  const TunerState s = decide_tuner({TunerMode::kOff, 0}, 4, 2, false);
  EXPECT_FALSE(s.steer);
  Table t = nccl_table();
  const Table before = t;
  EXPECT_FALSE(steer_cost_table(s, ncclFuncAllReduce, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_EQ(t, before);
}

TEST(TunerPolicy, RingSettingSteersEvenAFullLookingHost) {
  EXPECT_TRUE(decide_tuner({TunerMode::kRing, 0}, 4, 3, false).steer);
  EXPECT_FALSE(decide_tuner({TunerMode::kRing, 0}, 1, 0, false).steer) << "one node: no network";
}

TEST(TunerPolicy, LoopbackFallbackIsNoEvidence) {
  EXPECT_FALSE(decide_tuner(kAuto, 4, 1, true).steer);
}

TEST(TunerPolicy, NeverLeavesNcclWithoutAChoice) {
  const TunerState s = decide_tuner(kAuto, 4, 2, false);
  Table t = nccl_table();
  for (int p = 0; p < kProtos; ++p)
    t[NCCL_ALGO_RING * kProtos + p] = static_cast<float>(NCCL_ALGO_PROTO_IGNORE);
  const Table before = t;
  EXPECT_FALSE(steer_cost_table(s, ncclFuncAllReduce, 64 << 20, t.data(), kAlgos, kProtos));
  EXPECT_EQ(t, before);
  EXPECT_EQ(picked_algorithm(t), NCCL_ALGO_PAT);
}

TEST(TunerPolicy, SixAlgorithmTableOfNccl222) {
  const TunerState s = decide_tuner(kAuto, 4, 2, false);
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
