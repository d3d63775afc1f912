// SPDX-License-Identifier: Apache-2.0
// The relay agent over loopback: three agents of an emulated line (NCCL_MESH_EMULATE addresses,
// 127.77.x.y/30) discover each other, route, relay a socket to a "handshake port" two cables
// away with the bytes intact, and answer hostile or unroutable requests with the right status.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "relay/agent.h"
#include "relay/registrar.h"
#include "relay/sock_diag.h"
#include "topology/emulated_mesh.h"
#include "util/clock.h"
#include "warn_capture.h"

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
  c.route_wait_ms = 4000;  // the connect timeout: a missing route fails only then
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

const uint8_t kNonce[16] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6};

// A request for `port` on rank 2 (127.77.0.6) proved with kNonce's key.
void encode_for(RelayRequest req, uint8_t* b, const uint8_t* nonce = kNonce) {
  req.tag = relay_listener_tag(nonce, 16);
  encode_request(req, relay_listener_key(nonce, 16), b);
}

// An RDMA relay request for `port` on rank 2 (127.77.0.6).
RelayRequest rdma_request_for(uint16_t port) {
  RelayRequest req;
  req.port = port;
  req.rdma = true;
  req.dest = {{*parse_ipv4("127.77.0.6"), 30}};
  return req;
}

// A TCP listener on `addr` (an ephemeral port) standing in for a handshake port.
UniqueFd listen_on(uint32_t addr, uint16_t* port) {
  UniqueFd l(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in la = make_sockaddr(addr, 0);
  EXPECT_EQ(bind(l.get(), reinterpret_cast<sockaddr*>(&la), sizeof(la)), 0);
  EXPECT_EQ(listen(l.get(), 4), 0);
  socklen_t len = sizeof(la);
  getsockname(l.get(), reinterpret_cast<sockaddr*>(&la), &len);
  *port = ntohs(la.sin_port);
  return l;
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
  // Registers a listener with rank `rank`'s agent, as a plugin process's handshake service does.
  void register_listener(size_t rank, uint16_t port, const uint8_t* nonce = kNonce) {
    registrar.configure(agent_socket_name(config_for(rank, 3)));
    registrar.add(port, nonce, 16);
    ASSERT_TRUE(registrar.connected());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the agent reads it
  }
  Agent agents[3];
  Registrar registrar;
};

TEST_F(RelayAgentTest, RoutesThroughTheMiddleAndRelaysBytesIntact) {
  // line:3 cables: 0 = 127.77.0.1 (rank 0) - 127.77.0.2 (rank 1), 1 = 127.77.0.5 (1) - .6 (2).
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  EXPECT_EQ(hop.local.addr, *parse_ipv4("127.77.0.1"));
  EXPECT_EQ(hop.peer_addr, *parse_ipv4("127.77.0.2"));
  EXPECT_EQ(hop.port, test_port());
  // A "handshake port" on rank 2's address, registered with rank 2's agent.
  uint16_t port = 0;
  UniqueFd listener = listen_on(*parse_ipv4("127.77.0.6"), &port);
  register_listener(2, port);
  RelayRequest req;
  req.port = port;
  req.dest = {{*parse_ipv4("127.77.0.6"), 30}};
  uint8_t b[kRequestSize];
  encode_for(req, b);
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
  EXPECT_EQ(agents[2].pairs(), 1u);  // the destination host's agent: the last hop
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
    encode_for(req, b);
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
    encode_for(req, b);
    UniqueFd c = connect_to(*parse_ipv4("127.77.0.2"), *parse_ipv4("127.77.0.1"), test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kHopLimit));
  }
  {  // the last hop cannot connect to the destination's registered listener: its backlog is full
    // (a port nobody listens on cannot be registered: RelayAgentRegistration below)
    const uint32_t dest = *parse_ipv4("127.77.0.6");
    uint16_t port = 0;
    UniqueFd full = listen_on(dest, &port);
    ASSERT_EQ(listen(full.get(), 0), 0);
    register_listener(2, port);
    std::vector<UniqueFd> fillers;  // the SYNs beyond the accept queue are dropped
    for (int i = 0; i < 3; ++i) {
      UniqueFd f(socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
      const sockaddr_in pa = make_sockaddr(dest, port);
      (void)!::connect(f.get(), reinterpret_cast<const sockaddr*>(&pa), sizeof(pa));
      fillers.push_back(std::move(f));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    RelayRequest req;
    req.port = port;
    req.dest = {{dest, 30}};
    uint8_t b[kRequestSize];
    encode_for(req, b);
    UniqueFd c = connect_to(me, relay, test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kConnectFailed));
  }
  // The middle agent spliced that last request to the destination's agent (whose refusal came
  // back through it); the splice closes once the refusal's EOF arrives.
  for (int i = 0; i < 50 && agents[1].pairs() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(agents[1].pairs(), 0u);
}

// A request with the RDMA flag is never spliced: the agent next to the destination connects to
// it and hands both sockets to the RDMA forwarder hook (which answers the connector itself);
// without a hook it is refused (a middle hop too: RelayAgentChain below).
TEST_F(RelayAgentTest, RdmaRequestsGoToTheForwarderOrAreRefused) {
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  EXPECT_EQ(hop.cables, 2u);
  EXPECT_FALSE(hop.via_local_agent);
  uint16_t port = 0;
  UniqueFd listener = listen_on(*parse_ipv4("127.77.0.6"), &port);
  register_listener(2, port);
  RelayRequest req = rdma_request_for(port);
  uint8_t b[kRequestSize];
  encode_for(req, b);
  const uint32_t me = *parse_ipv4("127.77.0.1"), relay = *parse_ipv4("127.77.0.2");
  {  // agent 1 is next to the destination but has no forwarder (no RDMA)
    UniqueFd c = connect_to(me, relay, test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kNoRdmaRelay));
  }
  {  // agent 0 (a middle hop for this request) has no forwarder (no RDMA): it cannot chain
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
    encode_for(req, b);  // a fresh request (the destination's agent refuses replays)
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
    encode_for(req, b);
    UniqueFd c = connect_to(me, relay, test_port());
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kBusy));
  }
  agents[1].stop();  // before `taken` and `calls` go out of scope
}

