// SPDX-License-Identifier: Apache-2.0
// The text and JSON reports render every section from one synthetic inventory with RDMA, a
// peer map and probe results.
#include "tools/doctor/report.h"

#include <gtest/gtest.h>

#include <sstream>

#include "fixtures.h"

namespace mesh::doctor {
namespace {

using testing::add_netdevs;
using testing::addr;
using testing::contains;
using testing::iface;
using testing::prefix;

struct Scenario {
  Inventory inv;
  Model model;
  Findings findings;
  std::vector<PeerRoute> routes;
  std::vector<PeerLink> links;
};

Scenario scenario() {
  Scenario s;
  s.inv.hostname = "spark-a";
  s.inv.interfaces = {
      iface("enp1s0f0np0", "198.18.1.1/24", 9000, 200000, "/sys/devices/pci0000:00/0000:01:00.0"),
      iface("srac", "198.18.2.1/24")};
  add_netdevs(s.inv);
  s.inv.netdevs.push_back(testing::netdev("enp1s0f1np1", "down"));
  topology::RdmaPort p;
  p.device = "rocep1s0f0";
  p.state = "4: ACTIVE";
  p.link_layer = topology::LinkLayer::kEthernet;
  p.netdevs = {"enp1s0f0np0"};
  p.gids.push_back(
      {3, *topology::parse_gid("::ffff:198.18.1.1"), topology::GidType::kRoceV2, "enp1s0f0np0"});
  s.inv.rdma_ports.push_back(p);
  topology::LinkCounters c;
  c.ifname = "enp1s0f0np0";
  c.tx_bytes = 3ull << 30;
  c.rx_bytes = 5u << 20;
  topology::RdmaPortCounters rc;
  rc.device = "rocep1s0f0";
  rc.tx_bytes = 7ull << 30;
  rc.rx_bytes = 1u << 30;
  c.rdma = {rc};
  s.inv.link_counters[c.ifname] = c;
  s.model = build_model(s.inv);
  s.routes = map_peers({{"b", {addr("198.18.1.2")}}, {"d", {addr("198.18.9.9")}}}, s.inv, s.model);
  CableProbe probe;
  probe.ok = true;
  probe.rtt_median_us = 12;
  probe.send_mbytes_per_s = 11000;
  probe.recv_mbytes_per_s = 10000;
  PeerInterface far{"enp1s0f0np0", prefix("198.18.1.2/24"), 9000, 200000, true};
  probe.info = PeerInfo{"spark-b", {far}, far};
  s.routes[0].probes = {probe};
  s.findings = run_local_checks(s.inv, s.model);
  const Findings peers = check_peer_cables(s.inv, s.model, s.routes);
  s.findings.insert(s.findings.end(), peers.begin(), peers.end());
  return s;
}

TEST(Report, TextHasEverySection) {
  const Scenario s = scenario();
  std::ostringstream out;
  print_text(out, {s.inv, s.model, s.findings, true, true, s.routes, s.links});
  const std::string text = out.str();
  for (const char* part :
       {"nccl-mesh-doctor",
        "spark-a",
        "Interfaces",
        "(no IPv4)",
        "GID choice",
        "rocep1s0f0 port 1: index 3",
        "Plugin selection",
        "NCCL devices",
        "mesh0:enp1s0f0np0",
        "RDMA ports",
        "Mesh map",
        "NO CABLE: no route known here",
        "11000",
        "Checks",
        "warn  peer-cable",
        "fix:",
        "Cable counters",
        "enp1s0f0np0: sent 3.0 GiB, received 5.0 MiB; RDMA rocep1s0f0/1 sent 7.0 GiB, received "
        "1.0 GiB",
        "srac: not readable",
        "ok    peer-cable"}) {
    EXPECT_TRUE(contains(text, part)) << part << "\n" << text;
  }
  for (std::istringstream lines(text); !lines.eof();) {
    std::string line;
    std::getline(lines, line);
    EXPECT_LE(line.size(), 120u) << line;  // wrapped for a terminal
  }
}

TEST(Report, JsonHasTheSameContent) {
  const Scenario s = scenario();
  const nlohmann::json j = to_json({s.inv, s.model, s.findings, true, true, s.routes, s.links});
  EXPECT_EQ(j["host"], "spark-a");
  EXPECT_EQ(j["interfaces"][0]["rdma"][0]["gid"]["index"], 3);
  EXPECT_EQ(j["rdma_ports"][0]["gids"][0]["gid"], "::ffff:198.18.1.1");
  EXPECT_EQ(j["selection"]["devices"].size(), 2u);  // PCI NIC + virtual group
  EXPECT_EQ(j["peers"][0]["rails"][0]["probe"]["peer_interface"]["mtu"], 9000);
  EXPECT_TRUE(j["peers"][1]["rails"].empty());
  EXPECT_EQ(j["peers"][0]["route"], "direct over enp1s0f0np0 198.18.1.1/24 -> 198.18.1.2");
  EXPECT_EQ(j["peers"][1]["route"], "no cable and no route known here");
  EXPECT_EQ(j["interfaces"][0]["counters"]["tx_bytes"], 3ull << 30);
  EXPECT_EQ(j["interfaces"][0]["counters"]["rdma"][0]["tx_bytes"], 7ull << 30);
  EXPECT_TRUE(j["interfaces"][1]["counters"].is_null());  // srac: not read
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(
      j["summary"]["fail"].get<int>(),
      static_cast<int>(std::count_if(s.findings.begin(), s.findings.end(), [](const Finding& f) {
        return f.verdict == Verdict::kFail;
      })));
}

TEST(Report, SettingsTableListsEverySetting) {
  std::ostringstream out;
  print_settings_table(out);
  for (const SettingInfo& info : setting_table()) {
    EXPECT_TRUE(contains(out.str(), std::string("`") + info.env + "`")) << info.env;
  }
}

// The `gin` object carries the facts behind the gin findings; what the doctor could not tell is
// null, not a guess.
TEST(Report, JsonCarriesTheGinFacts) {
  Scenario s = scenario();
  s.inv.gin.plugin_path = "/usr/lib/libnccl-net-mesh.so";
  s.inv.gin.exported = {"ncclGinPlugin_v11", "ncclRmaPlugin_v15"};
  s.inv.gin.cuda_loaded = true;
  s.inv.gin.gpus = {{0, 12, 1, 0}, {1, 9, 0, std::nullopt}};
  nlohmann::json j = to_json({s.inv, s.model, s.findings, true, true, s.routes, s.links});
  EXPECT_EQ(j["gin"]["exported"][1], "ncclRmaPlugin_v15");
  EXPECT_EQ(j["gin"]["memory"], nlohmann::json::array({"host", "cuda"}));
  EXPECT_EQ(j["gin"]["gpus"][0]["compute_capability"], "12.1");
  EXPECT_EQ(j["gin"]["gpus"][0]["vmm_gpudirect_rdma"], 0);
  EXPECT_TRUE(j["gin"]["gpus"][1]["vmm_gpudirect_rdma"].is_null());
  EXPECT_TRUE(j["gin"]["nccl_version"].is_null());
  s.inv.gin.nccl_version = 23007;
  j = to_json({s.inv, s.model, s.findings, true, true, s.routes, s.links});
  EXPECT_EQ(j["gin"]["nccl_version"], "2.30.7");
}

}  // namespace
}  // namespace mesh::doctor
