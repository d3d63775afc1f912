// SPDX-License-Identifier: Apache-2.0
// Peer lists, hosts files, the mesh map (choose_rails over the used interfaces) and the cables
// between peers deduced from their reports.
#include "tools/doctor/peers.h"

#include <gtest/gtest.h>

#include <sstream>

#include "fixtures.h"

namespace mesh::doctor {
namespace {

using testing::add_netdevs;
using testing::addr;
using testing::contains;
using testing::iface;
using testing::prefix;

Inventory node_a() {
  Inventory inv;
  inv.interfaces = {iface("lo", "127.0.0.1/8", 65536), iface("srab", "198.18.1.1/24"),
                    iface("srac", "198.18.2.1/24")};
  add_netdevs(inv);
  return inv;
}

TEST(PeerList, ParsesOnePeerPerAddress) {
  std::vector<PeerSpec> peers;
  std::string error;
  ASSERT_TRUE(parse_peer_list("198.18.1.2,198.18.2.3", &peers, &error)) << error;
  ASSERT_EQ(peers.size(), 2u);
  EXPECT_EQ(peers[0].name, "198.18.1.2");
  EXPECT_EQ(peers[1].addrs, std::vector<uint32_t>{addr("198.18.2.3")});
}

TEST(PeerList, RejectsNamesAndNonUnicast) {
  for (const char* bad : {"spark-b", "198.18.1.2,", "", "224.0.0.1", "0.0.0.0", "1.2.3"}) {
    std::vector<PeerSpec> peers;
    std::string error;
    const bool ok = parse_peer_list(bad, &peers, &error);
    // A trailing comma is tolerated; everything else must fail with a reason.
    if (std::string(bad) == "198.18.1.2,") {
      EXPECT_TRUE(ok);
      continue;
    }
    EXPECT_FALSE(ok) << bad;
    EXPECT_FALSE(error.empty()) << bad;
  }
}

TEST(Hosts, ParsesNamesAddressesAndComments) {
  std::istringstream in(
      "# the triangle\n"
      "spark-a 198.18.1.1,198.18.2.1\n"
      "\n"
      "spark-b 198.18.1.2 198.18.3.2   # blanks also separate\n"
      "198.18.2.3\n");
  std::vector<PeerSpec> peers;
  std::string error;
  ASSERT_TRUE(parse_hosts(in, &peers, &error)) << error;
  ASSERT_EQ(peers.size(), 3u);
  EXPECT_EQ(peers[0].name, "spark-a");
  EXPECT_EQ(peers[0].addrs.size(), 2u);
  EXPECT_EQ(peers[1].addrs[1], addr("198.18.3.2"));
  EXPECT_EQ(peers[2].name, "198.18.2.3");
}

TEST(Hosts, ErrorsNameTheLine) {
  std::istringstream no_addr("spark-a 198.18.1.1\nspark-b\n");
  std::vector<PeerSpec> peers;
  std::string error;
  EXPECT_FALSE(parse_hosts(no_addr, &peers, &error));
  EXPECT_TRUE(contains(error, "line 2")) << error;

  std::istringstream dns("spark-a spark-a.example.com\n");
  peers.clear();
  EXPECT_FALSE(parse_hosts(dns, &peers, &error));
  EXPECT_TRUE(contains(error, "line 1")) << error;
  EXPECT_TRUE(contains(error, "not an IPv4 address")) << error;

  std::istringstream empty("# nothing\n");
  peers.clear();
  EXPECT_FALSE(parse_hosts(empty, &peers, &error));
}

TEST(MeshMap, TriangleRoutesEachPeerOverItsCable) {
  const Inventory inv = node_a();
  const Model m = build_model(inv);
  const std::vector<PeerSpec> peers = {{"B", {addr("198.18.1.2"), addr("198.18.3.2")}},
                                       {"C", {addr("198.18.2.3"), addr("198.18.3.3")}},
                                       {"D", {addr("198.18.9.9")}},
                                       {"A", {addr("198.18.1.1"), addr("198.18.2.1")}}};
  const auto routes = map_peers(peers, inv, m);
  ASSERT_EQ(routes.size(), 4u);
  ASSERT_EQ(routes[0].rails.size(), 1u);
  EXPECT_EQ(m.selection.used[routes[0].rails[0].local_index].name, "srab");
  EXPECT_EQ(routes[0].rails[0].peer_addr, addr("198.18.1.2"));
  ASSERT_EQ(routes[1].rails.size(), 1u);
  EXPECT_EQ(m.selection.used[routes[1].rails[0].local_index].name, "srac");
  EXPECT_TRUE(routes[2].rails.empty());  // no cable to D
  EXPECT_FALSE(routes[2].self);
  EXPECT_TRUE(routes[3].self);  // the hosts file lists this host too
}

TEST(MeshMap, SparkHalvesGiveTwoRails) {
  // The two PCIe halves of one DGX Spark port: two netdevs, two addresses on one subnet.
  Inventory inv;
  inv.interfaces = {iface("enp1s0f0np0", "198.18.1.1/24"), iface("enP2p1s0f0np0", "198.18.1.3/24")};
  add_netdevs(inv);
  const auto routes =
      map_peers({{"B", {addr("198.18.1.2"), addr("198.18.1.4")}}}, inv, build_model(inv));
  ASSERT_EQ(routes[0].rails.size(), 2u);
  EXPECT_NE(routes[0].rails[0].peer_addr, routes[0].rails[1].peer_addr);
}

TEST(MeshMap, NamesUnusedInterfacesThatWouldReachThePeer) {
  Inventory inv = node_a();
  inv.settings.ifname = "srab";
  const auto routes = map_peers({{"C", {addr("198.18.2.3")}}}, inv, build_model(inv));
  EXPECT_TRUE(routes[0].rails.empty());
  ASSERT_EQ(routes[0].unused_reach.size(), 1u);
  EXPECT_TRUE(contains(routes[0].unused_reach[0], "srac")) << routes[0].unused_reach[0];
  EXPECT_TRUE(contains(routes[0].unused_reach[0], "NCCL_MESH_IFNAME")) << routes[0].unused_reach[0];
}

TEST(MeshMap, LoopbackPeerIsNotThisHostWhenTestingOnLoopback) {
  Inventory inv = node_a();
  inv.settings.ifname = "lo";
  const auto routes = map_peers({{"127.0.0.1", {addr("127.0.0.1")}}}, inv, build_model(inv));
  EXPECT_FALSE(routes[0].self);
  ASSERT_EQ(routes[0].rails.size(), 1u);
}

TEST(PeerLinks, CablesBetweenPeersFromTheirReports) {
  auto report = [](const std::string& host, std::vector<PeerInterface> ifs) {
    CableProbe p;
    p.ok = true;
    p.info = PeerInfo{host, std::move(ifs), std::nullopt};
    return p;
  };
  PeerRoute b, c, d;
  b.peer = {"B", {addr("198.18.1.2")}};
  c.peer = {"C", {addr("198.18.2.3")}};
  d.peer = {"D", {addr("198.18.4.4")}};
  b.probes = {report("B", {{"lo", prefix("127.0.0.1/8"), 65536, -1, false},
                           {"srba", prefix("198.18.1.2/24"), 9000, -1, true},
                           {"srbc", prefix("198.18.3.2/24"), 9000, -1, true}})};
  c.probes = {report("C", {{"lo", prefix("127.0.0.1/8"), 65536, -1, false},
                           {"srca", prefix("198.18.2.3/24"), 9000, -1, true},
                           {"srcb", prefix("198.18.3.3/24"), 1500, -1, true}})};
  d.probes = {report("D", {{"srda", prefix("198.18.4.4/24"), 9000, -1, true}})};
  const auto links = links_between_peers({b, c, d});
  ASSERT_EQ(links.size(), 1u);  // B-C only; loopback is not a cable, D has none to B or C
  EXPECT_EQ(links[0].a, "B");
  EXPECT_EQ(links[0].b, "C");
  EXPECT_EQ(links[0].a_end.name, "srbc");
  EXPECT_EQ(links[0].b_end.mtu, 1500);
}

TEST(PeerLinks, TheManagementNetworkIsNoCableBetweenPeers) {
  // A line B - C with a management LAN on every host: the plugins leave mgmt0 out (default
  // route), so B and C share no cable and NCCL's ring order must not be built over the LAN.
  auto report = [](const std::string& host, std::vector<PeerInterface> ifs) {
    CableProbe p;
    p.ok = true;
    p.info = PeerInfo{host, std::move(ifs), std::nullopt};
    return p;
  };
  PeerRoute b, c;
  b.peer = {"B", {addr("198.18.1.2")}};
  c.peer = {"C", {addr("198.18.2.3")}};
  b.probes = {report("B", {{"mgmt0", prefix("198.19.255.2/24"), 1500, -1, false},
                           {"srba", prefix("198.18.1.2/24"), 9000, -1, true}})};
  c.probes = {report("C", {{"mgmt0", prefix("198.19.255.3/24"), 1500, -1, false},
                           {"srca", prefix("198.18.2.3/24"), 9000, -1, true}})};
  EXPECT_TRUE(links_between_peers({b, c}).empty());
}

}  // namespace
}  // namespace mesh::doctor