// Issue 26 item 5: RDMA on the connector's cable to the relay host is not enough, the relay
// host writes to the destination over its own cable; without a usable RDMA port there it says
// so (kNoRdmaOnCable) before connecting anywhere, and the forwarder never sees the request.
TEST_F(RelayAgentTest, RdmaRequestsAreRefusedWhenTheCableToTheDestinationHasNoRdma) {
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  uint16_t port = 0;
  UniqueFd listener = listen_on(*parse_ipv4("127.77.0.6"), &port);
  register_listener(2, port);
  agents[1].stop();
  std::atomic<int> calls{0};
  std::atomic<int> asked{0};
  std::atomic<uint32_t> asked_addr{0};
  AgentConfig cfg = config_for(1, 3);
  cfg.rdma_forward = [&](RdmaHandoff&, std::string* why) {
    ++calls;
    *why = "test: must not be called";
    return false;
  };
  // Agent 1's cable to agent 0 (127.77.0.2) has RDMA, its cable to the destination does not.
  cfg.rdma_usable_at = [&](uint32_t local) {
    asked_addr = local;
    ++asked;
    return local == *parse_ipv4("127.77.0.2");
  };
  std::string why;
  ASSERT_TRUE(agents[1].start(cfg, &why)) << why;
  RelayRequest req = rdma_request_for(port);
  uint8_t b[kRequestSize];
  encode_for(req, b);
  UniqueFd c = connect_to(*parse_ipv4("127.77.0.1"), *parse_ipv4("127.77.0.2"), test_port());
  ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
  EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kNoRdmaOnCable));
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(asked.load(), 1);
  EXPECT_EQ(asked_addr.load(), *parse_ipv4("127.77.0.5"));  // the cable to the destination
  // Nothing reached the destination's listener.
  pollfd p{listener.get(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 200), 0);
  agents[1].stop();  // before `calls` and `asked` go out of scope
}

