// SPDX-License-Identifier: Apache-2.0
// Unit tests for the pure parts of nccl-mesh-bench: size lists, the verification pattern, the
// all-reduce data, the bandwidth formulas, the launcher environment, the routes read from the
// plugin's log lines and the thread count of the CLOSE line.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cable_merge.h"
#include "cpu_pin.h"
#include "launch_env.h"
#include "metrics.h"
#include "pattern.h"
#include "proc_usage.h"
#include "route_log.h"
#include "sizes.h"

namespace mesh::bench {
namespace {

TEST(ParseSize, PlainAndSuffixes) {
  EXPECT_EQ(parse_size("8"), 8u);
  EXPECT_EQ(parse_size("0"), 0u);
  EXPECT_EQ(parse_size("1K"), 1024u);
  EXPECT_EQ(parse_size("64k"), 64u * 1024);
  EXPECT_EQ(parse_size("64M"), 64ull << 20);
  EXPECT_EQ(parse_size("1G"), 1ull << 30);
  EXPECT_EQ(parse_size("4KiB"), 4096u);
  EXPECT_EQ(parse_size("2MB"), 2ull << 20);
  EXPECT_EQ(parse_size("100B"), 100u);
  EXPECT_EQ(parse_size(" 3 M "), 3ull << 20);
}

TEST(ParseSize, RejectsJunk) {
  std::string why;
  EXPECT_FALSE(parse_size("", &why));
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(parse_size("K"));
  EXPECT_FALSE(parse_size("12X"));
  EXPECT_FALSE(parse_size("1KX"));
  EXPECT_FALSE(parse_size("-1"));
  EXPECT_FALSE(parse_size("1.5M"));
  EXPECT_FALSE(parse_size("99999999999999999999"));
  EXPECT_FALSE(parse_size("17179869184G"));  // 2^34 GiB overflows 64 bits
}

TEST(ParseSize, List) {
  const auto l = parse_size_list("8,1K, 64M,1G");
  ASSERT_TRUE(l);
  EXPECT_EQ(*l, (std::vector<uint64_t>{8, 1024, 64ull << 20, 1ull << 30}));
  EXPECT_FALSE(parse_size_list("8,,16"));
  EXPECT_FALSE(parse_size_list("8,x"));
}

TEST(CpuList, OneCpuPerRankRepeatingModuloTheLength) {
  const auto cpus = parse_cpu_list("0,1,1");
  ASSERT_TRUE(cpus.has_value());
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(cpu_for_rank(*cpus, 0), 0);
  EXPECT_EQ(cpu_for_rank(*cpus, 2), 1);
  EXPECT_EQ(cpu_for_rank(*cpus, 3), 0);  // a 4th rank wraps around
  EXPECT_EQ(format_cpu_list(*cpus), "0,1,1");
  EXPECT_EQ(parse_cpu_list("1023"), (std::vector<int>{1023}));
}

TEST(CpuList, RejectsWhatIsNotACpuNumber) {
  for (const char* bad :
       {"", ",", "0,", ",1", "0,,1", "a", "1a", "-1", "1024", "0-3", " 1", "99999999999"}) {
    std::string why;
    EXPECT_FALSE(parse_cpu_list(bad, &why).has_value()) << "'" << bad << "'";
    EXPECT_NE(why.find("is not a CPU number"), std::string::npos) << why;
  }
}

TEST(CpuList, PinningRestrictsTheCallingThreadToItsCpu) {
  const auto before = allowed_cpus();
  ASSERT_FALSE(before.empty());
  std::vector<int> after;
  std::string why;
  bool pinned = false;
  // A thread of its own, so the test process keeps every CPU.
  std::thread([&] {
    pinned = pin_to_cpu(before.back(), &why);
    after = allowed_cpus();
  }).join();
  ASSERT_TRUE(pinned) << why;
  EXPECT_EQ(after, (std::vector<int>{before.back()}));
  EXPECT_EQ(allowed_cpus(), before);
  EXPECT_FALSE(pin_to_cpu(-1, &why));
  EXPECT_NE(why.find("out of range"), std::string::npos) << why;
}

TEST(Sweep, PowersOfTwo) {
  const auto s = power_of_two_sweep(8, 64ull << 20);
  ASSERT_EQ(s.size(), 24u);
  EXPECT_EQ(s.front(), 8u);
  EXPECT_EQ(s.back(), 64ull << 20);
  EXPECT_EQ(power_of_two_sweep(3, 20), (std::vector<uint64_t>{3, 6, 12}));
  EXPECT_EQ(power_of_two_sweep(16, 16), (std::vector<uint64_t>{16}));
  EXPECT_TRUE(power_of_two_sweep(0, 16).empty());
  EXPECT_TRUE(power_of_two_sweep(32, 16).empty());
}

TEST(FormatSize, Units) {
  EXPECT_EQ(format_size(8), "8 B");
  EXPECT_EQ(format_size(1000), "1000 B");
  EXPECT_EQ(format_size(1024), "1 KiB");
  EXPECT_EQ(format_size(64ull << 20), "64 MiB");
  EXPECT_EQ(format_size(1ull << 30), "1 GiB");
  EXPECT_EQ(format_size(1536 * 1024), "1536 KiB");
  EXPECT_EQ(format_size(3000), "2.9 KiB");
}

TEST(Plan, IterationsShrinkForBigSizes) {
  EXPECT_EQ(plan_iterations(8, 100, 10, 512ull << 20).iters, 100);
  EXPECT_EQ(plan_iterations(8, 100, 10, 512ull << 20).warmup, 10);
  const auto big = plan_iterations(64ull << 20, 100, 10, 512ull << 20);
  EXPECT_EQ(big.iters, 8);
  EXPECT_EQ(big.warmup, 2);
  EXPECT_EQ(plan_iterations(1ull << 30, 100, 10, 512ull << 20).iters, 4);  // floor of 4
  EXPECT_EQ(plan_iterations(1ull << 30, 2, 10, 512ull << 20).iters, 2);    // never above --iters
  EXPECT_EQ(plan_iterations(1ull << 30, 100, 0, 512ull << 20).warmup, 0);
}

TEST(Plan, WindowFitsBuffers) {
  EXPECT_EQ(plan_window(8, 8, 256ull << 20), 8);
  EXPECT_EQ(plan_window(64ull << 20, 8, 256ull << 20), 4);
  EXPECT_EQ(plan_window(1ull << 30, 8, 256ull << 20), 1);
  EXPECT_EQ(plan_window(1024, 0, 4096), 1);
}

// --slice-bytes nccl: the slices NCCL's Simple ring all-reduce sends (prims_simple.h), in floats.
TEST(NcclSlices, HalfTheChunkBetween32KiBAnd1MiB) {
  // 2 ranks, 1 MiB, one channel: 512 KiB chunks in two 256 KiB slices (the check's default
  // cuts them in one 512 KiB message).
  EXPECT_EQ(nccl_slice_floats(128 * 1024), 64u * 1024);
  // 3 ranks, 1 MiB: 87,382-float chunks (341.3 KiB); half, rounded up to 16 floats.
  EXPECT_EQ(nccl_slice_floats(87382), 43696u);
  // 4 ranks, 256 KiB: 64 KiB chunks in two 32 KiB slices; 3 ranks, 64 KiB: one 21 KiB slice.
  EXPECT_EQ(nccl_slice_floats(16384), 8192u);
  EXPECT_EQ(nccl_slice_floats(5462), 8192u);
  // A 48 KiB chunk: the least slice (32 KiB) and the rest, not two halves.
  EXPECT_EQ(nccl_slice_floats(12288), 8192u);
  // Chunks of NCCL's largest (2 MiB) and above: 1 MiB slices.
  EXPECT_EQ(nccl_slice_floats(512 * 1024), 256u * 1024);
  EXPECT_EQ(nccl_slice_floats(3 * 512 * 1024), 256u * 1024);
  EXPECT_EQ(nccl_slice_floats(0), 8192u);
}

TEST(Pattern, RoundTripAllSizes) {
  for (size_t size : {0, 1, 7, 8, 9, 15, 16, 4095, 4096, 4097, 100000}) {
    std::vector<uint8_t> buf(size + 1, 0xAB);
    fill_pattern(buf.data(), size, 3, message_index(0x12020001, 42));
    EXPECT_FALSE(check_pattern(buf.data(), size, 3, message_index(0x12020001, 42))) << size;
    EXPECT_EQ(buf[size], 0xAB) << "wrote past the message, size " << size;
    for (size_t o = 0; o < size; o += 997) {
      EXPECT_EQ(buf[o], pattern_byte(3, message_index(0x12020001, 42), o));
    }
  }
}

TEST(Pattern, FindsFlippedByte) {
  std::vector<uint8_t> buf(10000);
  fill_pattern(buf.data(), buf.size(), 1, 7);
  buf[4321] ^= 0x10;
  const auto m = check_pattern(buf.data(), buf.size(), 1, 7);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->offset, 4321u);
  EXPECT_EQ(m->bad_bytes, 1u);
  EXPECT_EQ(m->expected, pattern_byte(1, 7, 4321));
  EXPECT_EQ(m->got, static_cast<uint8_t>(pattern_byte(1, 7, 4321) ^ 0x10));
}

TEST(Pattern, FindsFlippedTailByte) {
  std::vector<uint8_t> buf(13);
  fill_pattern(buf.data(), buf.size(), 0, 1);
  buf[12] ^= 1;
  const auto m = check_pattern(buf.data(), buf.size(), 0, 1);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->offset, 12u);
}

