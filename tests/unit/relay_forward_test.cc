// SPDX-License-Identifier: Apache-2.0
// The RDMA relay's setup phase against hostile or impossible input (transport/rdma/
// relay_forward.h): whatever the connector sends, the forward answers the relay request "ok",
// then refuses with a hello reply (malformed hello or setup, no RDMA here, a connector that
// stops talking) and closes both sockets; the destination never sees a byte of a refused
// connector. Runs without RDMA hardware: the transport has no bound port, so a well-formed
// request ends in "setup failed" before any verbs call.
#include "transport/rdma/relay_forward.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <vector>

#include "handshake/hello.h"
#include "relay/request.h"
#include "util/clock.h"

namespace mesh::rdma {
namespace {

struct Pair {
  UniqueFd test, forward;
};

Pair socket_pair() {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

class RelayForwardSetup : public ::testing::Test {
 protected:
  void SetUp() override {
    Pair u = socket_pair(), d = socket_pair();
    up_ = std::move(u.test);
    down_ = std::move(d.test);
    ForwardSockets s;
    s.up = std::move(u.forward);
    s.down = std::move(d.forward);
    s.down_local = 0xC6120505;
    s.down_peer = 0xC6120506;
    s.what = "test connector -> test destination";
    forward_ = std::make_unique<RelayForward>(transport_, std::move(s), 8, 512 * 1024,
                                              monotonic_ms() + 1500);
  }
  // Steps the forward until it ends (false) or `ms` pass; true when it ended.
  bool run_until_done(int ms) {
    const int64_t end = monotonic_ms() + ms;
    bool progress = false;
    while (monotonic_ms() < end) {
      if (!forward_->step(monotonic_ms(), &progress)) return true;
    }
    return false;
  }
  std::vector<uint8_t> read_up(size_t n) {
    std::vector<uint8_t> b(n);
    size_t got = 0;
    while (got < n) {
      pollfd p{up_.get(), POLLIN, 0};
      bool progress = false;
      forward_->step(monotonic_ms(), &progress);
      if (poll(&p, 1, 10) <= 0) continue;
      const ssize_t r = recv(up_.get(), b.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    b.resize(got);
    return b;
  }
  void expect_relay_ok() {
    const auto r = read_up(relay::kRelayReplySize);
    ASSERT_EQ(r.size(), relay::kRelayReplySize);
    relay::ReplyCode code;
    ASSERT_TRUE(relay::decode_relay_reply(r.data(), &code));
    EXPECT_EQ(code, relay::ReplyCode::kOk);
  }
  // The forward's answer to the hello, after which it has closed both sockets.
  handshake::HelloReply refusal() {
    EXPECT_TRUE(run_until_done(3000));
    uint8_t b[handshake::kReplySize];
    EXPECT_EQ(recv(up_.get(), b, sizeof(b), MSG_DONTWAIT), static_cast<ssize_t>(sizeof(b)));
    handshake::HelloReply reply{};
    EXPECT_TRUE(handshake::decode_reply(b, &reply));
    uint8_t x;
    EXPECT_EQ(recv(up_.get(), &x, 1, MSG_DONTWAIT), 0);    // closed after the reply
    EXPECT_EQ(recv(down_.get(), &x, 1, MSG_DONTWAIT), 0);  // the destination saw nothing
    return reply;
  }
  std::vector<uint8_t> hello_with(const std::vector<uint8_t>& ext) {
    handshake::Hello h;
    h.role = handshake::Role::kControl;
    h.ndata = 0;
    h.conn_id = 42;
    h.ext_len = static_cast<uint16_t>(ext.size());
    std::vector<uint8_t> b(handshake::kHelloSize);
    handshake::encode_hello(h, b.data());
    b.insert(b.end(), ext.begin(), ext.end());
    return b;
  }
  SetupMessage connector_setup() {
    SetupMessage m;
    m.ring_addr = 0x7f0000001000;
    m.relay = true;
    QpInfo q;
    q.qpn = 0x11;
    q.psn = 1;
    q.mtu = 5;
    q.local_addr = 0xC6120501;
    q.peer_addr = 0xC6120502;
    q.ring_rkey = 7;
    m.qps.push_back(q);
    return m;
  }
  RdmaTransport transport_;  // nothing bound: no RDMA port anywhere
  UniqueFd up_, down_;
  std::unique_ptr<RelayForward> forward_;
};

TEST_F(RelayForwardSetup, GarbageInsteadOfAHelloIsMalformed) {
  expect_relay_ok();
  std::vector<uint8_t> junk(handshake::kHelloSize, 0x5a);
  ASSERT_EQ(send(up_.get(), junk.data(), junk.size(), 0), static_cast<ssize_t>(junk.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kMalformed);
}

TEST_F(RelayForwardSetup, ADirectSetupIsNotARelayHop) {
  expect_relay_ok();
  SetupMessage m = connector_setup();
  m.relay = false;
  const auto b = hello_with(encode_setup(m));
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kMalformed);
}

TEST_F(RelayForwardSetup, ARelaysAnswerFromTheConnectorIsRefused) {
  expect_relay_ok();
  SetupMessage m = connector_setup();
  m.relay_slots = 8;  // a relay's trailer: the connector must send zeros
  m.relay_slot_bytes = 4096;
  const auto b = hello_with(encode_setup(m));
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kMalformed);
}

TEST_F(RelayForwardSetup, AValidRequestWithoutRdmaHereFailsSetup) {
  expect_relay_ok();
  const auto b = hello_with(encode_setup(connector_setup()));
  ASSERT_EQ(send(up_.get(), b.data(), b.size(), 0), static_cast<ssize_t>(b.size()));
  EXPECT_EQ(refusal(), handshake::HelloReply::kSetupFailed);
}

TEST_F(RelayForwardSetup, AConnectorThatStopsTalkingTimesOut) {
  expect_relay_ok();
  const auto b = hello_with(encode_setup(connector_setup()));
  ASSERT_EQ(send(up_.get(), b.data(), 20, 0), 20);  // a third of a hello, then silence
  EXPECT_EQ(refusal(), handshake::HelloReply::kSetupFailed);
}

TEST_F(RelayForwardSetup, AConnectorThatHangsUpEndsTheForward) {
  expect_relay_ok();
  up_.reset();
  EXPECT_TRUE(run_until_done(1000));
  uint8_t x;
  EXPECT_EQ(recv(down_.get(), &x, 1, MSG_DONTWAIT), 0);
}

}  // namespace
}  // namespace mesh::rdma