// Chained RDMA relay (issue 26 item 2) on a line of four agents 0-1-2-3 (127.77.0.1-.2,
// .5-.6, .9-.10): a connector on 0's address asks agent 1 for rank 3; agent 1 is a middle hop
// and asks agent 2, which is next to the destination. Both relay agents have forwarder hooks
// that stand in for RelayForwarder: agent 2's answers "ok" upstream as a forwarder does once
// set up (or stays silent, or vanishes), agent 1's only records what it was handed.
class RelayAgentChain : public ::testing::Test {
 protected:
  enum class Next { kAnswerOk, kSilent, kVanish };
  static AgentConfig line4(size_t rank) { return config_for(rank, 4); }
  void SetUp() override {
    for (size_t r = 0; r < 4; ++r) {
      AgentConfig c = line4(r);
      if (r == 1 || r == 2) {
        c.rdma_forward = [this, r](RdmaHandoff& h, std::string*) {
          std::lock_guard<std::mutex> lock(mu_);
          if (r == 2 && next_ == Next::kVanish) {
            RdmaHandoff gone = std::move(h);  // closed on return: the next hop died
            ++calls_[r];
            return true;
          }
          if (r == 2 && next_ == Next::kAnswerOk) {
            uint8_t ok[kRelayReplySize];
            encode_relay_reply(ReplyCode::kOk, ok);
            EXPECT_TRUE(send_all(h.up.get(), ok, sizeof(ok)));
          }
          taken_[r].push_back(std::move(h));
          ++calls_[r];
          return true;
        };
        c.rdma_usable_at = [this](uint32_t local) { return local != no_rdma_at_.load(); };
      }
      std::string why;
      ASSERT_TRUE(agents_[r].start(c, &why)) << why;
      if (!agents_[r].is_agent()) GTEST_SKIP() << "relay port " << test_port() << " is taken";
    }
    // Agent 1 knows its way to rank 3 (the beacons crossed the line).
    const auto dest = topology::emulated_addresses({topology::EmulatedShape::kLine, 4, 3});
    std::string why;
    FirstHop hop;
    bool ok = false;
    for (int i = 0; i < 100 && !ok; ++i) {
      ok = agents_[0].first_hop(dest, 0, &hop, &why) == HopStatus::kOk &&
           agents_[1].first_hop(dest, 0, &hop, &why) == HopStatus::kOk;
      if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_TRUE(ok) << "no route after 10 s: " << why;
    ASSERT_EQ(hop.cables, 2u);  // from agent 1
    listener_ = listen_on(*parse_ipv4("127.77.0.10"), &port_);
    registrar_.configure(agent_socket_name(line4(3)));
    registrar_.add(port_, kNonce, 16);
    ASSERT_TRUE(registrar_.connected());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  void TearDown() override {
    for (auto& a : agents_) a.stop();  // before the hooks' state goes
  }
  // A fresh RDMA request for rank 3's listener, sent from 0's address to agent 1; its status.
  int ask(uint8_t hop_limit = kDefaultHopLimit, const uint8_t* nonce = kNonce) {
    RelayRequest req;
    req.port = port_;
    req.rdma = true;
    req.hop_limit = hop_limit;
    req.dest = {{*parse_ipv4("127.77.0.10"), 30}};
    uint8_t b[kRequestSize];
    encode_for(req, b, nonce);
    conn_ = connect_to(*parse_ipv4("127.77.0.1"), *parse_ipv4("127.77.0.2"), test_port());
    EXPECT_TRUE(send_all(conn_.get(), b, sizeof(b)));
    return read_status(conn_.get());
  }
  int calls(size_t r) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[r];
  }
  Agent agents_[4];
  Registrar registrar_;
  UniqueFd listener_, conn_;
  uint16_t port_ = 0;
  std::mutex mu_;
  Next next_ = Next::kAnswerOk;          // guarded by mu_
  std::vector<RdmaHandoff> taken_[4];    // guarded by mu_
  int calls_[4] = {};                    // guarded by mu_
  std::atomic<uint32_t> no_rdma_at_{0};  // a local address without a usable RDMA port
};

TEST_F(RelayAgentChain, AMiddleHopHandsItsForwarderASocketToTheNextRelay) {
  RelayRequest req;
  req.port = port_;
  req.rdma = true;
  req.dest = {{*parse_ipv4("127.77.0.10"), 30}};
  uint8_t b[kRequestSize];
  encode_for(req, b);
  conn_ = connect_to(*parse_ipv4("127.77.0.1"), *parse_ipv4("127.77.0.2"), test_port());
  ASSERT_TRUE(send_all(conn_.get(), b, sizeof(b)));
  for (int i = 0; i < 150 && calls(1) == 0; ++i) {
    pollfd p{conn_.get(), POLLIN, 0};
    if (poll(&p, 1, 20) > 0) break;  // an answer to the connector: the old code refused here
  }
  // The middle hop answered nothing itself (its forwarder does): no status on the socket.
  pollfd p{conn_.get(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 100), 0) << "agent 1 answered the connector itself: status "
                                 << read_status(conn_.get());
  ASSERT_EQ(calls(1), 1);
  ASSERT_EQ(calls(2), 1);
  // Rank 3's agent admitted the request (registration, proof) and connected the listener.
  pollfd l{listener_.get(), POLLIN, 0};
  ASSERT_EQ(poll(&l, 1, 1000), 1);
  UniqueFd server(accept(listener_.get(), nullptr, nullptr));
  ASSERT_TRUE(server.valid());
  std::lock_guard<std::mutex> lock(mu_);
  RdmaHandoff& middle = taken_[1][0];
  RdmaHandoff& last = taken_[2][0];
  EXPECT_TRUE(middle.down_relay);
  EXPECT_EQ(middle.down_local, *parse_ipv4("127.77.0.5"));
  EXPECT_EQ(middle.down_peer, *parse_ipv4("127.77.0.6"));
  EXPECT_NE(middle.what.find("next relay"), std::string::npos) << middle.what;
  EXPECT_FALSE(last.down_relay);
  EXPECT_EQ(last.down_local, *parse_ipv4("127.77.0.9"));
  EXPECT_EQ(last.down_peer, *parse_ipv4("127.77.0.10"));
  // The sockets join up: connector <-> middle.up, middle.down <-> last.up, last.down <-> listener.
  char got[2];
  ASSERT_TRUE(send_all(middle.up.get(), "up", 2));
  ASSERT_TRUE(recv_all(conn_.get(), got, 2));
  EXPECT_EQ(std::string(got, 2), "up");
  ASSERT_TRUE(send_all(middle.down.get(), "md", 2));
  ASSERT_TRUE(recv_all(last.up.get(), got, 2));
  EXPECT_EQ(std::string(got, 2), "md");
  ASSERT_TRUE(send_all(last.down.get(), "ld", 2));
  ASSERT_TRUE(recv_all(server.get(), got, 2));
  EXPECT_EQ(std::string(got, 2), "ld");
  EXPECT_EQ(agents_[1].pairs(), 0u);  // nothing spliced: the forwarders own every socket
  EXPECT_EQ(agents_[2].pairs(), 0u);
}

// Every refusal along the chain reaches the connector unchanged, and no forwarder upstream of
// it is handed anything; the agent never becomes an open proxy (the destination's agent still
// checks registration and proof; the hop limit still ends a request).
TEST_F(RelayAgentChain, RefusalsAlongTheChainComeBackUnchanged) {
  // The last relay host's cable to the destination has no usable RDMA port (item 5).
  no_rdma_at_ = *parse_ipv4("127.77.0.9");
  EXPECT_EQ(ask(), static_cast<int>(ReplyCode::kNoRdmaOnCable));
  // The middle hop's own next cable has none: refused there, before asking agent 2.
  no_rdma_at_ = *parse_ipv4("127.77.0.5");
  EXPECT_EQ(ask(), static_cast<int>(ReplyCode::kNoRdmaOnCable));
  no_rdma_at_ = 0;
  // The destination's agent refuses a request made without the listener's handle (its tag
  // names no registered listener).
  const uint8_t wrong[16] = {1};
  EXPECT_EQ(ask(kDefaultHopLimit, wrong), static_cast<int>(ReplyCode::kNotRegistered));
  // Hop limit 1: agent 1 forwards it with 0, agent 2 is not the last hop.
  EXPECT_EQ(ask(1), static_cast<int>(ReplyCode::kHopLimit));
  EXPECT_EQ(calls(1), 0);
  EXPECT_EQ(calls(2), 0);
  pollfd p{listener_.get(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 100), 0);  // nothing reached the listener
}

// The next relay host's forwarder takes the request and never answers (its process hangs), or
// takes it and dies: the middle hop answers the connector "onward connect failed" (within its
// connect timeout, 2 s here) and hands its own forwarder nothing.
TEST_F(RelayAgentChain, ASilentOrVanishedNextRelayFailsTheRequest) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_ = Next::kSilent;
  }
  const int64_t t0 = monotonic_ms();
  EXPECT_EQ(ask(), static_cast<int>(ReplyCode::kConnectFailed));
  EXPECT_LT(monotonic_ms() - t0, 4500);
  EXPECT_EQ(calls(2), 1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_ = Next::kVanish;
  }
  const int64_t t1 = monotonic_ms();
  EXPECT_EQ(ask(), static_cast<int>(ReplyCode::kConnectFailed));
  EXPECT_LT(monotonic_ms() - t1, 1500);
  EXPECT_EQ(calls(2), 2);
  EXPECT_EQ(calls(1), 0);
}