TEST(Pattern, DependsOnSenderIndexAndOffset) {
  const size_t n = 4096;
  std::vector<uint8_t> a(n), b(n);
  fill_pattern(a.data(), n, 0, 5);
  // Another sender, another message: caught from the first byte on.
  EXPECT_TRUE(check_pattern(a.data(), n, 1, 5));
  EXPECT_TRUE(check_pattern(a.data(), n, 0, 6));
  EXPECT_TRUE(check_pattern(a.data(), n, 0,
                            message_index(stream_id(Transport::kTcp, Phase::kTimed, 0, 1), 5)));
  // The same message shifted by one word (data landed at the wrong offset): caught.
  fill_pattern(b.data(), n + 0, 0, 5);
  std::memmove(b.data(), b.data() + 8, n - 8);
  EXPECT_TRUE(check_pattern(b.data(), n - 8, 0, 5));
  // An all-zero buffer (nothing was written) never passes.
  std::vector<uint8_t> z(n, 0);
  EXPECT_TRUE(check_pattern(z.data(), n, 0, 5));
}

TEST(Pattern, StreamIdsAreDistinct) {
  std::map<uint32_t, int> seen;
  for (auto t : {Transport::kPlugin, Transport::kTcp}) {
    for (auto p : {Phase::kWarmup, Phase::kTimed, Phase::kPing, Phase::kPong, Phase::kStream}) {
      for (unsigned s = 0; s < 4; ++s) {
        for (unsigned r = 0; r < 4; ++r) ++seen[stream_id(t, p, s, r)];
      }
    }
  }
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << std::hex << id;
  EXPECT_EQ(message_index(0xAABBCCDD, 5) >> 32, 0xAABBCCDDu);
  EXPECT_EQ(message_index(0xAABBCCDD, 5) & 0xffffffffu, 5u);
}

