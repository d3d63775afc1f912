// SPDX-License-Identifier: Apache-2.0
// Issue 29 in the doctor: the interfaces the default choice leaves out (why, and how to include
// one) in the checks, the text report and the JSON; and no accept_local WARN left on a DGX Spark
// after the doctor's own fixes.
#include <gtest/gtest.h>

#include <sstream>

#include "fixtures.h"
#include "tools/doctor/report.h"

namespace mesh::doctor {
namespace {

using testing::add_netdevs;
using testing::contains;
using testing::iface;

// A host of the issue 29 setup: cables to b and c, and a management leg that holds the default
// route (no NCCL_MESH_IFNAME).
Inventory managed_node() {
  Inventory inv;
  inv.interfaces = {iface("lo", "127.0.0.1/8", 65536), iface("mgmt0", "198.19.255.1/24", 1500),
                    iface("cb", "198.18.1.1/24"), iface("cc", "198.18.2.1/30")};
  inv.interfaces[1].default_route = true;
  add_netdevs(inv);
  return inv;
}

TEST(MeshInterfaces, ManagementNetworkIsLeftOutAndTheReportSaysWhyAndHow) {
  const Inventory inv = managed_node();
  const Model m = build_model(inv);
  const Findings f = check_mesh_interfaces(inv, m);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(f[0].message, "mgmt0 (default-route)")) << f[0].message;
  EXPECT_FALSE(contains(f[0].subject, "mgmt0")) << f[0].subject;

  const Findings all = run_local_checks(inv, m);
  const std::vector<PeerRoute> routes;
  const std::vector<PeerLink> links;
  const Report r{inv, m, all, false, false, routes, links};
  std::ostringstream text;
  print_text(text, r);
  EXPECT_TRUE(contains(text.str(), "skips  mgmt0 198.19.255.1/24: carries the IPv4 default route"))
      << text.str();
  EXPECT_TRUE(contains(text.str(), "to use it: set NCCL_MESH_IFNAME==cb,cc,mgmt0")) << text.str();

  const nlohmann::json j = to_json(r);
  const auto& left = j.at("selection").at("left_out");
  bool found = false;
  for (const auto& e : left) {
    if (e.at("name") != "mgmt0") continue;
    found = true;
    EXPECT_EQ(e.at("reason"), "default-route");
    EXPECT_TRUE(contains(e.at("include").get<std::string>(), "NCCL_MESH_IFNAME==cb,cc,mgmt0"));
  }
  EXPECT_TRUE(found) << left.dump();
  for (const auto& i : j.at("interfaces")) {
    if (i.at("name") == "mgmt0") {
      EXPECT_EQ(i.at("excluded_reason"), "default-route");
    }
  }
}

TEST(MeshInterfaces, WarnNamesTheLeftOutCandidatesWhenNoCableRemains) {
  Inventory inv = managed_node();
  inv.interfaces.resize(2);  // lo and mgmt0 only
  const Findings f = check_mesh_interfaces(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].message, "mgmt0 (198.19.255.1/24)")) << f[0].message;
  EXPECT_TRUE(contains(f[0].fix, "NCCL_MESH_IFNAME==mgmt0")) << f[0].fix;
}

TEST(AcceptLocal, OkForThePciHalvesOfAPortAfterTheDoctorsOwnFixes) {
  // A DGX Spark: two PCI functions of one ConnectX-7 port on the cable's subnet, with the
  // arp_ignore/arp_announce lines the doctor prints applied. Nothing left to warn about
  // (issue 29: the accept_local WARN stayed after every fix).
  Inventory inv;
  inv.interfaces = {
      iface("p0a", "198.18.20.1/24", 9000, 200000, "/sys/devices/pci0000:00/0000:01:00.0"),
      iface("p0b", "198.18.20.2/24", 9000, 200000, "/sys/devices/pci0000:00/0000:01:00.1")};
  add_netdevs(inv);
  inv.sysctls = {{"net.ipv4.conf.all.accept_local", "0"},
                 {"net.ipv4.conf.all.rp_filter", "2"},
                 {"net.ipv4.conf.all.arp_ignore", "1"},
                 {"net.ipv4.conf.all.arp_announce", "2"}};
  const Findings f = check_accept_local(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk) << f[0].message;
  EXPECT_TRUE(contains(f[0].message, "halves")) << f[0].message;
  EXPECT_EQ(worst(check_arp_halves(inv, build_model(inv))), Verdict::kOk);
}

}  // namespace
}  // namespace mesh::doctor