// The open-proxy fix (docs/relay.md, threat model): the destination host's agent connects only
// to a listener registered by a plugin process of its host, for a request that proves it holds
// that listener's handle, once; a service that is not a plugin listener is never reached.
TEST_F(RelayAgentTest, OnlyRegisteredListenersWithAProofOfTheirHandleAreReached) {
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  const uint32_t me = *parse_ipv4("127.77.0.1"), relay = *parse_ipv4("127.77.0.2");
  const uint32_t dest = *parse_ipv4("127.77.0.6");
  // A service that is not an nccl-mesh listener: it greets every connection with a banner.
  uint16_t banner_port = 0;
  UniqueFd banner = listen_on(dest, &banner_port);
  std::atomic<int> greeted{0};
  std::atomic<bool> done{false};
  std::thread greeter([&] {
    while (!done) {
      pollfd p{banner.get(), POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      UniqueFd s(accept(banner.get(), nullptr, nullptr));
      if (s.valid() && send_all(s.get(), "SSH-2.0-banner\r\n", 16)) ++greeted;
    }
  });
  auto ask = [&](const uint8_t* b, std::string* extra) {
    UniqueFd c = connect_to(me, relay, test_port());
    EXPECT_TRUE(send_all(c.get(), b, kRequestSize));
    const int status = read_status(c.get());
    char more[64];
    const ssize_t n = recv(c.get(), more, sizeof(more), 0);
    if (n > 0) extra->assign(more, static_cast<size_t>(n));
    return status;
  };
  RelayRequest req;
  req.dest = {{dest, 30}};
  uint8_t b[kRequestSize];
  std::string extra;
  {  // not a registered listener (any proof): refused, no banner
    req.port = banner_port;
    encode_for(req, b);
    EXPECT_EQ(ask(b, &extra), static_cast<int>(ReplyCode::kNotRegistered));
    EXPECT_EQ(extra, "");
  }
  uint16_t port = 0;
  UniqueFd listener = listen_on(dest, &port);
  register_listener(2, port);
  req.port = port;
  {  // the registered listener's tag, but a proof made without its handle
    const uint8_t wrong[16] = {};
    req.tag = relay_listener_tag(kNonce, 16);
    encode_request(req, relay_listener_key(wrong, 16), b);
    EXPECT_EQ(ask(b, &extra), static_cast<int>(ReplyCode::kBadProof));
  }
  {  // the registered listener's tag and key, for another port (the banner's)
    RelayRequest other = req;
    other.port = banner_port;
    encode_for(other, b);
    EXPECT_EQ(ask(b, &extra), static_cast<int>(ReplyCode::kNotRegistered));
    EXPECT_EQ(extra, "");
  }
  {  // stale: 10 minutes old
    RelayRequest old = req;
    old.time_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count()) -
                  600000;
    encode_for(old, b);
    EXPECT_EQ(ask(b, &extra), static_cast<int>(ReplyCode::kBadProof));
  }
  {  // the real thing is admitted once; the same bytes again are a replay
    encode_for(req, b);
    EXPECT_EQ(ask(b, &extra), static_cast<int>(ReplyCode::kOk));
    UniqueFd server(accept(listener.get(), nullptr, nullptr));
    EXPECT_TRUE(server.valid());
    EXPECT_EQ(ask(b, &extra), static_cast<int>(ReplyCode::kBadProof));
  }
  {  // once the listener's process unregisters (closeListen, or it exits), it is unreachable
    registrar.remove(port, kNonce, 16);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    encode_for(req, b);
    EXPECT_EQ(ask(b, &extra), static_cast<int>(ReplyCode::kNotRegistered));
  }
  done = true;
  greeter.join();
  EXPECT_EQ(greeted.load(), 0) << "the banner service was reached through the relay";
}