TEST(Allreduce, ExpectedIsTheSumOfInputs) {
  for (int n : {2, 3, 4, 7, 64, kMaxAllreduceRanks}) {
    for (size_t i : {0, 1, 60, 61, 1000}) {
      for (uint64_t round : {0, 1, 99}) {
        float sum = 0;
        for (int r = 0; r < n; ++r) sum += allreduce_input(r, i, round);
        EXPECT_EQ(sum, allreduce_expected(n, i, round)) << n << " " << i << " " << round;
      }
    }
  }
}

TEST(Allreduce, FillAndCheck) {
  const int n = 3;
  const size_t count = 1000;
  std::vector<std::vector<float>> in(n, std::vector<float>(count));
  for (int r = 0; r < n; ++r) {
    fill_allreduce_input(in[static_cast<size_t>(r)].data(), count, r, 17);
    for (size_t i = 0; i < count; i += 37) {
      EXPECT_EQ(in[static_cast<size_t>(r)][i], allreduce_input(r, i, 17));
    }
  }
  std::vector<float> out(count, 0.0f);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) out[i] += in[static_cast<size_t>(r)][i];
  }
  EXPECT_FALSE(check_allreduce(out.data(), count, n, 17));
  // The previous round's result is wrong for this round.
  EXPECT_TRUE(check_allreduce(out.data(), count, n, 16));
  out[999] += 1.0f;
  const auto bad = check_allreduce(out.data(), count, n, 17);
  ASSERT_TRUE(bad);
  EXPECT_EQ(*bad, 999u);
}

