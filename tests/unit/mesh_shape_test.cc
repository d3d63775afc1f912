// SPDX-License-Identifier: Apache-2.0
// Cable counting for the tuner and the host order that makes NCCL's ring follow the cables.
#include "topology/mesh_shape.h"

#include <gtest/gtest.h>

namespace mesh::topology {
namespace {

Interface itf(const char* name, const char* addr, uint8_t prefix) {
  Interface i;
  i.name = name;
  i.addr = Ipv4Prefix{*parse_ipv4(addr), prefix};
  i.up = true;
  return i;
}

// True when every consecutive pair of `order` (and the closing pair when `closed`) is a cable.
bool follows(const std::vector<size_t>& order, const std::vector<std::pair<size_t, size_t>>& cables,
             bool closed) {
  auto cable = [&](size_t a, size_t b) {
    for (auto [x, y] : cables)
      if ((x == a && y == b) || (x == b && y == a)) return true;
    return false;
  };
  for (size_t i = 0; i + 1 < order.size(); ++i)
    if (!cable(order[i], order[i + 1])) return false;
  return !closed || cable(order.back(), order.front());
}

TEST(MeshShape, CountsSubnetsNotNetdevs) {
  // Two halves of one port on one subnet (one cable) plus a second cable: 2.
  EXPECT_EQ(count_cables(
                {itf("a0", "10.0.1.1", 24), itf("a1", "10.0.1.2", 24), itf("b0", "10.0.2.1", 30)}),
            2u);
  EXPECT_EQ(count_cables({}), 0u);
  // Same address range, different prefix lengths: different subnets.
  EXPECT_EQ(count_cables({itf("a", "10.0.0.1", 30), itf("b", "10.0.0.5", 30)}), 2u);
}

TEST(MeshShape, RingOfFourInScrambledNumbering) {
  // Hosts 0..3 wired 0-2, 2-1, 1-3, 3-0: the launch order must be a cycle of these cables.
  const std::vector<std::pair<size_t, size_t>> cables = {{0, 2}, {2, 1}, {1, 3}, {3, 0}};
  const RingOrder r = ring_order(4, cables);
  ASSERT_EQ(r.kind, RingOrder::kCycle);
  ASSERT_EQ(r.order.size(), 4u);
  EXPECT_EQ(r.order[0], 0u);
  EXPECT_TRUE(follows(r.order, cables, true));
  EXPECT_FALSE(follows({0, 1, 2, 3}, cables, false)) << "the natural order is not the cable order";
}

TEST(MeshShape, LineStartsAtAnEnd) {
  const std::vector<std::pair<size_t, size_t>> cables = {{2, 0}, {0, 3}, {3, 1}, {1, 4}};
  const RingOrder r = ring_order(5, cables);
  ASSERT_EQ(r.kind, RingOrder::kPath);
  ASSERT_EQ(r.order.size(), 5u);
  EXPECT_TRUE(follows(r.order, cables, false));
  EXPECT_FALSE(follows(r.order, cables, true));
}

TEST(MeshShape, StarHasNoRingOrder) {
  const RingOrder r = ring_order(4, {{0, 1}, {0, 2}, {0, 3}});
  EXPECT_EQ(r.kind, RingOrder::kNone);
  EXPECT_TRUE(r.order.empty());
}

TEST(MeshShape, FullMeshAndSmallCases) {
  EXPECT_EQ(ring_order(3, {{0, 1}, {1, 2}, {0, 2}}).kind, RingOrder::kCycle);
  EXPECT_EQ(ring_order(2, {{0, 1}}).kind, RingOrder::kCycle);
  EXPECT_EQ(ring_order(2, {}).kind, RingOrder::kNone);
  EXPECT_EQ(ring_order(1, {}).kind, RingOrder::kCycle);
  EXPECT_EQ(ring_order(3, {{0, 1}}).kind, RingOrder::kNone) << "host 2 has no cable";
  EXPECT_EQ(ring_order(3, {{0, 7}, {1, 1}}).kind, RingOrder::kNone) << "out of range ignored";
}

}  // namespace
}  // namespace mesh::topology
