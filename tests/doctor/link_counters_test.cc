// SPDX-License-Identifier: Apache-2.0
// Cable byte counters over synthetic /sys trees: a netdev's statistics, a hardware RDMA port's
// 4-byte-word data counters, an rxe port with packet counters only, deltas and their unknowns.
#include "topology/link_counters.h"

#include <gtest/gtest.h>

#include "fixtures.h"

namespace mesh::topology {
namespace {

using doctor::testing::TempDir;

RdmaPort port(const std::string& dev, int p) {
  RdmaPort r;
  r.device = dev;
  r.port = p;
  return r;
}

TEST(LinkCounters, ReadsNetdevAndHardwareRdmaBytes) {
  TempDir t;
  t.write("class/net/eth1/statistics/tx_bytes", "1000");
  t.write("class/net/eth1/statistics/rx_bytes", "2500");
  t.write("class/infiniband/mlx5_0/ports/1/counters/port_xmit_data", "256");  // words
  t.write("class/infiniband/mlx5_0/ports/1/counters/port_rcv_data", "1024");
  t.write("class/infiniband/mlx5_0/ports/1/counters/port_xmit_packets", "7");
  const RdmaPort p = port("mlx5_0", 1);
  const LinkCounters c = read_link_counters("eth1", {&p}, t.path());
  EXPECT_EQ(c.ifname, "eth1");
  EXPECT_EQ(c.tx_bytes, 1000u);
  EXPECT_EQ(c.rx_bytes, 2500u);
  ASSERT_EQ(c.rdma.size(), 1u);
  EXPECT_EQ(c.rdma[0].tx_bytes, 1024u);
  EXPECT_EQ(c.rdma[0].rx_bytes, 4096u);
  EXPECT_EQ(c.rdma[0].tx_packets, 7u);
  EXPECT_FALSE(c.rdma[0].rx_packets.has_value());
  EXPECT_EQ(describe_link_counters(c),
            "sent 1000 B, received 2.4 KiB; RDMA mlx5_0/1 sent 1.0 KiB, received 4.0 KiB");
}

TEST(LinkCounters, RxePortHasPacketsOnly) {
  TempDir t;
  t.write("class/net/veth0/statistics/tx_bytes", "0");
  t.write("class/net/veth0/statistics/rx_bytes", "0");
  t.write("class/infiniband/rxe_a/ports/1/hw_counters/sent_pkts", "12");
  t.write("class/infiniband/rxe_a/ports/1/hw_counters/rcvd_pkts", "9");
  const RdmaPort p = port("rxe_a", 1);
  const LinkCounters c = read_link_counters("veth0", {&p}, t.path());
  ASSERT_EQ(c.rdma.size(), 1u);
  EXPECT_FALSE(c.rdma[0].tx_bytes.has_value());
  EXPECT_EQ(c.rdma[0].tx_packets, 12u);
  EXPECT_EQ(c.rdma[0].rx_packets, 9u);
  EXPECT_EQ(describe_link_counters(c),
            "sent 0 B, received 0 B; RDMA rxe_a/1 sent 12 packets, received 9 packets (no byte "
            "counters; they are in the netdev's)");
}

TEST(LinkCounters, MissingOrMalformedFilesAreUnknown) {
  TempDir t;
  t.write("class/net/eth2/statistics/tx_bytes", "12x");
  t.write("class/net/eth2/statistics/rx_bytes", "99999999999999999999999");  // > 2^64
  const LinkCounters c = read_link_counters("eth2", {}, t.path());
  EXPECT_FALSE(c.tx_bytes.has_value());
  EXPECT_FALSE(c.rx_bytes.has_value());
  EXPECT_FALSE(read_link_counters("nosuch", {}, t.path()).tx_bytes.has_value());
  EXPECT_EQ(describe_link_counters(c), "sent -, received -");
}

TEST(LinkCounters, DeltaPerValueAndUnknownWhenACounterWentBackwards) {
  LinkCounters before, after;
  before.ifname = after.ifname = "eth1";
  before.tx_bytes = 100;
  after.tx_bytes = 100 + 3 * 1024 * 1024;
  before.rx_bytes = 500;
  after.rx_bytes = 400;  // reset by the driver
  RdmaPortCounters rb, ra;
  rb.device = ra.device = "mlx5_0";
  rb.tx_bytes = 4;
  ra.tx_bytes = 4 + 2048;
  before.rdma = {rb};
  after.rdma = {ra};
  const LinkCounters d = counter_delta(before, after);
  EXPECT_EQ(d.tx_bytes, 3u * 1024 * 1024);
  EXPECT_FALSE(d.rx_bytes.has_value());
  ASSERT_EQ(d.rdma.size(), 1u);
  EXPECT_EQ(d.rdma[0].tx_bytes, 2048u);
  EXPECT_FALSE(d.rdma[0].rx_bytes.has_value());
  EXPECT_EQ(format_counter_bytes(d.tx_bytes), "3.0 MiB");
  EXPECT_EQ(format_counter_bytes(std::nullopt), "-");
}

}  // namespace
}  // namespace mesh::topology