TEST(Metrics, Formulas) {
  EXPECT_DOUBLE_EQ(gbps(1000000000, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(gbps(1ull << 30, 0.5), 2.147483648);
  EXPECT_TRUE(std::isnan(gbps(1, 0.0)));
  EXPECT_DOUBLE_EQ(allreduce_busbw(10.0, 2), 10.0);
  EXPECT_DOUBLE_EQ(allreduce_busbw(10.0, 4), 15.0);
  EXPECT_DOUBLE_EQ(allreduce_busbw(8.0, 8), 14.0);
  EXPECT_DOUBLE_EQ(allgather_busbw(10.0, 4), 7.5);
  EXPECT_DOUBLE_EQ(ratio(3.0, 2.0), 1.5);
  EXPECT_TRUE(std::isnan(ratio(3.0, 0.0)));
  EXPECT_TRUE(std::isnan(ratio(std::nan(""), 2.0)));
  EXPECT_DOUBLE_EQ(half_rtt_us(1.0, 1000), 500.0);
  EXPECT_TRUE(std::isnan(half_rtt_us(1.0, 0)));
}

TEST(Metrics, PairPayloadCountsEveryMessageTheSampleCovers) {
  // 10 timed + 2 warm-up messages of 1 MB one way.
  EXPECT_EQ(pair_payload_bytes(1000000, 10, 2, false, false), 12000000u);
  // --bidir: both directions.
  EXPECT_EQ(pair_payload_bytes(1000000, 10, 2, true, false), 24000000u);
  // With the ping-pong: a ping and a pong per round trip, warm-up included.
  EXPECT_EQ(pair_payload_bytes(1000, 10, 2, false, true), 12000u + 24000u);
  EXPECT_EQ(pair_payload_bytes(1000, 0, 0, false, true), 0u);
}

TEST(Metrics, PerGb) {
  EXPECT_DOUBLE_EQ(per_gb(0.5, 2000000000), 0.25);  // 0.5 CPU s for 2 GB
  EXPECT_DOUBLE_EQ(per_gb(300.0, 3000000), 100000.0);
  EXPECT_TRUE(std::isnan(per_gb(1.0, 0)));
  EXPECT_TRUE(std::isnan(per_gb(std::nan(""), 10)));
}

TEST(LaunchEnv, Detects) {
  std::map<std::string, std::string> env;
  auto get = [&env](const char* k) -> const char* {
    const auto it = env.find(k);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  std::string why;
  EXPECT_FALSE(detect_launcher(get, &why));
  EXPECT_TRUE(why.empty());

  env = {{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}};
  auto l = detect_launcher(get, &why);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->rank, 2);
  EXPECT_EQ(l->size, 4);

  // Open MPI wins over Slurm (mpirun inside an allocation sets both).
  env["OMPI_COMM_WORLD_RANK"] = "1";
  env["OMPI_COMM_WORLD_SIZE"] = "3";
  l = detect_launcher(get, &why);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->rank, 1);
  EXPECT_EQ(l->size, 3);

  env = {{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}};
  l = detect_launcher(get, &why);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->source, "PMI_RANK/PMI_SIZE");

  // Half a pair is ignored; a malformed pair is an error.
  env = {{"PMI_RANK", "0"}};
  EXPECT_FALSE(detect_launcher(get, &why));
  EXPECT_TRUE(why.empty());
  env = {{"PMI_RANK", "5"}, {"PMI_SIZE", "2"}};
  EXPECT_FALSE(detect_launcher(get, &why));
  EXPECT_FALSE(why.empty());
  env = {{"PMI_RANK", "x"}, {"PMI_SIZE", "2"}};
  EXPECT_FALSE(detect_launcher(get, &why));
}