// Review finding: the agent next to the destination spliced before the destination's agent
// answered, so a request that agent refused ("not registered") left a pair (6 descriptors) at
// the relay until the connector closed its socket: 166 such requests held the pair cap for as
// long as the peer liked. The relay now reads the answer first and closes both sockets on a
// refusal, which it passes back unchanged.
TEST_F(RelayAgentTest, RequestsRefusedDownstreamLeaveNoPair) {
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  RelayRequest req;
  req.port = 1234;  // registered nowhere
  req.dest = {{*parse_ipv4("127.77.0.6"), 30}};
  std::vector<UniqueFd> held;  // the connectors keep their sockets open
  for (int i = 0; i < 8; ++i) {
    uint8_t b[kRequestSize];
    encode_for(req, b);
    UniqueFd c = connect_to(hop.local.addr, hop.peer_addr, hop.port);
    ASSERT_TRUE(send_all(c.get(), b, sizeof(b)));
    EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kNotRegistered));
    held.push_back(std::move(c));
  }
  size_t pairs = agents[1].pairs();
  for (int i = 0; i < 100 && pairs != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    pairs = agents[1].pairs();
  }
  EXPECT_EQ(pairs, 0u) << "refused requests hold pairs at the relay";
  // The relay closed the refused connectors' sockets: EOF after the status.
  for (auto& c : held) {
    uint8_t x;
    EXPECT_EQ(recv(c.get(), &x, 1, 0), 0);
  }
  EXPECT_EQ(agents[2].pairs(), 0u);
}

// A plugin process that is not its host's agent (a standby; every process when
// nccl-mesh-relayd runs) asks the agent for the route over the local socket, so RDMA relay can
// open its QPs on the first cable (review 1 finding 2a).
TEST_F(RelayAgentTest, AStandbyLearnsTheRouteFromItsHostsAgent) {
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  Agent standby;
  const AgentConfig c = config_for(0, 3);
  std::string why;
  ASSERT_TRUE(standby.start(c, &why)) << why;
  EXPECT_FALSE(standby.is_agent());  // agents[0] holds rank 0's addresses
  Registrar local;
  local.configure(agent_socket_name(c));
  standby.set_local_client(&local);
  const auto dest = topology::emulated_addresses({topology::EmulatedShape::kLine, 3, 2});
  FirstHop got;
  HopStatus st = HopStatus::kWait;
  for (int i = 0; i < 100 && st == HopStatus::kWait; ++i) {
    st = standby.route_for_rdma(dest, 0, &got, &why, monotonic_ms());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    local.tick(monotonic_ms());
  }
  ASSERT_EQ(st, HopStatus::kOk) << why;
  EXPECT_FALSE(got.via_local_agent);
  EXPECT_EQ(got.cables, 2u);
  EXPECT_EQ(got.local.addr, *parse_ipv4("127.77.0.1"));
  EXPECT_EQ(got.peer_addr, *parse_ipv4("127.77.0.2"));
  EXPECT_EQ(got.port, test_port());
  // An unknown destination: the agent's answer (wait, then the failure at the deadline).
  st = standby.route_for_rdma({{*parse_ipv4("127.77.9.9"), 30}}, 0, &got, &why, monotonic_ms());
  EXPECT_EQ(st, HopStatus::kWait);
  standby.stop();
}

