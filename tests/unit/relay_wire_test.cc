// SPDX-License-Identifier: Apache-2.0
// The relay agents' wire formats: beacons (relay/beacon.h) and the relay request and reply
// (relay/request.h), including hostile input: every byte comes from the network.
#include <gtest/gtest.h>

#include <cstring>

#include "relay/beacon.h"
#include "relay/registry.h"
#include "relay/request.h"
#include "util/byte_order.h"

namespace mesh::relay {
namespace {

Ipv4Prefix P(const char* a, uint8_t len) {
  return Ipv4Prefix{*parse_ipv4(a), len};
}

HostEntry host(std::vector<Ipv4Prefix> addrs, std::vector<uint32_t> neighbours = {},
               uint32_t seq = 7) {
  HostEntry h;
  h.addrs = std::move(addrs);
  h.id = host_id_of(h.addrs);
  h.seq = seq;
  h.neighbours = std::move(neighbours);
  return h;
}

Beacon sample() {
  Beacon b;
  b.hosts.push_back(host({P("198.18.20.1", 24), P("198.18.23.2", 24)}, {11, 12}));
  b.hosts.push_back(host({P("198.18.21.2", 30), P("198.18.22.0", 31)}, {13}, 99));
  return b;
}

// Recomputes the trailing checksum after a test edited the bytes (to reach the field checks).
void reseal(std::vector<uint8_t>* v) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i + 4 < v->size(); ++i) {
    h ^= (*v)[i];
    h *= 16777619u;
  }
  put_u32(v->data() + v->size() - 4, h);
}

TEST(HostId, DependsOnTheAddressSetNotItsOrder) {
  const auto a = host_id_of({P("10.0.0.1", 30), P("10.0.1.1", 30)});
  EXPECT_EQ(a, host_id_of({P("10.0.1.1", 30), P("10.0.0.1", 30)}));
  EXPECT_NE(a, host_id_of({P("10.0.0.1", 30)}));
  EXPECT_NE(a, host_id_of({P("10.0.0.1", 24), P("10.0.1.1", 30)}));
}

TEST(Beacon, RoundTrips) {
  std::vector<uint8_t> bytes;
  std::string why;
  ASSERT_TRUE(encode_beacon(sample(), &bytes, &why)) << why;
  Beacon back;
  ASSERT_TRUE(decode_beacon(bytes.data(), bytes.size(), &back, &why)) << why;
  ASSERT_EQ(back.hosts.size(), 2u);
  EXPECT_EQ(back.hosts[0], sample().hosts[0]);
  EXPECT_EQ(back.hosts[1], sample().hosts[1]);
}

TEST(Beacon, EveryTruncationIsRejected) {
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(encode_beacon(sample(), &bytes, nullptr));
  for (size_t n = 0; n < bytes.size(); ++n) {
    Beacon b;
    std::string why;
    EXPECT_FALSE(decode_beacon(bytes.data(), n, &b, &why)) << n;
    EXPECT_FALSE(why.empty());
  }
}

TEST(Beacon, EveryFlippedByteIsRejected) {
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(encode_beacon(sample(), &bytes, nullptr));
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto copy = bytes;
    copy[i] ^= 0x40;
    Beacon b;
    std::string why;
    EXPECT_FALSE(decode_beacon(copy.data(), copy.size(), &b, &why)) << "byte " << i;
  }
}

TEST(Beacon, FieldChecksBehindAValidChecksum) {
  std::vector<uint8_t> good;
  ASSERT_TRUE(encode_beacon(sample(), &good, nullptr));
  struct Edit {
    size_t at;
    uint8_t value;
    const char* want;
  };
  // Offsets: header 12, entry 0 = id(4) seq(4) na(1) nn(1) at 12..21, addresses from 22.
  for (const Edit& e : std::vector<Edit>{{4, 9, "version"},
                                         {5, 0, "host count"},
                                         {5, 200, "host count"},
                                         {6, 1, "reserved"},
                                         {20, 9, "addresses"},
                                         {20, 0, "addresses"},
                                         {21, 17, "neighbours"},
                                         {26, 33, "invalid address"},
                                         {26, 0, "invalid address"},
                                         {12, 0x55, "id does not match"}}) {
    auto v = good;
    v[e.at] = e.value;
    reseal(&v);
    Beacon b;
    std::string why;
    EXPECT_FALSE(decode_beacon(v.data(), v.size(), &b, &why)) << e.at;
    EXPECT_NE(why.find(e.want), std::string::npos) << e.at << ": " << why;
  }
}