TEST(LaunchEnv, HostPort) {
  std::string why;
  const auto hp = parse_host_port("10.0.0.1:29500", &why);
  ASSERT_TRUE(hp);
  EXPECT_EQ(hp->addr, 0x0A000001u);
  EXPECT_EQ(hp->port, 29500);
  EXPECT_FALSE(parse_host_port("10.0.0.1", &why));
  EXPECT_FALSE(parse_host_port("10.0.0.1:0", &why));
  EXPECT_FALSE(parse_host_port("10.0.0.1:70000", &why));
  EXPECT_FALSE(parse_host_port("host:80", &why));
}

// The lines as the plugin logs them (src/plugin/plugin.cc, the transports' describe()).
const std::vector<std::vector<std::string>> kRingAddrs = {
    {"198.18.20.1", "198.18.23.2"},   // rank 0 (a)
    {"198.18.20.2", "198.18.21.1"},   // rank 1 (b)
    {"198.18.21.2", "198.18.22.1"},   // rank 2 (c)
    {"198.18.22.2", "198.18.23.1"}};  // rank 3 (d)

TEST(RouteLog, DirectTcpSendConnection) {
  const auto c = parse_connection_log(
      {"NET/Mesh : some other line",
       "NET/Mesh : connected: send connection 198.18.20.1:41000 -> 198.18.20.2:29500 (TCP, 2 "
       "data streams)"});
  EXPECT_TRUE(c.known);
  EXPECT_TRUE(c.sender);
  EXPECT_FALSE(c.relayed);
  EXPECT_EQ(c.transport, "TCP");
  EXPECT_EQ(c.local, "198.18.20.1:41000");
  EXPECT_EQ(c.peer, "198.18.20.2:29500");
  EXPECT_EQ(c.detail, "2 data streams");
  EXPECT_EQ(describe_pair_route(0, 1, c, "eth0", ConnectionRoute{}, "", kRingAddrs),
            "rank 0 -> rank 1: direct over TCP, eth0 198.18.20.1:41000 -> 198.18.20.2:29500 (2 "
            "data streams)");
}

TEST(RouteLog, RdmaReceiveConnection) {
  const auto c = parse_connection_log(
      {"accepted: receive connection 198.18.20.2:29500 <- 198.18.20.1:41000 (RDMA, 2 QPs: "
       "mlx5_0 port 1 QP 0x11, mlx5_0 port 1 QP 0x12)"});
  EXPECT_TRUE(c.known);
  EXPECT_FALSE(c.sender);
  EXPECT_EQ(c.transport, "RDMA");
  EXPECT_EQ(c.peer, "198.18.20.1:41000");
  EXPECT_EQ(c.detail, "2 QPs: mlx5_0 port 1 QP 0x11, mlx5_0 port 1 QP 0x12");
}

