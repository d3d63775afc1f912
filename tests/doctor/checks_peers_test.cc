// Peer checks over synthetic peer maps and probe results: cables, probe failures, MTU and
// netmask mismatches between the two ends of a cable.
#include <gtest/gtest.h>

#include "fixtures.h"

namespace mesh::doctor {
namespace {

using testing::add_netdevs;
using testing::addr;
using testing::contains;
using testing::iface;
using testing::prefix;

struct Fixture {
  Inventory inv;
  Model model;
  std::vector<PeerRoute> routes;
};

// Node A of a triangle, with peers B (cabled), C (cabled) and D (no cable).
Fixture triangle() {
  Fixture f;
  f.inv.interfaces = {iface("srab", "198.18.1.1/24"), iface("srac", "198.18.2.1/24")};
  add_netdevs(f.inv);
  f.model = build_model(f.inv);
  f.routes = map_peers({{"B", {addr("198.18.1.2")}}, {"C", {addr("198.18.2.3")}}}, f.inv, f.model);
  return f;
}

CableProbe good_probe(const std::string& peer_if, const std::string& cidr, int mtu) {
  CableProbe p;
  p.ok = true;
  p.rtt_median_us = 42;
  p.send_mbytes_per_s = 1000;
  p.recv_mbytes_per_s = 900;
  PeerInterface far{peer_if, prefix(cidr), mtu, -1, true};
  p.info = PeerInfo{"peer", {far}, far};
  return p;
}

TEST(PeerCable, OkForCabledPeers) {
  const Fixture f = triangle();
  const Findings out = check_peer_cables(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(out[0].message, "srab 198.18.1.1/24 -> 198.18.1.2")) << out[0].message;
  EXPECT_EQ(out[1].verdict, Verdict::kOk);
}

TEST(PeerCable, FailForPeerWithoutCable) {
  Fixture f = triangle();
  f.routes = map_peers({{"D", {addr("198.18.9.9")}}}, f.inv, f.model);
  const Findings out = check_peer_cables(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(out[0].message, "no cable")) << out[0].message;
  EXPECT_TRUE(contains(out[0].fix, "relays through other hosts")) << out[0].fix;
}

TEST(PeerCable, FailNamesTheUnusedInterfaceThatWouldReachThePeer) {
  Fixture f = triangle();
  f.inv.settings.ifname = "srab";
  f.model = build_model(f.inv);
  f.routes = map_peers({{"C", {addr("198.18.2.3")}}}, f.inv, f.model);
  const Findings out = check_peer_cables(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(out[0].message, "srac")) << out[0].message;
  EXPECT_TRUE(contains(out[0].fix, "NCCL_MESH_IFNAME")) << out[0].fix;
}

TEST(PeerProbe, OkWithMatchingEnds) {
  Fixture f = triangle();
  f.routes[0].probes = {good_probe("srba", "198.18.1.2/24", 9000)};
  const Findings out = check_peer_probes(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].check, "peer-probe");
  EXPECT_EQ(out[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(out[0].message, "1000 MB/s")) << out[0].message;
  EXPECT_EQ(out[1].check, "mtu");
  EXPECT_EQ(out[1].verdict, Verdict::kOk);
}

TEST(PeerProbe, FailWhenThePeerDoesNotAnswer) {
  Fixture f = triangle();
  CableProbe p;
  p.error = "connect 198.18.1.2:29170 from 198.18.1.1: Connection refused";
  f.routes[0].probes = {p};
  const Findings out = check_peer_probes(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(out[0].fix, "--serve")) << out[0].fix;
}

TEST(PeerProbe, FailOnMtuMismatchBetweenCableEnds) {
  Fixture f = triangle();
  f.routes[1].probes = {good_probe("srca", "198.18.2.3/24", 1500)};
  const Findings out = check_peer_probes(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].check, "mtu");
  EXPECT_EQ(out[1].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(out[1].message, "MTU 9000 here (srac), 1500 on the peer (srca)"))
      << out[1].message;
  EXPECT_TRUE(contains(out[1].fix, "ip link set dev srca mtu 9000")) << out[1].fix;
}

TEST(PeerProbe, WarnOnNetmaskMismatch) {
  Fixture f = triangle();
  f.routes[0].probes = {good_probe("srba", "198.18.1.2/30", 9000)};
  const Findings out = check_peer_probes(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2].check, "netmask");
  EXPECT_EQ(out[2].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(out[2].message, "/24 here, /30 on the peer")) << out[2].message;
}

}  // namespace
}  // namespace mesh::doctor