TEST_F(RelayAgentTest, ADisconnectedDestinationFailsNamingIt) {
  FirstHop hop;
  ASSERT_TRUE(converge(&hop));
  agents[1].stop();  // the middle host goes: after expiry, 2 is unreachable from 0
  const auto dest = topology::emulated_addresses({topology::EmulatedShape::kLine, 3, 2});
  std::string why;
  // Within the expiry (3 s) the route goes; once the agent has run past the connect timeout
  // (route_wait_ms, 4 s here) the answer is a failure instead of "wait".
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

// Review finding (HIGH): requests were keyed by their upstream descriptor's number. In one batch
// of events, request A ends (its connector resets: both of A's sockets close), the relay port's
// listener then accepts B, which gets A's number and replaced (freed) A, and the batch's next
// event, A's onward socket answering, read the freed request. The agent's thread is held here
// while the three events arrive in that order, so the batch is the same on every run; ASan
// reports the use after free on the old code (a release build may read the freed bytes quietly).
TEST(RelayAgentBatch, ARequestEndedInABatchSurvivesAConnectionThatReusesItsDescriptor) {
  std::atomic<bool> hold{false}, parked{false};
  AgentConfig config = config_for(0, 2);  // 127.77.0.1/30; its neighbour is 127.77.0.2
  config.port = static_cast<uint16_t>(test_port() + 2);  // not the fixture's nor the election's
  // RDMA requests wait for the next agent's answer on the onward socket: that answer is an
  // event this test can send at the moment of its choosing.
  config.rdma_forward = [](RdmaHandoff&, std::string* why) {
    *why = "not in this test";
    return false;
  };
  config.before_wait = [&] {
    while (hold.load()) {
      parked = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    parked = false;
  };
  Agent agent;
  std::string why;
  ASSERT_TRUE(agent.start(config, &why)) << why;
  if (!agent.is_agent()) GTEST_SKIP() << "relay port " << config.port << " is taken on loopback";
  const uint32_t me = *parse_ipv4("127.77.0.1"), next = *parse_ipv4("127.77.0.2");
  // The next host's agent, played by this test.
  UniqueFd next_agent(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const sockaddr_in na = make_sockaddr(next, config.port);
  const int one = 1;  // over TIME_WAIT leftovers of earlier tests; a second listener still fails
  setsockopt(next_agent.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(next_agent.get(), reinterpret_cast<const sockaddr*>(&na), sizeof(na)) != 0)
    GTEST_SKIP() << "port " << config.port << " is taken on 127.77.0.2";
  ASSERT_EQ(listen(next_agent.get(), 4), 0);

  // A: an RDMA request for the neighbour; the agent connects onward and sends it on.
  RelayRequest req = rdma_request_for(1234);
  req.dest = {{next, 30}};
  uint8_t b[kRequestSize];
  encode_for(req, b);
  UniqueFd a = connect_to(next, me, config.port);
  ASSERT_TRUE(send_all(a.get(), b, sizeof(b)));
  pollfd pfd{next_agent.get(), POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 5000), 1) << "the agent did not connect onward";
  UniqueFd onward(accept(next_agent.get(), nullptr, nullptr));
  ASSERT_TRUE(onward.valid());
  timeval tv{5, 0};
  setsockopt(onward.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  uint8_t forwarded[kRequestSize];
  ASSERT_TRUE(recv_all(onward.get(), forwarded, sizeof(forwarded)));  // A awaits the answer now

  hold = true;
  for (int i = 0; i < 2000 && !parked.load(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(parked.load()) << "the agent's thread did not come round to epoll_wait";
  // 1. A's connector resets: the agent closes both of A's sockets on this event.
  const linger reset{1, 0};
  setsockopt(a.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
  a.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // 2. B connects: accepted on the lowest free descriptor, A's upstream one.
  UniqueFd c = connect_to(next, me, config.port);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // 3. The next agent answers A: an event for A's onward socket, after B's in the batch.
  uint8_t ok[kRelayReplySize];
  encode_relay_reply(ReplyCode::kOk, ok);
  ASSERT_TRUE(send_all(onward.get(), ok, sizeof(ok)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  hold = false;

  // B is served as any request is (garbage: "malformed").
  uint8_t junk[kRequestSize];
  std::memset(junk, 0x5a, sizeof(junk));
  ASSERT_TRUE(send_all(c.get(), junk, sizeof(junk)));
  EXPECT_EQ(read_status(c.get()), static_cast<int>(ReplyCode::kMalformed));
  // A was torn down (its onward socket closed, reset for the unread answer): nothing carried.
  uint8_t x;
  EXPECT_LE(recv(onward.get(), &x, 1, 0), 0);
  EXPECT_EQ(agent.pairs(), 0u);
  agent.stop();
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

namespace mesh::relay {
namespace {

// The cap must fit the process's own limit: a rank's process usually has a soft limit of 1024,
// and its NCCL sockets need descriptors too (the former floor of 512 pairs, 3072 descriptors,
// ran such a process out of them after 166 pairs).
TEST(RelayAgentCapacity, PairsFollowTheFdLimitWithinBounds) {
  bool below = true;
  // A default shell: half the limit left to the process, 512 descriptors for 85 pairs.
  EXPECT_EQ(pairs_for_fd_limit(1024, &below), 85u);
  EXPECT_FALSE(below);
  EXPECT_LE(pairs_for_fd_limit(1024) * 6, 1024u / 2);
  EXPECT_EQ(pairs_for_fd_limit(4096, &below), (4096u - 2048u) / 6u);
  EXPECT_FALSE(below);
  EXPECT_EQ(pairs_for_fd_limit(20000), (20000u - 10000u) / 6u);
  EXPECT_EQ(pairs_for_fd_limit(65536), 4096u);            // (65536 - 32768) / 6 = 5461, capped
  EXPECT_EQ(pairs_for_fd_limit(1048576, &below), 4096u);  // the service's unit
  EXPECT_FALSE(below);
  EXPECT_EQ(pairs_for_fd_limit(~0ull), 4096u);
  // Below 512 + 16 * 6 descriptors even the minimum does not fit: the agent WARNs at start.
  EXPECT_EQ(pairs_for_fd_limit(256, &below), kMinPairs);
  EXPECT_TRUE(below);
  EXPECT_EQ(pairs_for_fd_limit(600, &below), kMinPairs);
  EXPECT_TRUE(below);
  EXPECT_EQ(pairs_for_fd_limit(0, &below), kMinPairs);
  EXPECT_TRUE(below);
  // Never more pairs than the limit leaves beside the reserve, at any limit above the minimum.
  for (uint64_t soft = 512 + 6 * kMinPairs; soft < 70000; soft += 97) {
    EXPECT_LE(pairs_for_fd_limit(soft) * 6 + 512, soft) << soft;
  }
}

}  // namespace
}  // namespace mesh::relay

namespace mesh::relay {
namespace {

// The status word the relay answers within `ms` (-2: none yet, the request is still pending).
int status_within(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return -2;
  return read_status(fd);
}

// A connection the relay made to `listener` within `ms` (invalid when none came).
UniqueFd accept_within(int listener, int ms) {
  pollfd p{listener, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return UniqueFd();
  return UniqueFd(accept(listener, nullptr, nullptr));
}

// A relay request for `port` on `dest` (the destination host's agent is the one asked), proved
// with `nonce`'s key, sent from `from`; its status.
int ask_last_hop(uint32_t from, uint32_t dest, uint16_t relay_port, uint16_t port,
                 const uint8_t* nonce) {
  RelayRequest req;
  req.port = port;
  req.dest = {{dest, 30}};
  uint8_t b[kRequestSize];
  encode_for(req, b, nonce);
  UniqueFd c = connect_to(from, dest, relay_port);
  EXPECT_TRUE(send_all(c.get(), b, sizeof(b)));
  return read_status(c.get());
}

// Review finding (relay hardening a): pending requests (accepted, not yet answered or admitted)
// were capped only in total, with the pairs, so one source address could hold every slot for
// the request timeout (10 s) at a time and nobody else was relayed. A source now holds at most
// a quarter of the cap; beyond it its requests are answered "busy" at once, with a WARN.
TEST(RelayAgentPendingCap, OneSourceFillsOnlyItsShareAndAnotherSourceIsStillServed) {
  test::WarnCapture warns;
  AgentConfig config = config_for(0, 2);  // 127.77.0.1/30
  config.port = static_cast<uint16_t>(test_port() + 3);
  config.max_pairs = 8;  // a share of 2 pending requests per source address
  Agent agent;
  std::string why;
  ASSERT_TRUE(agent.start(config, &why)) << why;
  if (!agent.is_agent()) GTEST_SKIP() << "relay port " << config.port << " is taken on loopback";
  const uint32_t self = *parse_ipv4("127.77.0.1");
  const uint32_t flooder = *parse_ipv4("127.77.0.2"), other = *parse_ipv4("127.77.0.3");
  uint16_t port = 0;
  UniqueFd listener = listen_on(self, &port);
  Registrar registrar;
  registrar.configure(agent_socket_name(config));
  registrar.add(port, kNonce, 16);
  ASSERT_TRUE(registrar.connected());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the agent reads it

  // One source opens as many sockets as the whole cap and sends nothing on them.
  std::vector<UniqueFd> held;
  for (size_t i = 0; i < config.max_pairs; ++i)
    held.push_back(connect_to(flooder, self, config.port));
  const size_t share = config.max_pairs / 4;
  for (size_t i = 0; i < held.size(); ++i) {
    const int status = status_within(held[i].get(), 300);
    if (i < share) {
      EXPECT_EQ(status, -2) << "request " << i << " of the source's share was answered";
    } else {
      EXPECT_EQ(status, static_cast<int>(ReplyCode::kBusy))
          << "request " << i << " over the source's share of " << share << " was not refused";
    }
  }
  for (int i = 0; i < 100 && warns.containing("127.77.0.2").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // logged just after the answer
  EXPECT_EQ(warns.containing("127.77.0.2").size(), 1u);
  EXPECT_EQ(warns.containing("at most " + std::to_string(share) + " pending").size(), 1u);

  // Another source is still relayed to the registered listener.
  EXPECT_EQ(ask_last_hop(other, self, config.port, port, kNonce), static_cast<int>(ReplyCode::kOk));
  EXPECT_TRUE(accept_within(listener.get(), 2000).valid());

  // Once the source's pending requests end, it is served again.
  held.clear();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(ask_last_hop(flooder, self, config.port, port, kNonce),
            static_cast<int>(ReplyCode::kOk));
  EXPECT_TRUE(accept_within(listener.get(), 2000).valid());
  agent.stop();
}

// The pairs cap (sized from the descriptor limit) answers busy, and its WARN says what the cap
// comes from and how to raise it: the Soft-RoCE lane's relay host, a process at ulimit -n 1024
// (85 pairs), could not carry 16 TCP-relayed connections each way (160 sockets), and nothing in
// the logs named the descriptor limit.
TEST(RelayAgentPendingCap, AFullPairsCapIsBusyAndItsWarnNamesTheDescriptorLimit) {
  test::WarnCapture warns;
  AgentConfig config = config_for(0, 2);  // 127.77.0.1/30
  config.port = static_cast<uint16_t>(test_port() + 6);
  config.max_pairs = 8;  // 2 pending per source: four sources fill it
  Agent agent;
  std::string why;
  ASSERT_TRUE(agent.start(config, &why)) << why;
  if (!agent.is_agent()) GTEST_SKIP() << "relay port " << config.port << " is taken on loopback";
  const uint32_t self = *parse_ipv4("127.77.0.1");
  std::vector<UniqueFd> held;
  for (uint32_t source = 2; source <= 5; ++source) {
    for (int i = 0; i < 2; ++i) held.push_back(connect_to(0x7F4D0000 + source, self, config.port));
  }
  for (auto& h : held) EXPECT_EQ(status_within(h.get(), 200), -2) << "a request within the cap";
  UniqueFd over = connect_to(0x7F4D0006, self, config.port);
  EXPECT_EQ(status_within(over.get(), 2000), static_cast<int>(ReplyCode::kBusy));
  for (int i = 0; i < 100 && warns.containing("relayed sockets are open").empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // logged just after the answer
  const auto w = warns.containing("8 relayed sockets are open");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("descriptor limit"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("ulimit -n"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("LimitNOFILE="), std::string::npos) << w[0];
  agent.stop();
}

// Review finding (relay hardening b): a registration over the local socket could name any
// port, so a process allowed on the local socket could expose any local service (sshd) to
// relay requests under a key of its choice. The agent now checks with a sock_diag dump that
// the registering process's user owns a TCP listener on that port at the agent's address.
class RelayAgentRegistration : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = config_for(0, 2);  // 127.77.0.1/30
    config_.port = static_cast<uint16_t>(test_port() + 4);
    std::string why;
    ASSERT_TRUE(agent_.start(config_, &why)) << why;
    if (!agent_.is_agent())
      GTEST_SKIP() << "relay port " << config_.port << " is taken on loopback";
    // qemu-user (the arm64 lane) does not carry NETLINK_SOCK_DIAG, nor does a kernel without
    // tcp_diag: there the agent accepts registrations unchecked (agent.cc), so nothing to check.
    if (!dump_tcp_sockets(
            1u << TCP_LISTEN, 0, 64, [](const TcpSocketInfo&) {}, &why))
      GTEST_SKIP() << "this kernel or emulator cannot dump TCP listeners (" << why
                   << "): registrations are accepted unchecked there";
    registrar_.configure(agent_socket_name(config_));
  }
  void TearDown() override { agent_.stop(); }
  // Registers `port` under `nonce`'s tag, then asks for it from another address.
  int register_and_ask(uint16_t port, const uint8_t* nonce) {
    registrar_.add(port, nonce, 16);
    EXPECT_TRUE(registrar_.connected());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the agent reads it
    return ask_last_hop(*parse_ipv4("127.77.0.2"), self_, config_.port, port, nonce);
  }
  test::WarnCapture warns_;
  AgentConfig config_;
  Agent agent_;
  Registrar registrar_;
  const uint32_t self_ = *parse_ipv4("127.77.0.1");
};

TEST_F(RelayAgentRegistration, OnlyAPortThisUserListensOnAtTheAgentsAddressIsRegistered) {
  const uint8_t n1[16] = {1}, n2[16] = {2}, n3[16] = {3};
  const std::string uid = std::to_string(geteuid());
  {  // a listener of this process on the agent's address: registered, reached
    uint16_t port = 0;
    UniqueFd listener = listen_on(self_, &port);
    EXPECT_EQ(register_and_ask(port, n1), static_cast<int>(ReplyCode::kOk));
    EXPECT_TRUE(accept_within(listener.get(), 2000).valid());
    EXPECT_TRUE(warns_.containing("registration").empty());
    // Its listener closes (another user's service could bind the port next): checked again at
    // the address the agent connects to, for every request, and refused.
    listener.reset();
    EXPECT_EQ(ask_last_hop(*parse_ipv4("127.77.0.2"), self_, config_.port, port, n1),
              static_cast<int>(ReplyCode::kNotRegistered));
    // The agent WARNs just after it answered.
    for (int i = 0; i < 100 && warns_.containing("not there any more").empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(warns_.containing("its registered listener is not there any more").size(), 1u);
  }
  {  // a port nobody listens on: refused at registration, with a WARN naming user and port
    uint16_t port = 0;
    UniqueFd gone = listen_on(self_, &port);
    gone.reset();
    EXPECT_EQ(register_and_ask(port, n2), static_cast<int>(ReplyCode::kNotRegistered));
    const auto w = warns_.containing("port " + std::to_string(port));
    EXPECT_FALSE(w.empty()) << "no WARN names the port";
    if (!w.empty()) {  // the registration's first (then the request's)
      EXPECT_NE(w[0].find("user " + uid), std::string::npos) << w[0];
      EXPECT_NE(w[0].find("no TCP listener"), std::string::npos) << w[0];
    }
  }
  {  // a listener of this process, but on another address than the agent connects to
    uint16_t port = 0;
    UniqueFd elsewhere = listen_on(*parse_ipv4("127.0.0.1"), &port);
    EXPECT_EQ(register_and_ask(port, n3), static_cast<int>(ReplyCode::kNotRegistered));
    const auto w = warns_.containing("port " + std::to_string(port));
    EXPECT_FALSE(w.empty()) << "no WARN names the port";
    if (!w.empty()) {
      EXPECT_NE(w[0].find("user " + uid), std::string::npos) << w[0];
    }
  }
}

TEST_F(RelayAgentRegistration, AListenerOfAnotherUserIsNotRegistered) {
  if (geteuid() != 0) GTEST_SKIP() << "not root: cannot listen as another user (nobody, 65534)";
  int to_parent[2], to_child[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Only async-signal-safe calls here; the raw syscalls change this (only) thread's ids.
    uint16_t port = 0;
    if (syscall(SYS_setgid, 65534) == 0 && syscall(SYS_setuid, 65534) == 0) {
      const int l = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in la = make_sockaddr(*parse_ipv4("127.77.0.1"), 0);
      socklen_t len = sizeof(la);
      if (l >= 0 && bind(l, reinterpret_cast<sockaddr*>(&la), sizeof(la)) == 0 &&
          listen(l, 4) == 0 && getsockname(l, reinterpret_cast<sockaddr*>(&la), &len) == 0)
        port = ntohs(la.sin_port);
    }
    (void)!write(to_parent[1], &port, sizeof(port));
    char x;
    (void)!read(to_child[0], &x, 1);  // until the parent is done
    _exit(0);
  }
  close(to_parent[1]);
  close(to_child[0]);
  uint16_t port = 0;
  ASSERT_EQ(read(to_parent[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  ASSERT_NE(port, 0) << "the child could not listen as user 65534";
  const uint8_t n[16] = {4};
  const int status = register_and_ask(port, n);
  (void)!write(to_child[1], "x", 1);
  close(to_child[1]);
  close(to_parent[0]);
  int ws = 0;
  waitpid(child, &ws, 0);
  EXPECT_EQ(status, static_cast<int>(ReplyCode::kNotRegistered))
      << "a listener of user 65534 was reached through a registration of user " << geteuid();
  const auto w = warns_.containing("port " + std::to_string(port));
  ASSERT_FALSE(w.empty()) << "no WARN names the port";
  EXPECT_NE(w[0].find("user 0"), std::string::npos) << w[0];
  EXPECT_NE(w[0].find("65534"), std::string::npos) << w[0];
}

}  // namespace
}  // namespace mesh::relay
