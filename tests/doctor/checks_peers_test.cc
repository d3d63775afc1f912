// SPDX-License-Identifier: Apache-2.0
// Peer checks over synthetic peer maps and probe results: cables, probe failures, MTU and
// netmask mismatches between the two ends of a cable, tuner settings that differ between hosts.
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
  EXPECT_EQ(out[0].message, "direct over srab 198.18.1.1/24 -> 198.18.1.2");
  EXPECT_EQ(out[1].verdict, Verdict::kOk);
}

TEST(PeerCable, PeerWithoutCableIsRelayedUnlessProbesShowTheRoute) {
  Fixture f = triangle();
  f.routes = map_peers({{"D", {addr("198.18.9.9")}}}, f.inv, f.model);
  const Findings out = check_peer_cables(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 1u);
  // Not probed: the cables between peers are unknown, so neither a route nor its absence.
  EXPECT_EQ(out[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(out[0].message, "no cable")) << out[0].message;
  EXPECT_TRUE(contains(out[0].message, "--probe")) << out[0].message;
  EXPECT_TRUE(contains(out[0].fix, "plugin process on every host")) << out[0].fix;
}

TEST(PeerCable, RelayOffMakesAMissingCableAFailure) {
  Fixture f = triangle();
  f.inv.settings.relay = 0;
  f.routes = map_peers({{"D", {addr("198.18.9.9")}}}, f.inv, f.model);
  const Findings out = check_peer_cables(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(out[0].message, "NCCL_MESH_RELAY=0")) << out[0].message;
}

// A probe result whose peer reports these interfaces, all used by its plugin.
CableProbe probe_reporting(const std::vector<std::pair<std::string, std::string>>& ifaces) {
  CableProbe p;
  p.ok = true;
  p.info = PeerInfo{"peer", {}, std::nullopt};
  for (const auto& [name, cidr] : ifaces)
    p.info->interfaces.push_back({name, prefix(cidr), 9000, -1, true});
  return p;
}

// Host A of a ring A-B-C-D-A: C has no cable to A; B and D (probed) each have one to C.
TEST(PeerCable, RingShowsTheRelayedRouteAndItsTwoWays) {
  Fixture f;
  f.inv.interfaces = {iface("srab", "198.18.1.1/24"), iface("srad", "198.18.4.1/24")};
  add_netdevs(f.inv);
  f.model = build_model(f.inv);
  f.routes = map_peers({{"B", {addr("198.18.1.2"), addr("198.18.2.2")}},
                        {"C", {addr("198.18.2.3"), addr("198.18.3.3")}},
                        {"D", {addr("198.18.3.4"), addr("198.18.4.4")}}},
                       f.inv, f.model);
  ASSERT_TRUE(f.routes[1].rails.empty());
  f.routes[0].probes = {probe_reporting({{"srba", "198.18.1.2/24"}, {"srbc", "198.18.2.2/24"}})};
  f.routes[2].probes = {probe_reporting({{"srdc", "198.18.3.4/24"}, {"srda", "198.18.4.4/24"}})};
  const Findings out = check_peer_cables(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].verdict, Verdict::kOk);
  EXPECT_EQ(out[1].verdict, Verdict::kWarn);
  EXPECT_TRUE(
      contains(out[1].message, "relayed over RDMA (where both cables have RDMA) or TCP via B") ||
      contains(out[1].message, "relayed over RDMA (where both cables have RDMA) or TCP via D"))
      << out[1].message;
  EXPECT_TRUE(contains(out[1].message, "2 cables, 2 equal-cost ways")) << out[1].message;
  EXPECT_EQ(out[2].verdict, Verdict::kOk);
}

// Host A of a line A-B-C-D: D is three cables away, through B then C.
TEST(PeerCable, LineShowsEveryRelayHostInOrder) {
  Fixture f;
  f.inv.interfaces = {iface("srab", "198.18.1.1/24")};
  add_netdevs(f.inv);
  f.model = build_model(f.inv);
  f.routes = map_peers({{"B", {addr("198.18.1.2"), addr("198.18.2.2")}},
                        {"C", {addr("198.18.2.3"), addr("198.18.3.3")}},
                        {"D", {addr("198.18.3.4")}}},
                       f.inv, f.model);
  f.routes[0].probes = {probe_reporting({{"srba", "198.18.1.2/24"}, {"srbc", "198.18.2.2/24"}})};
  // C has no cable to A, so it was not probed: the B-C cable is known from B, C-D is not.
  Findings out = check_peer_cables(f.inv, f.model, f.routes);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(out[1].message, "via B (2 cables)")) << out[1].message;
  // D's only cable is to C, whose interfaces nobody reported: no route in what is known, but the
  // doctor cannot tell a disconnected graph from one it does not see, so it warns and says why.
  EXPECT_EQ(out[2].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(out[2].message, "no route through the cables known here")) << out[2].message;
  EXPECT_TRUE(contains(out[2].message, "disconnected")) << out[2].message;
  // Were C's interfaces known (the doctor only probes its own cables), the route is complete.
  f.routes[1].probes = {probe_reporting({{"srcb", "198.18.2.3/24"}, {"srcd", "198.18.3.3/24"}})};
  out = check_peer_cables(f.inv, f.model, f.routes);
  EXPECT_EQ(out[2].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(out[2].message, "via B -> C (3 cables)")) << out[2].message;
  // The plugin chains RDMA relay over any route length (issue 26 item 2): not "TCP" alone.
  EXPECT_TRUE(
      contains(out[2].message, "relayed over RDMA (where every cable has RDMA) or TCP via B -> C"))
      << out[2].message;
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

TEST(PeerProbe, SharedSettingsThatDifferFail) {
  Fixture f = triangle();
  CableProbe p = good_probe("srba", "198.18.1.2/24", 9000);
  p.info->shared_settings = shared_settings_of(f.inv.settings);
  f.routes[0].probes = {p};
  Findings out = check_peer_probes(f.inv, f.model, f.routes);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].check, "shared-settings");
  EXPECT_EQ(out[0].verdict, Verdict::kOk) << out[0].message;

  p.info->shared_settings["NCCL_MESH_TUNER"] = "ring";
  f.routes[0].probes = {p};
  out = check_peer_probes(f.inv, f.model, f.routes);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].check, "shared-settings");
  EXPECT_EQ(out[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(out[0].message, "NCCL_MESH_TUNER is 'auto' here but 'ring' on the peer"))
      << out[0].message;
  EXPECT_TRUE(contains(out[0].fix, "same values on every host")) << out[0].fix;
}

TEST(PeerProbe, AnOlderPeerWithoutSharedSettingsIsNotJudged) {
  Fixture f = triangle();
  f.routes[0].probes = {good_probe("srba", "198.18.1.2/24", 9000)};
  for (const Finding& x : check_peer_probes(f.inv, f.model, f.routes))
    EXPECT_NE(x.check, "shared-settings");
}

}  // namespace
}  // namespace mesh::doctor
