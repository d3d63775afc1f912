// SPDX-License-Identifier: Apache-2.0
// The probe protocol: request and INFO codecs, and client against server end to end over
// 127.0.0.1 (the only address these tests use).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <thread>

#include "fixtures.h"
#include "tools/doctor/probe_client.h"
#include "tools/doctor/probe_protocol.h"
#include "tools/doctor/probe_server.h"
#include "tools/doctor/probe_socket.h"
#include "util/byte_order.h"

namespace mesh::doctor::probe {
namespace {

using testing::addr;
using testing::contains;
using testing::iface;
using testing::prefix;

TEST(ProbeRequest, RoundTrip) {
  for (Op op : {Op::kInfo, Op::kPing, Op::kSink, Op::kSource}) {
    const auto bytes = encode_request({op, 1234});
    std::string why;
    const auto r = decode_request(bytes.data(), &why);
    ASSERT_TRUE(r.has_value()) << why;
    EXPECT_EQ(r->op, op);
    EXPECT_EQ(r->arg, 1234u);
  }
}

TEST(ProbeRequest, RejectsCorruption) {
  const auto good = encode_request({Op::kPing, 5});
  struct Case {
    size_t offset;
    uint8_t value;
    const char* expect;
  };
  for (const Case& c : {Case{0, 'X', "magic"}, Case{4, 2, "version"}, Case{5, 0, "operation"},
                        Case{5, 9, "operation"}, Case{7, 1, "reserved"}}) {
    auto bytes = good;
    bytes[c.offset] = c.value;
    std::string why;
    EXPECT_FALSE(decode_request(bytes.data(), &why).has_value()) << c.offset;
    EXPECT_TRUE(contains(why, c.expect)) << why;
  }
}

TEST(ProbeInfo, RoundTripAndMalformed) {
  PeerInfo info;
  info.host = "spark-b";
  info.interfaces = {{"srba", prefix("198.18.1.2/24"), 9000, 200000, true},
                     {"lo", prefix("127.0.0.1/8"), 65536, -1, false}};
  info.arrived_on = info.interfaces[0];
  info.shared_settings = {{"NCCL_MESH_TUNER", "ring"}, {"NCCL_MESH_TUNER_MIN_BYTES", "0"}};
  std::string why;
  const auto back = decode_info(encode_info(info), &why);
  ASSERT_TRUE(back.has_value()) << why;
  EXPECT_EQ(back->host, "spark-b");
  ASSERT_EQ(back->interfaces.size(), 2u);
  EXPECT_EQ(back->interfaces[0].addr, prefix("198.18.1.2/24"));
  EXPECT_EQ(back->interfaces[0].speed_mbps, 200000);
  EXPECT_TRUE(back->interfaces[0].used);
  ASSERT_TRUE(back->arrived_on.has_value());
  EXPECT_EQ(back->arrived_on->mtu, 9000);
  EXPECT_EQ(back->shared_settings, info.shared_settings);

  for (const char* bad : {"", "[]", "{\"interfaces\": [{\"name\": \"x\"}]}",
                          "{\"interfaces\": [{\"name\": \"x\", \"addr\": \"1.2.3.4\", "
                          "\"prefix\": 40}]}",
                          "{\"interfaces\": [], \"shared_settings\": {\"NCCL_MESH_TUNER\": 3}}"}) {
    EXPECT_FALSE(decode_info(bad, &why).has_value()) << bad;
    EXPECT_TRUE(contains(why, "malformed INFO")) << why;
  }
}

// A server on 127.0.0.1 (any free port) served from a background thread.
class LoopbackServer {
 public:
  LoopbackServer() {
    PeerInfo self;
    self.host = "loopback-peer";
    self.interfaces = {{"lo", prefix("127.0.0.1/8"), 65536, -1, true}};
    std::string error;
    started_ = server_.start({iface("lo", "127.0.0.1/8", 65536)}, 0, self, nullptr, &error);
    EXPECT_TRUE(started_) << error;
    if (started_) thread_ = std::thread([this] { served_ = server_.run(0, stop_); });
  }
  ~LoopbackServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint16_t port() const { return server_.port(); }