TEST(Beacon, WrongCountsAndRepeatedIdsAreRejected) {
  Beacon twice = sample();
  twice.hosts.push_back(twice.hosts[1]);
  std::vector<uint8_t> v;
  ASSERT_TRUE(encode_beacon(twice, &v, nullptr));
  Beacon b;
  std::string why;
  EXPECT_FALSE(decode_beacon(v.data(), v.size(), &b, &why));
  EXPECT_NE(why.find("repeated"), std::string::npos) << why;
  // A count that claims one more host than the bytes hold.
  ASSERT_TRUE(encode_beacon(sample(), &v, nullptr));
  v[5] = 3;
  reseal(&v);
  EXPECT_FALSE(decode_beacon(v.data(), v.size(), &b, &why));
  // Zero neighbour id.
  Beacon zero = sample();
  zero.hosts[1].neighbours = {0};
  ASSERT_TRUE(encode_beacon(zero, &v, nullptr));
  EXPECT_FALSE(decode_beacon(v.data(), v.size(), &b, &why));
}

TEST(Beacon, OversizeIsRejectedBothWays) {
  Beacon big;
  for (uint32_t i = 0; i < kMaxBeaconHosts + 1; ++i)
    big.hosts.push_back(host({Ipv4Prefix{0x0a000001u + 4 * i, 30}}));
  std::vector<uint8_t> v;
  std::string why;
  EXPECT_FALSE(encode_beacon(big, &v, &why));
  std::vector<uint8_t> huge(kMaxBeaconSize + 1, 0);
  Beacon b;
  EXPECT_FALSE(decode_beacon(huge.data(), huge.size(), &b, &why));
  EXPECT_NE(why.find("oversize"), std::string::npos);
  // The largest legal beacon decodes.
  Beacon full;
  for (uint32_t i = 0; i < kMaxBeaconHosts; ++i) {
    std::vector<Ipv4Prefix> a;
    for (uint32_t k = 0; k < kMaxHostAddrs; ++k) a.push_back({0x0a000001u + 64 * i + 4 * k, 30});
    std::vector<uint32_t> n(kMaxNeighbours);
    for (uint32_t k = 0; k < kMaxNeighbours; ++k) n[k] = k + 1;
    full.hosts.push_back(host(a, n));
  }
  ASSERT_TRUE(encode_beacon(full, &v, &why)) << why;
  EXPECT_EQ(v.size(), kMaxBeaconSize);
  EXPECT_TRUE(decode_beacon(v.data(), v.size(), &b, &why)) << why;
}