TEST(RouteLog, RelayedConnectNamesTheRelayRanks) {
  const auto send = parse_connection_log(
      {"NET/Mesh : connect to peer 198.18.21.2/198.18.22.1:40123 (relayed): relayed over TCP; 2 "
       "cables, 2 equal-cost first hop(s); one shortest path relays through "
       "198.18.20.2+198.18.21.1; first hops: control via 198.18.20.2 data 0 via 198.18.23.1",
       "NET/Mesh : connected: send connection 198.18.20.1:41000 -> 198.18.20.2:18515 (TCP, 2 "
       "data streams)"});
  EXPECT_TRUE(send.relayed);
  EXPECT_EQ(send.relay_transport, "TCP");
  ASSERT_EQ(send.relay_hosts.size(), 1u);
  EXPECT_EQ(send.relay_hosts[0], "198.18.20.2+198.18.21.1");
  EXPECT_EQ(send.relay_summary, "2 cables, 2 equal-cost first hop(s)");
  EXPECT_EQ(send.first_hops, "control via 198.18.20.2 data 0 via 198.18.23.1");
  const auto recv = parse_connection_log(
      {"accepted: receive connection 198.18.21.2:29501 <- 198.18.21.1:50000 (TCP, 2 data "
       "streams)"});
  EXPECT_EQ(describe_pair_route(0, 2, send, "eth0", recv, "eth1", kRingAddrs),
            "rank 0 -> rank 2: relayed over TCP via rank 1 (198.18.20.2+198.18.21.1) [2 cables, 2 "
            "equal-cost first hop(s); first hops: control via 198.18.20.2 data 0 via 198.18.23.1]; "
            "leaves eth0 "
            "198.18.20.1:41000 -> 198.18.20.2:18515 (2 data streams); arrives on eth1 "
            "198.18.21.2:29501 from 198.18.21.1:50000 (relay rank 1)");
}

TEST(RouteLog, RelayHostsInOrderAndHostsWithoutRank) {
  const auto c = parse_connection_log(
      {"connect to peer 198.18.4.2 (relayed): relayed over RDMA; 4 cables, 1 equal-cost first "
       "hop(s); one shortest path relays through 198.18.1.2+198.18.2.1 -> 198.18.2.2+198.18.3.1 "
       "-> 198.18.3.2+198.18.4.1; first hops: control via 198.18.1.2"});
  EXPECT_TRUE(c.relayed);
  EXPECT_FALSE(c.known);  // no "connected:" line: the route is unknown to the pair line
  EXPECT_EQ(c.relay_transport, "RDMA");
  ASSERT_EQ(c.relay_hosts.size(), 3u);
  EXPECT_EQ(c.relay_hosts[2], "198.18.3.2+198.18.4.1");
  const std::vector<std::vector<std::string>> addrs = {{"198.18.1.1"}, {"198.18.4.2"}};
  EXPECT_EQ(label_relay_host(c.relay_hosts[1], addrs), "198.18.2.2+198.18.3.1");
  EXPECT_EQ(label_relay_host("198.18.9.9+198.18.4.2", addrs), "rank 1 (198.18.9.9+198.18.4.2)");
  EXPECT_EQ(describe_pair_route(0, 1, c, "", ConnectionRoute{}, "", addrs),
            "rank 0 -> rank 1: route unknown (the plugin logged no \"connected:\" line)");
}

