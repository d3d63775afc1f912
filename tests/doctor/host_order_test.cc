// SPDX-License-Identifier: Apache-2.0
// The doctor's host-order hint over synthetic mesh maps: a 4-host ring probed from host A in a
// scrambled numbering, a line, and the unknown case without --probe.
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

TEST(HostOrder, StarHasNone) {
  const std::vector<PeerRoute> routes = {peer("B", true, true), peer("C", true, true),
                                         peer("D", true, true)};
  const HostOrderHint h = ring_host_order(routes, {}, true, "A");
  EXPECT_EQ(h.kind, topology::RingOrder::kNone);
  EXPECT_TRUE(h.hosts.empty());
}

}  // namespace
}  // namespace mesh::doctor
