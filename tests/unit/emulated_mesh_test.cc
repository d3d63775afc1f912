// SPDX-License-Identifier: Apache-2.0
// The emulated topology's address plan: which ranks share a subnet in a ring of 4 and a line of
// 4 (checked with the plugin's own rail choice), and the NCCL_MESH_EMULATE parser.
#include "topology/emulated_mesh.h"

#include <gtest/gtest.h>

#include "topology/selection.h"

namespace mesh::topology {
namespace {

EmulatedMesh mesh(EmulatedShape shape, size_t n, size_t r) {
  return EmulatedMesh{shape, n, r};
}

// True when rank a's plugin would find a cable to rank b (choose_rails over a's emulated
// interfaces and b's addresses, as connect() does).
bool reachable(EmulatedShape shape, size_t n, size_t a, size_t b) {
  const auto local = emulated_interfaces(mesh(shape, n, a));
  const auto peer = emulated_addresses(mesh(shape, n, b));
  return !choose_rails(local, peer).empty();
}

TEST(EmulatedMesh, RingOfFourJoinsOnlyNeighbours) {
  for (size_t a = 0; a < 4; ++a) {
    EXPECT_EQ(emulated_addresses(mesh(EmulatedShape::kRing, 4, a)).size(), 2u);
    for (size_t b = 0; b < 4; ++b) {
      if (a == b) continue;
      const bool neighbours = (a + 1) % 4 == b || (b + 1) % 4 == a;
      EXPECT_EQ(reachable(EmulatedShape::kRing, 4, a, b), neighbours) << a << " -> " << b;
    }
  }
}

TEST(EmulatedMesh, LineOfFourHasNoClosingCable) {
  EXPECT_EQ(emulated_addresses(mesh(EmulatedShape::kLine, 4, 0)).size(), 1u);
  EXPECT_EQ(emulated_addresses(mesh(EmulatedShape::kLine, 4, 1)).size(), 2u);
  EXPECT_EQ(emulated_addresses(mesh(EmulatedShape::kLine, 4, 3)).size(), 1u);
  for (size_t a = 0; a < 4; ++a) {
    for (size_t b = 0; b < 4; ++b) {
      if (a == b) continue;
      const bool neighbours = a + 1 == b || b + 1 == a;
      EXPECT_EQ(reachable(EmulatedShape::kLine, 4, a, b), neighbours) << a << " -> " << b;
    }
  }
}

TEST(EmulatedMesh, AddressesAreSlash30LoopbackPairs) {
  EXPECT_EQ(format_prefix(emulated_address(0, false)), "127.77.0.1/30");
  EXPECT_EQ(format_prefix(emulated_address(0, true)), "127.77.0.2/30");
  EXPECT_EQ(format_prefix(emulated_address(3, true)), "127.77.0.14/30");
  EXPECT_EQ(format_prefix(emulated_address(64, false)), "127.77.1.1/30");
  // Ring of 4, rank 0: cable 0 (0-1) first end, cable 3 (3-0) second end.
  const auto r0 = emulated_addresses(mesh(EmulatedShape::kRing, 4, 0));
  ASSERT_EQ(r0.size(), 2u);
  EXPECT_EQ(format_prefix(r0[0]), "127.77.0.1/30");
  EXPECT_EQ(format_prefix(r0[1]), "127.77.0.14/30");
  const auto itfs = emulated_interfaces(mesh(EmulatedShape::kRing, 4, 0));
  ASSERT_EQ(itfs.size(), 2u);
  EXPECT_EQ(itfs[0].name, "lo");
  EXPECT_TRUE(itfs[0].up);
  // Used as cables by the default selection (no NCCL_MESH_IFNAME), not as a loopback fallback.
  const Selection sel = select_interfaces(itfs, IfnameFilter::parse(""));
  EXPECT_EQ(sel.used.size(), 2u);
  EXPECT_FALSE(sel.loopback_fallback);
}

TEST(EmulatedMesh, ParsesRingAndLine) {
  EmulatedMesh m;
  std::string why;
  ASSERT_TRUE(parse_emulated_mesh("ring:4:3", &m, &why)) << why;
  EXPECT_EQ(m.shape, EmulatedShape::kRing);
  EXPECT_EQ(m.ranks, 4u);
  EXPECT_EQ(m.rank, 3u);
  ASSERT_TRUE(parse_emulated_mesh("line:2:0", &m, &why)) << why;
  EXPECT_EQ(m.shape, EmulatedShape::kLine);
}

TEST(EmulatedMesh, RejectsMalformedValues) {
  for (const char* bad :
       {"", "ring", "ring:4", "ring:4:4", "ring:2:0", "line:1:0", "mesh:4:0", "ring:4:-1",
        "ring:x:0", "ring:4:0:1", "ring:4:0 ", "ring:2000:0", "ring::0"}) {
    EmulatedMesh m;
    std::string why;
    EXPECT_FALSE(parse_emulated_mesh(bad, &m, &why)) << bad;
    EXPECT_FALSE(why.empty()) << bad;
  }
  std::vector<Interface> out;
  std::string why;
  EXPECT_FALSE(discover_mesh_interfaces("ring:4:9", &out, &why));
  EXPECT_NE(why.find("NCCL_MESH_EMULATE"), std::string::npos) << why;
}

}  // namespace
}  // namespace mesh::topology
