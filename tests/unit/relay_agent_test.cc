// SPDX-License-Identifier: Apache-2.0
// The relay agent over loopback: three agents of an emulated line (NCCL_MESH_EMULATE addresses,
// 127.77.x.y/30) discover each other, route, relay a socket to a "handshake port" two cables
// away with the bytes intact, and answer hostile or unroutable requests with the right status.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "relay/agent.h"
#include "topology/emulated_mesh.h"
#include "util/clock.h"

namespace mesh::relay {
namespace {

uint16_t test_port() {
  return static_cast<uint16_t>(21000 + getpid() % 20000);
}

AgentConfig config_for(size_t rank, size_t ranks) {
  topology::EmulatedMesh m{topology::EmulatedShape::kLine, ranks, rank};
  AgentConfig c;
  c.port = test_port();
  c.interfaces = topology::emulated_interfaces(m);
  c.bind_interface_addresses = true;
  c.connect_timeout_ms = 2000;
  return c;
}

UniqueFd connect_to(uint32_t from, uint32_t to, uint16_t port) {
  UniqueFd s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in la = make_sockaddr(from, 0), pa = make_sockaddr(to, port);
  EXPECT_EQ(bind(s.get(), reinterpret_cast<const sockaddr*>(&la), sizeof(la)), 0);
  EXPECT_EQ(::connect(s.get(), reinterpret_cast<const sockaddr*>(&pa), sizeof(pa)), 0)
      << errno_text(errno);
  timeval tv{5, 0};
  setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return s;
}

// The status word the relay answers (0 when it closed without one).
int read_status(int fd) {
  uint8_t r[kRelayReplySize];
  if (!recv_all(fd, r, sizeof(r))) return 0;
  ReplyCode code;
  return decode_relay_reply(r, &code) ? static_cast<int>(code) : -1;
}

class RelayAgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (size_t r = 0; r < 3; ++r) {
      std::string why;
      ASSERT_TRUE(agents[r].start(config_for(r, 3), &why)) << why;
    }
    for (auto& a : agents) {
      if (!a.is_agent()) GTEST_SKIP() << "relay port " << test_port() << " is taken on loopback";
    }
  }
  // Waits until agent 0 has a route to agent 2 (the beacons converged).
  bool converge(FirstHop* hop) {
    const auto dest = topology::emulated_addresses({topology::EmulatedShape::kLine, 3, 2});
    std::string why;
    for (int i = 0; i < 100; ++i) {
      if (agents[0].first_hop(dest, 0, hop, &why) == HopStatus::kOk) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "no route after 10 s: " << why;
    return false;
  }
  Agent agents[3];
};

TEST_F(RelayAgentTest, RoutesThroughTheMiddleAndRelaysBytesIntact) {
  // line:3 cables: 0 = 127.77.0.1 (rank 0) - 127.77.0.2 (rank 1), 1 = 127.77.0.5 (1) - .6 (2).
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  EXPECT_EQ(hop.local.addr, *parse_ipv4("127.77.0.1"));
  EXPECT_EQ(hop.peer_addr, *parse_ipv4("127.77.0.2"));
  EXPECT_EQ(hop.port, test_port());
  // A "handshake port" on rank 2's address.
  UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in la = make_sockaddr(*parse_ipv4("127.77.0.6"), 0);
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&la), sizeof(la)), 0);
  ASSERT_EQ(listen(listener.get(), 4), 0);
  socklen_t len = sizeof(la);
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&la), &len);
  RelayRequest req;
  req.port = ntohs(la.sin_port);
  req.dest = {{*parse_ipv4("127.77.0.6"), 30}};
  uint8_t b[kRequestSize];
  encode_request(req, b);
  UniqueFd c = connect_to(hop.local.addr, hop.peer_addr, hop.port);
  ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
  EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kOk));
  UniqueFd server(accept(listener.get(), nullptr, nullptr));
  ASSERT_TRUE(server.valid());
  std::vector<uint8_t> data(4 << 20);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  std::thread writer([&] { EXPECT_TRUE(send_all(c.get(), data.data(), data.size())); });
  std::vector<uint8_t> got(data.size());
  ASSERT_TRUE(recv_all(server.get(), got.data(), got.size()));
  writer.join();
  EXPECT_TRUE(got == data);
  ASSERT_TRUE(send_all(server.get(), "pong", 4));
  char back[4];
  ASSERT_TRUE(recv_all(c.get(), back, 4));
  EXPECT_EQ(std::string(back, 4), "pong");
  EXPECT_EQ(agents[1].pairs(), 1u);
  // Closing one end closes the other (EOF passed through).
  server.reset();
  uint8_t x;
  EXPECT_EQ(recv(c.get(), &x, 1, 0), 0);
}