const uint8_t kNonce[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

RelayRequest request() {
  RelayRequest r;
  r.hop_limit = 5;
  r.stream = 3;
  r.port = 40123;
  r.origin = 0xabcdef01;
  r.dest = {P("198.18.21.2", 30), P("198.18.22.0", 31)};
  r.tag = relay_listener_tag(kNonce, sizeof(kNonce));
  return r;
}

Sha256 key() {
  return relay_listener_key(kNonce, sizeof(kNonce));
}

TEST(RelayRequest, RoundTripsAndProvesTheHandle) {
  uint8_t b[kRequestSize];
  encode_request(request(), key(), b);
  RelayRequest back;
  std::string why;
  ASSERT_TRUE(decode_request(b, &back, &why)) << why;
  EXPECT_EQ(back.hop_limit, 5);
  EXPECT_EQ(back.stream, 3);
  EXPECT_EQ(back.port, 40123);
  EXPECT_EQ(back.origin, 0xabcdef01u);
  EXPECT_EQ(back.dest, request().dest);
  EXPECT_EQ(back.tag, relay_listener_tag(kNonce, sizeof(kNonce)));
  EXPECT_NE(back.time_ms, 0u);
  EXPECT_NE(back.unique, 0u);
  EXPECT_TRUE(verify_proof(b, key()));
  // Another handle's key does not verify it; the tag and key do not reveal the nonce.
  uint8_t other[16] = {};
  EXPECT_FALSE(verify_proof(b, relay_listener_key(other, sizeof(other))));
  EXPECT_NE(std::memcmp(key().data(), kNonce, sizeof(kNonce)), 0);
  // Two encodings of one request differ (fresh random): a replay cache can tell them apart.
  uint8_t again[kRequestSize];
  encode_request(request(), key(), again);
  EXPECT_NE(std::memcmp(b, again, kRequestSize), 0);
}

TEST(RelayRequest, EveryFlippedByteFailsTheDecodeOrTheProofButTheHopLimit) {
  uint8_t good[kRequestSize];
  encode_request(request(), key(), good);
  for (size_t i = 0; i < kRequestSize; ++i) {
    uint8_t b[kRequestSize];
    std::memcpy(b, good, sizeof(b));
    b[i] ^= 0x01;
    RelayRequest r;
    std::string why;
    const bool accepted = decode_request(b, &r, &why) && verify_proof(b, key());
    EXPECT_EQ(accepted, i == 5) << "byte " << i;  // [5]: the hop limit, changed by each relay
  }
  uint8_t fwd[kRequestSize];
  reencode_request(good, 4, fwd);
  EXPECT_EQ(fwd[5], 4);
  EXPECT_TRUE(verify_proof(fwd, key()));
}

TEST(RelayRequest, FieldChecks) {
  struct Edit {
    size_t at;
    uint8_t value;
    const char* want;
  };
  for (const Edit& e : std::vector<Edit>{{4, 1, "version"},
                                         {8, 0, "port"},  // with [9] below: port 0
                                         {10, 0, "address count"},
                                         {10, 9, "address count"},
                                         {11, 2, "reserved"},
                                         {11, 0x81, "reserved"},
                                         {40, 1, "padding"},
                                         {20, 40, "invalid"},
                                         {20, 0, "invalid"}}) {
    uint8_t b[kRequestSize];
    encode_request(request(), key(), b);
    b[e.at] = e.value;
    if (e.at == 8) b[9] = 0;
    RelayRequest r;
    std::string why;
    EXPECT_FALSE(decode_request(b, &r, &why)) << e.at;
    EXPECT_NE(why.find(e.want), std::string::npos) << e.at << ": " << why;
  }
}

TEST(RelayRequest, RdmaFlagRoundTrips) {
  for (bool rdma : {false, true}) {
    RelayRequest r = request();
    r.rdma = rdma;
    uint8_t b[kRequestSize];
    encode_request(r, key(), b);
    EXPECT_EQ(b[11], rdma ? kRequestFlagRdma : 0);
    RelayRequest back;
    std::string why;
    ASSERT_TRUE(decode_request(b, &back, &why)) << why;
    EXPECT_EQ(back.rdma, rdma);
  }
}

TEST(RelayRequest, AtMostEightAddressesAreEncoded) {
  RelayRequest r = request();
  r.dest.clear();
  for (uint32_t i = 0; i < 12; ++i) r.dest.push_back({0x0a000001u + 4 * i, 30});
  uint8_t b[kRequestSize];
  encode_request(r, key(), b);
  RelayRequest back;
  ASSERT_TRUE(decode_request(b, &back, nullptr));
  EXPECT_EQ(back.dest.size(), kMaxRequestAddrs);
}

TEST(RelayRegistration, RoundTripsAndRejectsGarbage) {
  Registration r;
  r.port = 40000;
  r.tag = relay_listener_tag(kNonce, sizeof(kNonce));
  r.key = key();
  uint8_t b[kRegistrationSize];
  encode_registration(r, b);
  Registration back;
  std::string why;
  ASSERT_TRUE(decode_registration(b, sizeof(b), &back, &why)) << why;
  EXPECT_TRUE(back.add);
  EXPECT_EQ(back.port, 40000);
  EXPECT_EQ(back.tag, r.tag);
  EXPECT_EQ(back.key, r.key);
  EXPECT_FALSE(decode_registration(b, sizeof(b) - 1, &back, &why));
  b[0] = 3;
  EXPECT_FALSE(decode_registration(b, sizeof(b), &back, &why));
  EXPECT_NE(local_socket_name(18515, 0), local_socket_name(18515, 0x1234));
  EXPECT_EQ(local_socket_name(18515, 0)[0], '\0');  // abstract: per network namespace
}

TEST(RelayRouteQuery, QueryAndAnswerRoundTripAndRejectGarbage) {
  RouteQuery q;
  q.id = 77;
  q.stream = 3;
  q.age_ms = 1234;
  q.dest = {P("198.18.21.2", 30), P("198.18.22.0", 31)};
  uint8_t b[kRouteQuerySize];
  encode_route_query(q, b);
  RouteQuery qb;
  std::string why;
  ASSERT_TRUE(decode_route_query(b, sizeof(b), &qb, &why)) << why;
  EXPECT_EQ(qb.id, 77u);
  EXPECT_EQ(qb.stream, 3);
  EXPECT_EQ(qb.age_ms, 1234u);
  EXPECT_EQ(qb.dest, q.dest);
  EXPECT_FALSE(decode_route_query(b, sizeof(b) - 1, &qb, &why));
  b[1] = 9;
  EXPECT_FALSE(decode_route_query(b, sizeof(b), &qb, &why));
  RouteAnswer a;
  a.id = 77;
  a.status = 0;
  a.cables = 2;
  a.local = P("198.18.20.1", 24);
  a.port = 18515;
  a.peer = *parse_ipv4("198.18.20.2");
  a.why = "";
  a.path = "2 cables, via b";
  const std::vector<uint8_t> v = encode_route_answer(a);
  RouteAnswer ab;
  ASSERT_TRUE(decode_route_answer(v.data(), v.size(), &ab, &why)) << why;
  EXPECT_EQ(ab.id, 77u);
  EXPECT_EQ(ab.cables, 2);
  EXPECT_EQ(ab.local, a.local);
  EXPECT_EQ(ab.peer, a.peer);
  EXPECT_EQ(ab.path, a.path);
  for (size_t cut = 0; cut < v.size(); ++cut)
    EXPECT_FALSE(decode_route_answer(v.data(), cut, &ab, &why));
  std::vector<uint8_t> bad = v;
  bad[1] = 7;  // no such status
  EXPECT_FALSE(decode_route_answer(bad.data(), bad.size(), &ab, &why));
}

TEST(RelayRegistry, ListenersBelongToTheirProcess) {
  Registry reg;
  Registration r;
  r.port = 40000;
  r.tag = relay_listener_tag(kNonce, sizeof(kNonce));
  r.key = key();
  std::string why;
  ASSERT_TRUE(reg.add(7, r, &why)) << why;
  ASSERT_NE(reg.find(r.tag), nullptr);
  EXPECT_EQ(reg.find(r.tag)->port, 40000);
  EXPECT_FALSE(reg.add(8, r, &why));  // another process cannot take over the tag
  reg.remove(8, r.tag);               // nor remove it
  EXPECT_NE(reg.find(r.tag), nullptr);
  reg.drop_client(7);  // the process went: its listeners go
  EXPECT_EQ(reg.find(r.tag), nullptr);
  EXPECT_TRUE(peer_allowed(1000, 1000, 1000, -1));
  EXPECT_TRUE(peer_allowed(0, 0, 1000, -1));
  EXPECT_FALSE(peer_allowed(1001, 1001, 1000, -1));
  EXPECT_TRUE(peer_allowed(1001, 50, 1000, 50));
}

// A registration names a port only where a listener of the registering user is reached at one
// of the agent's addresses (bound to it or to 0.0.0.0), and no other user's listener is reached
// there beside it (relay hardening b; the kernel's side: RelayAgentRegistration).
// A LISTEN socket as the sock_diag dump reports it.
TcpSocketInfo listener(uint32_t addr, uint16_t port, uint32_t uid) {
  TcpSocketInfo l;
  l.state = 10;  // TCP_LISTEN
  l.local_addr = addr;
  l.local_port = port;
  l.uid = uid;
  return l;
}

TEST(RelayRegistry, APortIsRegisteredOnlyWithTheRegistrantsListenerAtTheAgentsAddress) {
  const uint32_t a = 0x0a000001, b = 0x0a000005, elsewhere = 0x7f000001;
  std::string why;
  EXPECT_EQ(check_listener({}, 40000, 1000, {a, b}, &why), ListenerCheck::kNone);
  EXPECT_NE(why.find("no TCP listener on port 40000"), std::string::npos) << why;
  EXPECT_EQ(check_listener({listener(a, 40000, 1000)}, 40000, 1000, {a, b}, &why),
            ListenerCheck::kOk);
  EXPECT_EQ(check_listener({listener(0, 40000, 1000)}, 40000, 1000, {a, b}, &why),
            ListenerCheck::kOk);  // 0.0.0.0 reaches every address
  // Another port's listener, or one at an address the agent never connects to: not there.
  EXPECT_EQ(check_listener({listener(a, 40001, 1000)}, 40000, 1000, {a, b}, &why),
            ListenerCheck::kNone);
  EXPECT_EQ(check_listener({listener(elsewhere, 40000, 1000)}, 40000, 1000, {a, b}, &why),
            ListenerCheck::kElsewhere);
  EXPECT_NE(why.find("only at 127.0.0.1"), std::string::npos) << why;
  // Another user's listener: sshd's, root's, anyone's (root's registration is no exception).
  EXPECT_EQ(check_listener({listener(0, 22, 0)}, 22, 1000, {a, b}, &why),
            ListenerCheck::kOtherUser);
  EXPECT_NE(why.find("belongs to user 0, not to the registering user 1000"), std::string::npos)
      << why;
  EXPECT_EQ(check_listener({listener(a, 40000, 65534)}, 40000, 0, {a}, &why),
            ListenerCheck::kOtherUser);
  // Reached beside the registrant's (a SO_REUSEPORT group shares one user; never mixed): refused
  // there, and the other address of the agent decides.
  EXPECT_EQ(
      check_listener({listener(a, 40000, 1000), listener(0, 40000, 1001)}, 40000, 1000, {a}, &why),
      ListenerCheck::kOtherUser);
  EXPECT_EQ(check_listener({listener(a, 40000, 1001), listener(b, 40000, 1000)}, 40000, 1000,
                           {a, b}, &why),
            ListenerCheck::kOk);
}

// The Soft-RoCE dual VM's conformance suite: the peer process listens on the other port half
// (198.18.0.2) of the host whose agent runs in the test process (198.18.0.1), and every one of
// its registrations was refused with a WARN while only the agent's addresses counted.
TEST(RelayRegistry, AListenerMayBeAtAnyNonLoopbackAddressOfTheHost) {
  const uint32_t agent = 0xc6120001, half = 0xc6120002, other_cable = 0xc6120401;
  const uint32_t lo = 0x7f000001, agent_in_tests = 0x7f4d0001;
  const std::vector<uint32_t> addrs =
      registration_addresses({agent, agent_in_tests}, {lo, agent, half, other_cable});
  EXPECT_EQ(addrs, (std::vector<uint32_t>{agent, agent_in_tests, half, other_cable}));
  std::string why;
  EXPECT_EQ(check_listener({listener(half, 46733, 0)}, 46733, 0, addrs, &why), ListenerCheck::kOk)
      << why;
  EXPECT_EQ(check_listener({listener(lo, 46733, 0)}, 46733, 0, addrs, &why),
            ListenerCheck::kElsewhere);
  // Where the agent connects (the last hop) only that address counts.
  EXPECT_EQ(check_listener({listener(half, 46733, 0)}, 46733, 0, {agent}, &why),
            ListenerCheck::kElsewhere);
}

TEST(RelayReplayCache, RefusesAReplayWithinItsLifetimeAndStaysBounded) {
  ReplayCache c(4);
  std::array<uint8_t, kProofSize> a{}, b{};
  b[0] = 1;
  EXPECT_TRUE(c.insert(a, 0, 100));
  EXPECT_FALSE(c.insert(a, 50, 100));
  EXPECT_TRUE(c.insert(b, 50, 100));
  EXPECT_TRUE(c.insert(a, 101, 100));  // expired
  for (uint8_t i = 2; i < 20; ++i) {
    std::array<uint8_t, kProofSize> x{};
    x[0] = i;
    EXPECT_TRUE(c.insert(x, 110, 100));
  }
}

TEST(RelayReply, OnlyKnownCodesDecode) {
  uint8_t b[kRelayReplySize];
  for (auto c : {ReplyCode::kOk, ReplyCode::kNoRoute, ReplyCode::kHopLimit, ReplyCode::kBusy,
                 ReplyCode::kMalformed, ReplyCode::kConnectFailed, ReplyCode::kNoRdmaRelay,
                 ReplyCode::kNotRegistered, ReplyCode::kBadProof, ReplyCode::kNoRdmaOnCable}) {
    encode_relay_reply(c, b);
    ReplyCode back;
    ASSERT_TRUE(decode_relay_reply(b, &back));
    EXPECT_EQ(back, c);
    EXPECT_STRNE(relay_reply_text(c), "answered an unknown code");
  }
  for (int bad : {0, 11, 255}) {
    encode_relay_reply(ReplyCode::kOk, b);
    b[3] = static_cast<uint8_t>(bad);
    ReplyCode back;
    EXPECT_FALSE(decode_relay_reply(b, &back)) << int(bad);
  }
  const uint8_t hello_reply[4] = {'M', 'S', 'R', 1};  // the handshake's reply is not a relay reply
  ReplyCode back;
  EXPECT_FALSE(decode_relay_reply(hello_reply, &back));
}

}  // namespace
}  // namespace mesh::relay
