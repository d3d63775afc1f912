// SPDX-License-Identifier: Apache-2.0
// Routes over the cable graph (relay/routes.h) and the link-state table the beacons feed
// (relay/link_state.h): ring of 4 (two equal-cost paths), line of 5 (3 relays), a disconnected
// graph (the error names what is missing), pins, expiry of dead hosts and cut cables.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "relay/cluster_key.h"
#include "relay/link_state.h"
#include "relay/routes.h"

namespace mesh::relay {
namespace {

Ipv4Prefix P(const char* a, uint8_t len) {
  return Ipv4Prefix{*parse_ipv4(a), len};
}

// Hosts named by letter with their addresses; cables by pairs of letters; neighbours derived.
struct Graph {
  std::map<char, HostEntry> hosts;
  void add(char name, std::vector<Ipv4Prefix> addrs) {
    HostEntry h;
    h.addrs = std::move(addrs);
    h.id = host_id_of(h.addrs);
    hosts[name] = h;
  }
  void cable(char a, char b) {
    hosts[a].neighbours.push_back(hosts[b].id);
    hosts[b].neighbours.push_back(hosts[a].id);
  }
  std::vector<HostEntry> list() const {
    std::vector<HostEntry> v;
    for (const auto& [n, h] : hosts) v.push_back(h);
    return v;
  }
  uint32_t id(char n) const { return hosts.at(n).id; }
};

// tests/netns/topologies/ring4.topo: a-b /24, b-c /30, c-d /31, d-a /24.
Graph ring4() {
  Graph g;
  g.add('a', {P("198.18.20.1", 24), P("198.18.23.2", 24)});
  g.add('b', {P("198.18.20.2", 24), P("198.18.21.1", 30)});
  g.add('c', {P("198.18.21.2", 30), P("198.18.22.0", 31)});
  g.add('d', {P("198.18.22.1", 31), P("198.18.23.1", 24)});
  g.cable('a', 'b');
  g.cable('b', 'c');
  g.cable('c', 'd');
  g.cable('d', 'a');
  return g;
}

// line5.topo: a-b-c-d-e.
Graph line5() {
  Graph g;
  g.add('a', {P("198.18.30.1", 24)});
  g.add('b', {P("198.18.30.2", 24), P("198.18.31.1", 30)});
  g.add('c', {P("198.18.31.2", 30), P("198.18.32.0", 31)});
  g.add('d', {P("198.18.32.1", 31), P("198.18.33.1", 24)});
  g.add('e', {P("198.18.33.2", 24)});
  g.cable('a', 'b');
  g.cable('b', 'c');
  g.cable('c', 'd');
  g.cable('d', 'e');
  return g;
}

TEST(Routes, RingOfFourHasTwoEqualCostFirstHops) {
  Graph g = ring4();
  Route r;
  std::string why;
  ASSERT_TRUE(find_route(g.list(), g.id('a'), g.hosts['c'].addrs, {}, &r, &why)) << why;
  EXPECT_EQ(r.dest_host, g.id('c'));
  EXPECT_EQ(r.hops, 2u);
  ASSERT_EQ(r.next.size(), 2u);
  std::set<uint32_t> next{r.next[0].host, r.next[1].host};
  EXPECT_EQ(next, (std::set<uint32_t>{g.id('b'), g.id('d')}));
  // Each next hop is reached over the shared cable, from this host's address on it.
  for (const NextHop& h : r.next) {
    if (h.host == g.id('b')) {
      EXPECT_EQ(h.local, P("198.18.20.1", 24));
      EXPECT_EQ(h.peer_addr, *parse_ipv4("198.18.20.2"));
    } else {
      EXPECT_EQ(h.local, P("198.18.23.2", 24));
      EXPECT_EQ(h.peer_addr, *parse_ipv4("198.18.23.1"));
    }
  }
  // Streams alternate: both ways round the ring carry traffic.
  EXPECT_NE(pick_next_hop(r, 0).host, pick_next_hop(r, 1).host);
  EXPECT_EQ(pick_next_hop(r, 0).host, pick_next_hop(r, 2).host);
  EXPECT_EQ(r.path.size(), 3u);
  EXPECT_EQ(r.path.front(), g.id('a'));
  EXPECT_EQ(r.path.back(), g.id('c'));
}

TEST(Routes, AnyOneOfTheDestinationAddressesFindsItsHost) {
  Graph g = ring4();
  Route r;
  ASSERT_TRUE(find_route(g.list(), g.id('b'), {P("198.18.23.1", 24)}, {}, &r, nullptr));
  EXPECT_EQ(r.dest_host, g.id('d'));
  EXPECT_EQ(r.next.size(), 2u);
}

TEST(Routes, LineOfFiveTakesFourCablesThroughThreeRelays) {
  Graph g = line5();
  Route r;
  std::string why;
  ASSERT_TRUE(find_route(g.list(), g.id('a'), g.hosts['e'].addrs, {}, &r, &why)) << why;
  EXPECT_EQ(r.hops, 4u);
  ASSERT_EQ(r.next.size(), 1u);
  EXPECT_EQ(r.next[0].host, g.id('b'));
  EXPECT_EQ(r.path, (std::vector<uint32_t>{g.id('a'), g.id('b'), g.id('c'), g.id('d'), g.id('e')}));
  // From the middle, towards either end.
  ASSERT_TRUE(find_route(g.list(), g.id('c'), g.hosts['a'].addrs, {}, &r, &why));
  EXPECT_EQ(r.hops, 2u);
  EXPECT_EQ(r.next[0].host, g.id('b'));
}

TEST(Routes, DisconnectedGraphNamesWhatIsMissing) {
  Graph g = line5();
  // Cut c-d: both ends stop listing each other.
  auto drop = [&](char x, char y) {
    auto& n = g.hosts[x].neighbours;
    n.erase(std::remove(n.begin(), n.end(), g.id(y)), n.end());
  };
  drop('c', 'd');
  drop('d', 'c');
  Route r;
  std::string why;
  EXPECT_FALSE(find_route(g.list(), g.id('a'), g.hosts['e'].addrs, {}, &r, &why));
  EXPECT_NE(why.find("disconnected"), std::string::npos) << why;
  EXPECT_NE(why.find("198.18.30.1"), std::string::npos) << why;              // this host
  EXPECT_NE(why.find("198.18.32.1+198.18.33.1"), std::string::npos) << why;  // d: reachable
  EXPECT_NE(why.find("198.18.33.2"), std::string::npos) << why;              // the destination
  // A one-sided neighbour entry is not an edge (the cable must work both ways).
  drop('c', 'b');
  g.hosts['d'].neighbours.push_back(g.id('c'));
  EXPECT_FALSE(find_route(g.list(), g.id('a'), g.hosts['d'].addrs, {}, &r, &why));
}

TEST(Routes, UnknownDestinationSaysNoAgentAnnouncesIt) {
  Graph g = ring4();
  Route r;
  std::string why;
  EXPECT_FALSE(find_route(g.list(), g.id('a'), {P("198.18.99.9", 24)}, {}, &r, &why));
  EXPECT_NE(why.find("198.18.99.9"), std::string::npos) << why;
  EXPECT_NE(why.find("no relay agent announces"), std::string::npos) << why;
  EXPECT_NE(why.find("198.18.21.2+198.18.22.0"), std::string::npos) << why;  // known hosts
}

TEST(Routes, PinsChooseTheFirstHop) {
  Graph g = ring4();
  std::vector<RoutePin> pins;
  std::string why;
  ASSERT_TRUE(parse_route_pins("198.18.21.0/30=198.18.23.1", &pins, &why)) << why;
  Route r;
  ASSERT_TRUE(find_route(g.list(), g.id('a'), g.hosts['c'].addrs, pins, &r, &why)) << why;
  ASSERT_EQ(r.next.size(), 1u);
  EXPECT_EQ(r.next[0].host, g.id('d'));
  // A pin through a host that is not a neighbour is an error that says so.
  ASSERT_TRUE(parse_route_pins("198.18.21.0/30=198.18.21.2", &pins, &why));
  EXPECT_FALSE(find_route(g.list(), g.id('a'), g.hosts['c'].addrs, pins, &r, &why));
  EXPECT_NE(why.find("NCCL_MESH_RELAY_VIA"), std::string::npos) << why;
}

TEST(Routes, PinParsingRejectsMalformedText) {
  std::vector<RoutePin> pins;
  std::string why;
  EXPECT_TRUE(parse_route_pins("", &pins, &why));
  EXPECT_TRUE(pins.empty());
  ASSERT_TRUE(parse_route_pins("10.0.0.0/8=10.1.1.1,192.168.0.0/16=10.2.2.2", &pins, &why));
  EXPECT_EQ(pins.size(), 2u);
  for (const char* bad : {"10.0.0.0=10.1.1.1", "10.0.0.0/33=1.1.1.1", "10.0.0.0/8",
                          "10.0.0.0/x=1.1.1.1", "10.0.0.0/8=nothing", "/8=1.1.1.1"}) {
    EXPECT_FALSE(parse_route_pins(bad, &pins, &why)) << bad;
  }
}

// LinkState: beacons in, routes out.
Beacon beacon_of(LinkState& s) {
  bool truncated = false;
  return s.next_beacon(0, &truncated);
}

TEST(LinkState, FloodsAlongALineAndExpiresADeadHost) {
  Graph g = line5();
  std::map<char, std::unique_ptr<LinkState>> st;
  for (auto& [n, h] : g.hosts) st[n] = std::make_unique<LinkState>(h.addrs, 1000);
  // Each host's beacon reaches its line neighbours, from its address on the shared subnet.
  auto exchange = [&](int64_t now, std::set<char> dead = {}) {
    std::map<char, Beacon> out;
    for (auto& [n, s] : st) {
      if (!dead.count(n)) out[n] = beacon_of(*s);
    }
    const std::string order = "abcde";
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      const char x = order[i], y = order[i + 1];
      for (auto [from, to] : {std::pair{x, y}, std::pair{y, x}}) {
        if (dead.count(from) || dead.count(to)) continue;
        Ipv4Prefix fa;
        uint32_t ta = 0;
        ASSERT_TRUE(shared_subnet(g.hosts[from], g.hosts[to], &fa, &ta));
        std::string why;
        EXPECT_TRUE(st[to]->receive(out[from], fa.addr, now, &why)) << why;
      }
    }
  };
  for (int t = 0; t < 6; ++t) exchange(t * 500);
  Route r;
  std::string why;
  ASSERT_TRUE(find_route(st['a']->hosts(), st['a']->self_id(), g.hosts['e'].addrs, {}, &r, &why))
      << why;
  EXPECT_EQ(r.hops, 4u);
  // c dies: within kExpireMs its entry and the cables to it leave every view.
  for (int t = 6; t < 14; ++t) {
    exchange(t * 500, {'c'});
    for (auto& [n, s] : st) s->expire(t * 500);
  }
  // Beyond the dead host nothing refreshes d's and e's entries either: a knows only a and b.
  EXPECT_FALSE(find_route(st['a']->hosts(), st['a']->self_id(), g.hosts['e'].addrs, {}, &r, &why));
  EXPECT_NE(why.find("198.18.33.2: no relay agent announces"), std::string::npos) << why;
  EXPECT_EQ(st['a']->hosts().size(), 2u);
  // e, on the other side, still knows d, which no longer lists c as a neighbour: disconnected.
  EXPECT_FALSE(find_route(st['e']->hosts(), st['e']->self_id(), g.hosts['b'].addrs, {}, &r, &why));
  EXPECT_EQ(st['e']->hosts().size(), 2u);
}

// A dead host's entry is flooded by every host that still has it; the copies must not bounce:
// b expires c's entry one beacon before a does (a got it through b), and a's next beacon still
// carries the same sequence. Taken back as new, it would come and go between a and b for ever.
TEST(LinkState, AnExpiredEntryIsNotTakenBackFromANeighboursCopy) {
  Graph g = line5();
  std::map<char, std::unique_ptr<LinkState>> st;
  for (char n : {'a', 'b', 'c'}) st[n] = std::make_unique<LinkState>(g.hosts[n].addrs, 1000);
  auto knows_c = [&](char at) {
    for (const HostEntry& h : st[at]->hosts()) {
      if (h.id == g.id('c')) return true;
    }
    return false;
  };
  for (int t = 0; t < 60; ++t) {
    const bool c_alive = t < 4;
    std::map<char, Beacon> out;
    for (auto& [n, s] : st) out[n] = beacon_of(*s);
    for (auto [from, to] :
         {std::pair{'a', 'b'}, std::pair{'b', 'a'}, std::pair{'b', 'c'}, std::pair{'c', 'b'}}) {
      if (!c_alive && (from == 'c' || to == 'c')) continue;
      Ipv4Prefix fa;
      uint32_t ta = 0;
      ASSERT_TRUE(shared_subnet(g.hosts[from], g.hosts[to], &fa, &ta));
      std::string why;
      EXPECT_TRUE(st[to]->receive(out[from], fa.addr, t * 500, &why)) << why;
    }
    for (auto& [n, s] : st) s->expire(t * 500);
    if (t == 3) {
      ASSERT_TRUE(knows_c('a'));
    }
    // c's last sequence reached b at 1.5 s and a at 2 s: both drop it by 5.5 s, and for good.
    if (t >= 11) {
      EXPECT_FALSE(knows_c('a')) << "at " << t * 500 << " ms";
      EXPECT_FALSE(knows_c('b')) << "at " << t * 500 << " ms";
    }
  }
}

TEST(LinkState, RefusesBeaconsThatAreNotFromANeighbour) {
  Graph g = ring4();
  LinkState a(g.hosts['a'].addrs, 1);
  LinkState c(g.hosts['c'].addrs, 1);
  const Beacon from_c = beacon_of(c);
  std::string why;
  // c's address is on no subnet of a.
  EXPECT_FALSE(a.receive(from_c, *parse_ipv4("198.18.21.2"), 0, &why));
  EXPECT_NE(why.find("not on a subnet"), std::string::npos) << why;
  // A source address the sender does not claim.
  LinkState b(g.hosts['b'].addrs, 1);
  EXPECT_FALSE(a.receive(beacon_of(b), *parse_ipv4("198.18.20.77"), 0, &why));
  EXPECT_TRUE(a.receive(beacon_of(b), *parse_ipv4("198.18.20.2"), 0, &why)) << why;
  // Its own beacon (a looped-back broadcast) is ignored.
  EXPECT_TRUE(a.receive(beacon_of(a), *parse_ipv4("198.18.20.1"), 0, &why));
  EXPECT_EQ(a.hosts().size(), 2u);
}

TEST(LinkState, OlderSequencesDoNotOverwriteNewer) {
  Graph g = ring4();
  LinkState a(g.hosts['a'].addrs, 1);
  LinkState b(g.hosts['b'].addrs, 500);
  const Beacon newer = beacon_of(b);  // seq 501
  Beacon older = newer;
  older.hosts[0].seq = 400;
  std::string why;
  ASSERT_TRUE(a.receive(newer, *parse_ipv4("198.18.20.2"), 0, &why));
  ASSERT_TRUE(a.receive(older, *parse_ipv4("198.18.20.2"), 100, &why));
  for (const HostEntry& h : a.hosts()) {
    if (h.id == b.self_id()) {
      EXPECT_EQ(h.seq, 501u);
    }
  }
}

// A line a-b-c of LinkStates (line5's first three hosts), all with `key`, after a few rounds of
// beacons; and a forged beacon "from b" at a.
struct Line3 {
  Graph g = line5();
  std::map<char, std::unique_ptr<LinkState>> st;
  explicit Line3(const ClusterKey& key) {
    for (char n : {'a', 'b', 'c'}) {
      st[n] = std::make_unique<LinkState>(g.hosts[n].addrs, 1000);
      st[n]->set_key(key);
    }
    for (int t = 0; t < 4; ++t) exchange(t * 500);
  }
  void exchange(int64_t now) {
    std::map<char, Beacon> out;
    for (auto& [n, s] : st) out[n] = beacon_of(*s);
    for (auto [from, to] :
         {std::pair{'a', 'b'}, std::pair{'b', 'a'}, std::pair{'b', 'c'}, std::pair{'c', 'b'}}) {
      Ipv4Prefix fa;
      uint32_t ta = 0;
      ASSERT_TRUE(shared_subnet(g.hosts[from], g.hosts[to], &fa, &ta));
      std::string why;
      EXPECT_TRUE(st[to]->receive(out[from], fa.addr, now, &why)) << why;
    }
  }
  // a's route to c: its number of cables (0: none).
  size_t route_a_to_c() {
    Route r;
    std::string why;
    return find_route(st['a']->hosts(), st['a']->self_id(), g.hosts['c'].addrs, {}, &r, &why)
               ? r.hops
               : 0;
  }
  // What an attacker on a's cable sends "from b": b's newest entry (captured, so validly signed
  // when `sender` is b's own beacon) followed by a forged entry for c that cuts c off (no
  // neighbours, a much newer sequence).
  Beacon forged(bool keep_signed_sender) {
    Beacon b = beacon_of(*st['b']);
    if (!keep_signed_sender) {
      b.hosts[0].neighbours.clear();  // "b hears nobody": re-signing needs the key
      b.hosts[0].seq += 1000;
    }
    HostEntry c = g.hosts['c'];
    c.neighbours.clear();
    c.seq = 1000000;
    b.hosts.resize(1);
    b.hosts.push_back(c);
    return b;
  }
};

TEST(LinkState, WithAClusterKeyAForgedBeaconChangesNoRoute) {
  const ClusterKey key(32, 0x5a);
  Line3 l(key);
  ASSERT_EQ(l.route_a_to_c(), 2u);
  const uint32_t b_addr = *parse_ipv4("198.18.30.2");
  std::string why;
  size_t dropped = 0;
  // The sender's own entry altered: the whole beacon is refused.
  EXPECT_FALSE(l.st['a']->receive(l.forged(false), b_addr, 2000, &why, &dropped));
  EXPECT_NE(why.find("cluster key"), std::string::npos) << why;
  // b's genuine (replayed) entry with a forged entry for c: the forged one is dropped.
  EXPECT_TRUE(l.st['a']->receive(l.forged(true), b_addr, 2000, &why, &dropped)) << why;
  EXPECT_EQ(dropped, 1u);
  EXPECT_EQ(l.route_a_to_c(), 2u);
  // A beacon of a host that has no key (or another key): refused.
  LinkState stranger(l.g.hosts['b'].addrs, 5000);
  EXPECT_FALSE(l.st['a']->receive(beacon_of(stranger), b_addr, 2000, &why));
  EXPECT_EQ(l.route_a_to_c(), 2u);
}

TEST(LinkState, WithoutAKeyTheSameForgeryCutsTheRouteButNeighboursCannotClaimAddresses) {
  Line3 l({});
  ASSERT_EQ(l.route_a_to_c(), 2u);
  const uint32_t b_addr = *parse_ipv4("198.18.30.2");
  std::string why;
  size_t dropped = 0;
  // Without a key nothing tells a forged entry from a real one (the trust model of
  // docs/relay.md): the forged entry for c is taken and c is cut off.
  EXPECT_TRUE(l.st['a']->receive(l.forged(true), b_addr, 2000, &why, &dropped)) << why;
  EXPECT_EQ(dropped, 0u);
  EXPECT_EQ(l.route_a_to_c(), 0u);
  // But a flooded entry claiming an address of the receiver or of the sender is dropped.
  Line3 m({});
  Beacon b = beacon_of(*m.st['b']);
  HostEntry fake;
  fake.addrs = {P("198.18.30.1", 24), P("198.18.99.1", 24)};  // a's own address
  fake.id = host_id_of(fake.addrs);
  fake.seq = 7;
  HostEntry fake2;
  fake2.addrs = {P("198.18.31.1", 30), P("198.18.98.1", 24)};  // b's (the sender's) address
  fake2.id = host_id_of(fake2.addrs);
  fake2.seq = 7;
  b.hosts.push_back(fake);
  b.hosts.push_back(fake2);
  EXPECT_TRUE(m.st['a']->receive(b, b_addr, 2000, &why, &dropped)) << why;
  EXPECT_EQ(dropped, 2u);
  for (const HostEntry& h : m.st['a']->hosts()) {
    EXPECT_NE(h.id, fake.id);
    EXPECT_NE(h.id, fake2.id);
  }
}

TEST(ClusterKey, OnlyAPrivateFileOfThisUserWithEnoughBytesIsAKey) {
  char path[] = "/tmp/mesh-cluster-key-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "0123456789abcdef0123\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  ClusterKey key;
  std::string why;
  ASSERT_EQ(chmod(path, 0644), 0);
  EXPECT_FALSE(load_cluster_key(path, &key, &why));
  EXPECT_NE(why.find("chmod 600"), std::string::npos) << why;
  ASSERT_EQ(chmod(path, 0600), 0);
  ASSERT_TRUE(load_cluster_key(path, &key, &why)) << why;
  EXPECT_EQ(key.size(), 20u);  // the newline is not part of it
  ASSERT_EQ(truncate(path, 8), 0);
  EXPECT_FALSE(load_cluster_key(path, &key, &why));
  unlink(path);
  EXPECT_FALSE(load_cluster_key(path, &key, &why));  // missing
}

}  // namespace
}  // namespace mesh::relay