TEST_F(RelayAgentTest, HostileAndUnroutableRequestsGetTheirStatus) {
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  const uint32_t me = *parse_ipv4("127.77.0.1"), relay = *parse_ipv4("127.77.0.2");
  {  // garbage
    UniqueFd c = connect_to(me, relay, test_port());
    uint8_t junk[kRequestSize];
    std::memset(junk, 0x5a, sizeof(junk));
    ASSERT_TRUE(send_all(c.get(), junk, sizeof(junk)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kMalformed));
  }
  {  // a valid request for an address no agent announces
    RelayRequest req;
    req.port = 9;
    req.dest = {{*parse_ipv4("127.77.9.9"), 30}};
    uint8_t b[kRequestSize];
    encode_request(req, b);
    UniqueFd c = connect_to(me, relay, test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kNoRoute));
  }
  {  // hop limit 0 at a relay that is not next to the destination (agent 0 -> agent 2)
    RelayRequest req;
    req.port = 9;
    req.hop_limit = 0;
    req.dest = {{*parse_ipv4("127.77.0.6"), 30}};
    uint8_t b[kRequestSize];
    encode_request(req, b);
    UniqueFd c = connect_to(*parse_ipv4("127.77.0.2"), *parse_ipv4("127.77.0.1"), test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kHopLimit));
  }
  {  // the last hop cannot connect to the destination's port
    RelayRequest req;
    req.port = 1;  // nothing listens on port 1 of 127.77.0.6
    req.dest = {{*parse_ipv4("127.77.0.6"), 30}};
    uint8_t b[kRequestSize];
    encode_request(req, b);
    UniqueFd c = connect_to(me, relay, test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kConnectFailed));
  }
  EXPECT_EQ(agents[1].pairs(), 0u);
}