TEST(RouteLog, StandbyProcessRelaysThroughItsHostsAgent) {
  const auto c = parse_connection_log(
      {"connect to peer x (relayed): relayed over TCP; through this host's relay agent (another "
       "plugin process); first hops: control via 198.18.20.1",
       "connected: send connection 198.18.20.1:41000 -> 198.18.20.1:18515 (TCP, 1 data streams)"});
  EXPECT_TRUE(c.relayed);
  EXPECT_TRUE(c.relay_hosts.empty());
  EXPECT_EQ(describe_pair_route(0, 2, c, "eth0", ConnectionRoute{}, "", kRingAddrs),
            "rank 0 -> rank 2: relayed over TCP through this host's relay agent (another "
            "plugin process); first hops: control via 198.18.20.1; leaves eth0 198.18.20.1:41000 "
            "-> 198.18.20.1:18515 (1 data streams)");
}

TEST(RouteLog, MalformedLinesAreIgnored) {
  for (const char* line : {"connected: send connection", "connected: send connection a -> b",
                           "accepted: receive connection a -> b (TCP)", "connect to x: relayed",
                           "relayed over TCP; relays through y"}) {
    const auto c = parse_connection_log({line});
    EXPECT_FALSE(c.known) << line;
    EXPECT_FALSE(c.relayed) << line;
  }
  EXPECT_EQ(endpoint_addr("198.18.1.1:80"), "198.18.1.1");
}

TEST(CableEnds, RanksOfOneHostShareTheirInterfacesOnce) {
  // Two ranks on host x (same counters), one on y, and one more on x with another interface;
  // the namespace tests' hosts share a hostname but never an address.
  const std::vector<CableEnd> ends = {
      {0, "x", "cb", {"198.18.1.1/24"}}, {0, "x", "cc", {"198.18.2.1/30"}},
      {1, "x", "cb", {"198.18.1.1/24"}}, {1, "x", "cc", {"198.18.2.1/30"}},
      {2, "x", "cb", {"198.18.9.1/24"}},  // another namespace named like x: other address
      {3, "y", "cb", {"198.18.1.1/24"}},  // another host that reuses the name and address
  };
  const auto g = group_cable_ends(ends);
  ASSERT_EQ(g.size(), 4u);
  EXPECT_EQ(g[0], (std::vector<size_t>{0, 2}));
  EXPECT_EQ(g[1], (std::vector<size_t>{1, 3}));
  EXPECT_EQ(g[2], (std::vector<size_t>{4}));
  EXPECT_EQ(g[3], (std::vector<size_t>{5}));
}

// The CLOSE line's thread check (tests/netns/cases.py: back to the threads before init): a
// thread that was joined must not count, even when the kernel still lists it for a moment after
// the join (count_threads_settled); one left running must, and be named.
// The baseline is taken after a first thread came and went: TSan's runtime starts a background
// thread of its own at the first pthread_create and keeps it (the bench allows it too).
int baseline_threads() {
  std::thread([] {}).join();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return count_threads();
}

TEST(CountThreads, JoinedThreadsDoNotCountAfterTheyLeft) {
  const int before = baseline_threads();
  ASSERT_GT(before, 0);
  // Each thread sleeps so that the join really waits for its exit (the window where a joined
  // thread is still listed; 6 in 3,000 joins on the loaded 2-core CI machine).
  for (int i = 0; i < 300; ++i) {
    std::thread([] { std::this_thread::sleep_for(std::chrono::microseconds(200)); }).join();
    ASSERT_EQ(count_threads_settled(before, 2.0), before)
        << "after join " << i << ": " << threads_but_main();
  }
}

TEST(CountThreads, AThreadLeftRunningIsCountedAndNamed) {
  const int before = baseline_threads();
  std::atomic<bool> named{false}, release{false};
  std::thread left([&] {
    pthread_setname_np(pthread_self(), "left-running");
    named = true;
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!named) std::this_thread::yield();
  EXPECT_EQ(count_threads_settled(before, 0.1), before + 1);
  EXPECT_NE(threads_but_main().find("left-running ("), std::string::npos) << threads_but_main();
  release = true;
  left.join();
}

}  // namespace
}  // namespace mesh::bench