 private:
  ProbeServer server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  bool started_ = false;
  size_t served_ = 0;
};

TEST(ProbeLoopback, MeasuresRoundTripBandwidthAndReportsThePeersInterface) {
  LoopbackServer server;
  ProbeParams params;
  params.port = server.port();
  params.seconds = 0.2;
  params.streams = 2;
  params.pings = 5;
  const CableProbe p = probe_cable(addr("127.0.0.1"), addr("127.0.0.1"), params);
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_GT(p.rtt_min_us, 0);
  EXPECT_GE(p.rtt_median_us, p.rtt_min_us);
  EXPECT_GT(p.send_mbytes_per_s, 0);
  EXPECT_GT(p.recv_mbytes_per_s, 0);
  ASSERT_TRUE(p.info.has_value());
  EXPECT_EQ(p.info->host, "loopback-peer");
  ASSERT_TRUE(p.info->arrived_on.has_value());
  EXPECT_EQ(p.info->arrived_on->name, "lo");
  EXPECT_EQ(p.info->arrived_on->mtu, 65536);
}

TEST(ProbeLoopback, RefusedPortIsAnError) {
  // Bind and close a socket to get a port nobody listens on.
  std::string error;
  uint16_t port = 0;
  {
    UniqueFd fd = listen_on(addr("127.0.0.1"), 0, &error);
    ASSERT_TRUE(fd.valid()) << error;
    port = local_port(fd.get());
  }
  ProbeParams params;
  params.port = port;
  const CableProbe p = probe_cable(addr("127.0.0.1"), addr("127.0.0.1"), params);
  EXPECT_FALSE(p.ok);
  EXPECT_TRUE(contains(p.error, "Connection refused")) << p.error;
  EXPECT_TRUE(contains(p.error, "127.0.0.1:" + std::to_string(port))) << p.error;
}

TEST(ProbeLoopback, ServerClosesOnGarbageAndKeepsServing) {
  LoopbackServer server;
  std::string error;
  {
    UniqueFd fd = connect_bound(addr("127.0.0.1"), addr("127.0.0.1"), server.port(), 2000, &error);
    ASSERT_TRUE(fd.valid()) << error;
    const char junk[12] = "GET / HTTP";
    ASSERT_TRUE(send_all(fd.get(), junk, sizeof(junk)));
    set_io_timeout(fd.get(), 5000);
    char c = 0;
    EXPECT_EQ(::recv(fd.get(), &c, 1, 0), 0);  // closed without an answer
  }
  ProbeParams params;
  params.port = server.port();
  params.seconds = 0.05;
  params.streams = 1;
  params.pings = 1;
  EXPECT_TRUE(probe_cable(addr("127.0.0.1"), addr("127.0.0.1"), params).ok);
}

TEST(ProbeLoopback, ServerClampsTheDurationAClientAsksFor) {
  LoopbackServer server;
  std::string error;
  UniqueFd fd = connect_bound(addr("127.0.0.1"), addr("127.0.0.1"), server.port(), 2000, &error);
  ASSERT_TRUE(fd.valid()) << error;
  // SOURCE for 0xffffffff ms would be 49 days; the server stops after kMaxDurationMs. Read
  // only briefly and close: the server must notice and end the session.
  const auto req = encode_request({Op::kSource, 0xffffffffu});
  ASSERT_TRUE(send_all(fd.get(), req.data(), req.size()));
  char buf[4096];
  EXPECT_GT(::recv(fd.get(), buf, sizeof(buf), 0), 0);
}

TEST(ProbeLoopback, InfoReportsTheHostAsItIsNowNotAsItWasAtStart) {
  // --serve runs for days: an MTU changed after start must not be reported stale (issue 29).
  std::atomic<int> mtu{1500};
  ProbeServer server;
  std::string error;
  const auto self = [&mtu] {
    PeerInfo info;
    info.host = "changing";
    info.interfaces = {{"lo", prefix("127.0.0.1/8"), mtu.load(), -1, true}};
    return info;
  };
  ASSERT_TRUE(server.start({iface("lo", "127.0.0.1/8", 1500)}, 0, ProbeServer::SelfInfo(self),
                           nullptr, &error))
      << error;
  std::atomic<bool> stop{false};
  std::thread t([&] { server.run(0, stop); });
  ProbeParams params;
  params.port = server.port();
  params.seconds = 0.05;
  params.streams = 1;
  params.pings = 1;
  const CableProbe before = probe_cable(addr("127.0.0.1"), addr("127.0.0.1"), params);
  mtu = 9000;  // ip link set lo mtu 9000, while serving
  const CableProbe after = probe_cable(addr("127.0.0.1"), addr("127.0.0.1"), params);
  stop = true;
  t.join();
  ASSERT_TRUE(before.ok && after.ok) << before.error << " " << after.error;
  ASSERT_TRUE(before.info && before.info->arrived_on && after.info && after.info->arrived_on);
  EXPECT_EQ(before.info->arrived_on->mtu, 1500);
  EXPECT_EQ(after.info->arrived_on->mtu, 9000);
}

}  // namespace
}  // namespace mesh::doctor::probe