// A request with the RDMA flag is never spliced: the agent next to the destination connects to
// it and hands both sockets to the RDMA forwarder hook (which answers the connector itself);
// without a hook, or at an agent that is not next to the destination, it is refused.
TEST_F(RelayAgentTest, RdmaRequestsGoToTheForwarderOrAreRefused) {
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  EXPECT_EQ(hop.cables, 2u);
  EXPECT_FALSE(hop.via_local_agent);
  UniqueFd listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in la = make_sockaddr(*parse_ipv4("127.77.0.6"), 0);
  ASSERT_EQ(bind(listener.get(), reinterpret_cast<sockaddr*>(&la), sizeof(la)), 0);
  ASSERT_EQ(listen(listener.get(), 4), 0);
  socklen_t len = sizeof(la);
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&la), &len);
  RelayRequest req;
  req.port = ntohs(la.sin_port);
  req.rdma = true;
  req.dest = {{*parse_ipv4("127.77.0.6"), 30}};
  uint8_t b[kRequestSize];
  encode_request(req, b);
  const uint32_t me = *parse_ipv4("127.77.0.1"), relay = *parse_ipv4("127.77.0.2");
  {  // agent 1 is next to the destination but has no forwarder (no RDMA)
    UniqueFd c = connect_to(me, relay, test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kNoRdmaRelay));
  }
  {  // agent 0 has no cable to the destination: RDMA relay crosses one relay host only
    UniqueFd c = connect_to(relay, me, test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kNoRdmaRelay));
  }
  // Agent 1 again, with a forwarder hook: the first call takes the sockets, the second refuses.
  agents[1].stop();
  std::vector<RdmaHandoff> taken;  // written by the agent's thread before `calls` becomes 1
  std::atomic<int> calls{0};
  AgentConfig cfg = config_for(1, 3);
  cfg.rdma_forward = [&](RdmaHandoff& h, std::string* why) {
    if (calls.load() >= 1) {
      ++calls;
      *why = "test: full";
      return false;
    }
    taken.push_back(std::move(h));
    calls.store(1);
    return true;
  };
  std::string why;
  ASSERT_TRUE(agents[1].start(cfg, &why)) << why;
  {
    UniqueFd c = connect_to(me, relay, test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    UniqueFd server(accept(listener.get(), nullptr, nullptr));
    ASSERT_TRUE(server.valid());
    for (int i = 0; i < 100 && calls == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_EQ(taken.size(), 1u);
    RdmaHandoff& h = taken[0];
    EXPECT_EQ(h.down_local, *parse_ipv4("127.77.0.5"));
    EXPECT_EQ(h.down_peer, *parse_ipv4("127.77.0.6"));
    EXPECT_NE(h.what.find("127.77.0.6"), std::string::npos) << h.what;
    // Nothing was answered or spliced: the forwarder owns both ends.
    pollfd p{c.get(), POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 200), 0);
    ASSERT_TRUE(send_all(h.up.get(), "up", 2));
    char got[2];
    ASSERT_TRUE(recv_all(c.get(), got, 2));
    ASSERT_TRUE(send_all(h.down.get(), "dn", 2));
    ASSERT_TRUE(recv_all(server.get(), got, 2));
    EXPECT_EQ(std::string(got, 2), "dn");
    EXPECT_EQ(agents[1].pairs(), 0u);
  }
  {  // the hook refuses: "busy", the connector retries later
    UniqueFd c = connect_to(me, relay, test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kBusy));
  }
  agents[1].stop();  // before `taken` and `calls` go out of scope
}

TEST_F(RelayAgentTest, ADisconnectedDestinationFailsNamingIt) {
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  agents[1].stop();  // the middle host goes: after expiry, 2 is unreachable from 0
  const auto dest = topology::emulated_addresses({topology::EmulatedShape::kLine, 3, 2});
  std::string why;
  // Within the expiry (3 s) the route goes; once the agent has run past its convergence grace
  // (6 s) the answer is a failure instead of "wait".
  HopStatus st = HopStatus::kOk;
  for (int i = 0; i < 100 && st != HopStatus::kFail; ++i) {
    st = agents[0].first_hop(dest, 0, &hop, &why);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(st, HopStatus::kFail) << why;
  EXPECT_NE(why.find("127.77.0.6"), std::string::npos) << why;
  // A connect that has only just begun waits instead (its peer may have just started).
  EXPECT_EQ(agents[0].first_hop(dest, 0, &hop, &why, monotonic_ms()), HopStatus::kWait);
}

TEST(RelayAgentElection, OneAgentPerHostTheOthersStandByAndTakeOver) {
  // Not emulated: both bind 0.0.0.0 on the same port, as two plugin processes of one host do.
  AgentConfig c = config_for(0, 2);
  c.bind_interface_addresses = false;
  c.port = static_cast<uint16_t>(test_port() + 1);
  Agent first, second;
  std::string why;
  ASSERT_TRUE(first.start(c, &why)) << why;
  if (!first.is_agent()) GTEST_SKIP() << "port " << c.port << " is taken on this machine";
  ASSERT_TRUE(second.start(c, &why)) << why;
  EXPECT_FALSE(second.is_agent());
  // The standby hands relayed sockets to this host's agent.
  FirstHop hop;
  EXPECT_EQ(second.first_hop({{*parse_ipv4("127.77.0.6"), 30}}, 1, &hop, &why), HopStatus::kOk);
  EXPECT_EQ(hop.peer_addr, c.interfaces[0].addr.addr);
  EXPECT_EQ(hop.port, c.port);
  // The agent goes; the standby binds within its retry period.
  first.stop();
  for (int i = 0; i < 30 && !second.is_agent(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(second.is_agent());
}

}  // namespace
}  // namespace mesh::relay
