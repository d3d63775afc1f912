// SPDX-License-Identifier: Apache-2.0
// The doctor's host-order hint over synthetic mesh maps: a 4-host ring probed from host A in a
// scrambled numbering, a line (also probed from its end), and the unknown cases.
#include "tools/doctor/host_order.h"

#include <gtest/gtest.h>

namespace mesh::doctor {
namespace {

PeerRoute peer(const std::string& name, bool cable, bool reported) {
  PeerRoute r;
  r.peer.name = name;
  if (cable) r.rails.push_back(topology::Rail{});
  if (reported) {
    CableProbe p;
    p.ok = true;
    p.info = PeerInfo{name, {}, std::nullopt};
    r.probes.push_back(p);
  }
  return r;
}

PeerLink link(const std::string& a, const std::string& b) {
  return PeerLink{a, b, {}, {}};
}

TEST(HostOrder, RingOfFourFromTheProbedMap) {
  // A is cabled to C and D; B to C and D (a ring A-C-B-D-A), so A,B,C,D is the wrong order.
  const std::vector<PeerRoute> routes = {peer("B", false, true), peer("C", true, true),
                                         peer("D", true, true)};
  const std::vector<PeerLink> links = {link("B", "C"), link("B", "D")};
  const HostOrderHint h = ring_host_order(routes, links, true, "A");
  EXPECT_TRUE(h.known);
  ASSERT_EQ(h.kind, topology::RingOrder::kCycle);
  ASSERT_EQ(h.hosts.size(), 4u);
  EXPECT_EQ(h.hosts[0], "A");
  EXPECT_EQ(h.hosts[2], "B") << "B sits opposite A";
  EXPECT_NE(h.message.find("every NCCL ring neighbour is a cable"), std::string::npos);
}

TEST(HostOrder, LineSaysTheClosingHopNeedsRelay) {
  // A-B-C-D: from B's view A and C are cabled, D is reached through C.
  const std::vector<PeerRoute> routes = {peer("A", true, true), peer("C", true, true),
                                         peer("D", false, true)};
  const HostOrderHint h = ring_host_order(routes, {link("C", "D")}, true, "B");
  ASSERT_EQ(h.kind, topology::RingOrder::kPath);
  ASSERT_EQ(h.hosts.size(), 4u);
  EXPECT_TRUE((h.hosts.front() == "A" && h.hosts.back() == "D") ||
              (h.hosts.front() == "D" && h.hosts.back() == "A"));
  EXPECT_NE(h.message.find("relay"), std::string::npos);
}

TEST(HostOrder, UnknownWithoutProbe) {
  const std::vector<PeerRoute> routes = {peer("B", true, false), peer("C", true, false),
                                         peer("D", false, false)};
  const HostOrderHint h = ring_host_order(routes, {}, false, "A");
  EXPECT_FALSE(h.known);
  EXPECT_TRUE(h.hosts.empty());
  EXPECT_NE(h.message.find("--probe"), std::string::npos);
}

PeerRoute listed(const std::string& name, bool cable, bool reported, std::vector<uint32_t> addrs) {
  PeerRoute r = peer(name, cable, reported);
  r.peer.addrs = std::move(addrs);
  return r;
}

PeerInterface used_if(const std::string& name, uint32_t addr) {
  PeerInterface i;
  i.name = name;
  i.addr = {addr, 30};
  i.used = true;
  return i;
}

// The reader's case: a line A-B-C probed from its end A. C has no cable to A, so it cannot
// answer (its --serve listens on mesh addresses); B's report and the hosts file's address of C
// on B's subnet give the cable B-C, so the order is known. Before, the doctor asked for the
// --probe and --serve that were already in place.
TEST(HostOrder, LineProbedFromItsEndUsesTheHostsFileForThePeerThatCannotAnswer) {
  std::vector<PeerRoute> routes = {listed("B", true, true, {0xC6120102u, 0xC6120201u}),
                                   listed("C", false, false, {0xC6120202u})};
  // B's report: its cable to A (198.18.1.2/30) and to C (198.18.2.1/30).
  routes[0].probes[0].info->interfaces = {used_if("ba", 0xC6120102u), used_if("bc", 0xC6120201u)};
  const std::vector<PeerLink> links = links_between_peers(routes);
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[0].a, "B");
  EXPECT_EQ(links[0].b, "C");
  EXPECT_TRUE(links[0].b_from_hosts_file);
  EXPECT_EQ(links[0].b_end.addr.addr, 0xC6120202u);
  const HostOrderHint h = ring_host_order(routes, links, true, "A");
  EXPECT_TRUE(h.known);
  ASSERT_EQ(h.kind, topology::RingOrder::kPath) << h.message;
  ASSERT_EQ(h.hosts.size(), 3u);
  EXPECT_EQ(h.hosts[1], "B") << "B is the middle of the line";
  EXPECT_NE(h.message.find("C did not answer --probe"), std::string::npos) << h.message;
}

// A-B-C-D probed from A: C and D both stay silent, so the cable C-D is unknown; the hint names
// them and says where to run --probe instead of asking for flags already given.
TEST(HostOrder, TwoSilentPeersAreNamed) {
  const std::vector<PeerRoute> routes = {peer("B", true, true), peer("C", false, false),
                                         peer("D", false, false)};
  const HostOrderHint h = ring_host_order(routes, {link("B", "C")}, true, "A");
  EXPECT_FALSE(h.known);
  EXPECT_TRUE(h.hosts.empty());
  EXPECT_NE(h.message.find("cables between C, D unknown"), std::string::npos) << h.message;
  EXPECT_NE(h.message.find("on each host"), std::string::npos) << h.message;
}

// The hosts file lists this host too (as "a"; its hostname is "spark-0042"): the order uses the
// file's name, the one the reader compares it with.
TEST(HostOrder, ThisHostGoesByItsHostsFileName) {
  PeerRoute self = peer("a", false, false);
  self.self = true;
  const std::vector<PeerRoute> routes = {self, peer("b", true, true), peer("c", true, true)};
  const HostOrderHint h = ring_host_order(routes, {link("b", "c")}, true, "spark-0042");
  ASSERT_EQ(h.kind, topology::RingOrder::kCycle) << h.message;
  EXPECT_EQ(h.hosts[0], "a");
  EXPECT_EQ(h.message.find("spark-0042"), std::string::npos) << h.message;
}

TEST(HostOrder, StarHasNone) {
  const std::vector<PeerRoute> routes = {peer("B", true, true), peer("C", true, true),
                                         peer("D", true, true)};
  const HostOrderHint h = ring_host_order(routes, {}, true, "A");
  EXPECT_EQ(h.kind, topology::RingOrder::kNone);
  EXPECT_TRUE(h.hosts.empty());
}

}  // namespace
}  // namespace mesh::doctor
