// SPDX-License-Identifier: Apache-2.0
// Retention of a silent neighbour (relay/link_state.h "Retention", relay/retention.h): a line
// a-b-c (line5's first hosts) whose relay b stops beaconing while a's cable to it has carrier and
// relayed sockets go to it. a keeps b and what it learnt through b (its route to c) past the
// TTLs; carrier lost, no relayed socket left, or kRetainMaxMs without a beacon end that, and the
// normal TTL then runs from the end of retention. Retention is local: a host that hears only the
// retaining host's beacons drops b on time.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "relay/link_state.h"
#include "relay/retention.h"
#include "relay/routes.h"
#include "util/socket_util.h"

namespace mesh::relay {
namespace {

Ipv4Prefix P(const char* a, uint8_t len) {
  return Ipv4Prefix{*parse_ipv4(a), len};
}

const std::map<char, std::vector<Ipv4Prefix>> kAddrs = {
    {'a', {P("198.18.30.1", 24)}},
    {'b', {P("198.18.30.2", 24), P("198.18.31.1", 30)}},
    {'c', {P("198.18.31.2", 30)}},
    {'z', {P("198.18.30.9", 24)}},  // a second host on a's /24 (only a's beacons reach it)
};
const std::vector<std::pair<char, char>> kCables = {{'a', 'b'}, {'b', 'c'}, {'a', 'z'}};

Beacon beacon_of(LinkState& s) {
  bool truncated = false;
  return s.next_beacon(0, &truncated);
}

HostEntry entry(char n) {
  HostEntry h;
  h.addrs = kAddrs.at(n);
  h.id = host_id_of(h.addrs);
  return h;
}

struct Line {
  std::map<char, std::unique_ptr<LinkState>> st;
  std::set<char> silent;  // hosts whose beacons are lost (they still hear the others)
  Line() {
    for (const auto& [n, a] : kAddrs) st[n] = std::make_unique<LinkState>(a, 1000);
  }
  // One beacon round at `now`, then expire() at every host with a's held set.
  void round(int64_t now, const std::set<uint32_t>& a_holds = {}) {
    std::map<char, Beacon> out;
    for (auto& [n, s] : st) out[n] = beacon_of(*s);
    for (auto [x, y] : kCables) {
      for (auto [from, to] : {std::pair{x, y}, std::pair{y, x}}) {
        if (silent.count(from) != 0) continue;
        uint32_t source = 0;
        for (const Ipv4Prefix& f : kAddrs.at(from)) {
          for (const Ipv4Prefix& t : kAddrs.at(to)) {
            if (f.prefix == t.prefix && in_subnet(t, f.addr)) source = f.addr;
          }
        }
        std::string error;
        EXPECT_TRUE(st[to]->receive(out[from], source, now, &error)) << error;
      }
    }
    for (auto& [n, s] : st) s->expire(now, n == 'a' ? a_holds : std::set<uint32_t>{});
  }
  std::string why;
  size_t route(char from, char to) {
    Route r;
    return find_route(st[from]->hosts(), st[from]->self_id(), kAddrs.at(to), {}, &r, &why) ? r.hops
                                                                                           : 0;
  }
  bool knows(char at, char who) {
    for (const HostEntry& h : st[at]->hosts()) {
      if (h.id == entry(who).id) return true;
    }
    return false;
  }
  bool neighbour(char at, char who) {
    const std::vector<uint32_t> n = st[at]->hosts()[0].neighbours;
    return std::find(n.begin(), n.end(), entry(who).id) != n.end();
  }
  // a's decision for b, as the agent makes it (relay/retention.h).
  std::set<uint32_t> a_holds(int64_t now, bool carrier, std::set<uint32_t> peers) {
    std::set<uint32_t> held;
    for (const HostEntry& n : st['a']->silent_neighbours(now)) {
      if (holds_neighbour(n, {{kAddrs.at('a')[0], carrier}}, peers)) held.insert(n.id);
    }
    return held;
  }
};

const uint32_t kB = *parse_ipv4("198.18.30.2");  // b's address on a's cable

TEST(Retention, WithoutHoldingASilentRelayAndTheRoutesThroughItGoWithinTheTtls) {
  Line l;
  for (int64_t t = 0; t <= 2000; t += 500) l.round(t);
  ASSERT_EQ(l.route('a', 'c'), 2u);
  l.silent = {'b'};
  for (int64_t t = 2500; t <= 6000; t += 500) l.round(t, l.a_holds(t, true, {}));
  EXPECT_EQ(l.route('a', 'c'), 0u);
  EXPECT_FALSE(l.knows('a', 'b'));
  EXPECT_FALSE(l.knows('a', 'c'));
}

TEST(Retention, AHeldNeighbourAndTheHostsBehindItSurvivePastTheTtls) {
  Line l;
  for (int64_t t = 0; t <= 2000; t += 500) l.round(t);
  l.silent = {'b'};
  for (int64_t t = 2500; t <= 20000; t += 500) l.round(t, l.a_holds(t, true, {kB}));
  EXPECT_EQ(l.route('a', 'c'), 2u);  // 18 s without a beacon from b: still a -> b -> c
  EXPECT_TRUE(l.knows('a', 'c'));
  // Retention is a's alone: z hears a's beacons, which flood b's and c's entries with their old
  // sequences; z holds nothing, so it dropped both on time.
  EXPECT_FALSE(l.knows('z', 'b'));
  EXPECT_FALSE(l.knows('z', 'c'));
  // b speaks again: normal updates, nothing silent. (c, which held nothing in this harness,
  // dropped b meanwhile: its entry lists b again after it hears b, a second later.)
  l.silent.clear();
  for (int64_t t = 20500; t <= 22000; t += 500) l.round(t);
  EXPECT_TRUE(l.st['a']->silent_neighbours(22000).empty());
  EXPECT_EQ(l.route('a', 'c'), 2u) << l.why;
}

TEST(Retention, CarrierLostEndsItAndTheTtlRunsFromThen) {
  Line l;
  for (int64_t t = 0; t <= 2000; t += 500) l.round(t);
  l.silent = {'b'};
  for (int64_t t = 2500; t <= 10000; t += 500) l.round(t, l.a_holds(t, true, {kB}));
  ASSERT_EQ(l.route('a', 'c'), 2u);
  // Carrier gone at 10.5 s (the relayed sockets still look established): held last at 10 s, so
  // b stays a neighbour until 12 s (the TTL from then, not from its last beacon 8 s earlier).
  for (int64_t t = 10500; t <= 12000; t += 500) l.round(t, l.a_holds(t, false, {kB}));
  EXPECT_TRUE(l.neighbour('a', 'b'));
  EXPECT_EQ(l.route('a', 'c'), 2u);
  l.round(12500, l.a_holds(12500, false, {kB}));
  EXPECT_FALSE(l.neighbour('a', 'b'));
  EXPECT_EQ(l.route('a', 'c'), 0u);
  // Its entry and the hosts learnt through it leave with it.
  l.round(13000, l.a_holds(13000, false, {kB}));
  EXPECT_FALSE(l.knows('a', 'b'));
  EXPECT_FALSE(l.knows('a', 'c'));
}

TEST(Retention, NoRelayedSocketToTheNeighbourHoldsNothing) {
  Line l;
  for (int64_t t = 0; t <= 2000; t += 500) l.round(t);
  l.silent = {'b'};
  // Sockets to other addresses (c's; b's address on a subnet a has no cable to) do not count.
  const std::set<uint32_t> others = {*parse_ipv4("198.18.31.2"), *parse_ipv4("198.18.31.1")};
  for (int64_t t = 2500; t <= 4000; t += 500) l.round(t, l.a_holds(t, true, others));
  EXPECT_TRUE(l.neighbour('a', 'b'));  // the plain TTL: last beacon at 2 s, gone after 4 s
  l.round(4500, l.a_holds(4500, true, others));
  EXPECT_FALSE(l.neighbour('a', 'b'));
  EXPECT_EQ(l.route('a', 'c'), 0u);
  // Held for a while, then the last relayed socket closes: the TTL runs from that moment.
  Line m;
  for (int64_t t = 0; t <= 2000; t += 500) m.round(t);
  m.silent = {'b'};
  for (int64_t t = 2500; t <= 7000; t += 500) m.round(t, m.a_holds(t, true, {kB}));
  for (int64_t t = 7500; t <= 9000; t += 500) m.round(t, m.a_holds(t, true, {}));
  EXPECT_EQ(m.route('a', 'c'), 2u);
  m.round(9500, m.a_holds(9500, true, {}));
  EXPECT_EQ(m.route('a', 'c'), 0u);
}

TEST(Retention, TheCapEndsItWhateverThisHostHolds) {
  Line l;
  for (int64_t t = 0; t <= 2000; t += 500) l.round(t);
  l.silent = {'b'};
  const int64_t last = 2000, end = last + kRetainMaxMs;
  for (int64_t t = 2500; t <= end; t += 500) l.round(t, l.a_holds(t, true, {kB}));
  EXPECT_EQ(l.route('a', 'c'), 2u);
  for (int64_t t = end + 500; t <= end + kNeighbourTtlMs; t += 500)
    l.round(t, l.a_holds(t, true, {kB}));
  EXPECT_TRUE(l.neighbour('a', 'b'));  // the TTL from the last moment it was held
  l.round(end + kNeighbourTtlMs + 500, l.a_holds(end + kNeighbourTtlMs + 500, true, {kB}));
  EXPECT_FALSE(l.neighbour('a', 'b'));
  EXPECT_EQ(l.route('a', 'c'), 0u);
  l.round(end + kNeighbourTtlMs + 1000, l.a_holds(end + kNeighbourTtlMs + 1000, true, {kB}));
  EXPECT_FALSE(l.knows('a', 'b'));
  EXPECT_FALSE(l.knows('a', 'c'));
}

TEST(Retention, HeldIsDecidedPerCable) {
  const HostEntry b = entry('b');
  const LocalCable up{kAddrs.at('a')[0], true}, down{kAddrs.at('a')[0], false};
  EXPECT_TRUE(holds_neighbour(b, {up}, {kB}));
  EXPECT_FALSE(holds_neighbour(b, {down}, {kB}));
  EXPECT_FALSE(holds_neighbour(b, {up}, {}));
  // c's view: its cable to b is the /30; a socket to b's /24 address is not on it.
  const LocalCable c_up{kAddrs.at('c')[0], true};
  EXPECT_FALSE(holds_neighbour(b, {c_up}, {kB}));
  EXPECT_TRUE(holds_neighbour(b, {c_up}, {*parse_ipv4("198.18.31.1")}));
  // This host's own address never counts as the neighbour's.
  EXPECT_FALSE(holds_neighbour(entry('a'), {up}, {kAddrs.at('a')[0].addr}));
}

TEST(Retention, CarrierAndSocketTableComeFromTheKernel) {
  EXPECT_TRUE(interface_has_carrier("lo"));
  EXPECT_FALSE(interface_has_carrier("mesh-none0"));
  EXPECT_FALSE(interface_has_carrier(""));
  // A loopback connection to a listener's port: the socket table shows its peer, both ends.
  UniqueFd l(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa = make_sockaddr(0x7f000001, 0);
  ASSERT_EQ(bind(l.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(listen(l.get(), 4), 0);
  socklen_t len = sizeof(sa);
  getsockname(l.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  const uint16_t port = ntohs(sa.sin_port);
  std::set<uint32_t> peers;
  std::string why;
  if (!relay_socket_peers(port, &peers, &why))
    GTEST_SKIP() << "this kernel's socket table cannot be read (no sock_diag): " << why;
  EXPECT_TRUE(peers.empty());
  UniqueFd c(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in local = make_sockaddr(0x7f000002, 0);  // a second loopback address as the peer
  ASSERT_EQ(bind(c.get(), reinterpret_cast<const sockaddr*>(&local), sizeof(local)), 0);
  ASSERT_EQ(connect(c.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)), 0);
  UniqueFd a(accept(l.get(), nullptr, nullptr));
  ASSERT_TRUE(a.valid());
  ASSERT_TRUE(relay_socket_peers(port, &peers, &why)) << why;
  EXPECT_EQ(peers, (std::set<uint32_t>{0x7f000001, 0x7f000002}));
  EXPECT_TRUE(relay_socket_peers(static_cast<uint16_t>(port ^ 1), &peers, &why)) << why;
  EXPECT_EQ(peers.count(0x7f000002), 0u);
}

}  // namespace
}  // namespace mesh::relay
