// SPDX-License-Identifier: Apache-2.0
// The safe default choice of cables (issue 29): without NCCL_MESH_IFNAME the plugin leaves out
// the management network (default route), bridges, tunnels, VPN and container interfaces and
// switched subnets; each left out with a reason and how to include it; NCCL_MESH_IFNAME still
// takes anything it names. Over synthetic interface tables and synthetic sysfs/proc trees.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "topology/cable_facts.h"
#include "topology/interface.h"
#include "topology/selection.h"

namespace mesh::topology {
namespace {

namespace fs = std::filesystem;
using Names = std::vector<std::string>;

constexpr uint32_t ip(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return (a << 24) | (b << 16) | (c << 8) | d;
}

Interface nic(const std::string& name, uint32_t addr, uint8_t prefix) {
  Interface itf;
  itf.name = name;
  itf.addr = {addr, prefix};
  itf.up = true;
  return itf;
}

Interface loopback() {
  Interface itf = nic("lo", ip(127, 0, 0, 1), 8);
  itf.loopback = true;
  return itf;
}

// A management leg as on a real host: a /24 holding the default route, two other hosts and
// the gateway in the neighbour table.
Interface mgmt() {
  Interface itf = nic("mgmt0", ip(198, 19, 255, 1), 24);
  itf.default_route = true;
  itf.neighbours = {ip(198, 19, 255, 2), ip(198, 19, 255, 3), ip(198, 19, 255, 254)};
  return itf;
}

// A point-to-point cable (veth in the namespace tests) with its one peer answering.
Interface cable(const std::string& name, uint32_t addr, uint8_t prefix, uint32_t peer) {
  Interface itf = nic(name, addr, prefix);
  itf.neighbours = {peer};
  return itf;
}

Names names_of(const std::vector<Interface>& v) {
  Names out;
  for (const Interface& i : v) out.push_back(i.name);
  return out;
}

// The exclusion of `name`; one named "(not left out)" when there is none.
Exclusion left_out(const Selection& s, const std::string& name) {
  for (const Exclusion& e : s.left_out) {
    if (e.itf.name == name) return e;
  }
  Exclusion none;
  none.itf.name = "(not left out)";
  none.reason = static_cast<LeftOut>(-1);  // equal to no real reason
  return none;
}

// ---------------------------------------------------------------------------------------------
// select_interfaces: the automatic rules

TEST(CableDefaults, DefaultRouteInterfaceIsLeftOutWithReasonAndHint) {
  Interface m = mgmt();
  m.neighbours.clear();  // the default route alone decides
  const std::vector<Interface> all = {loopback(), m,
                                      cable("cb", ip(198, 18, 1, 1), 24, ip(198, 18, 1, 2)),
                                      cable("cc", ip(198, 18, 2, 1), 30, ip(198, 18, 2, 2))};
  const Selection s = select_interfaces(all, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"cb", "cc"}));
  EXPECT_FALSE(s.loopback_fallback);
  const Exclusion e = left_out(s, "mgmt0");
  ASSERT_EQ(e.itf.name, "mgmt0");
  EXPECT_EQ(e.reason, LeftOut::kDefaultRoute);
  EXPECT_NE(e.why.find("default route"), std::string::npos) << e.why;
  EXPECT_EQ(e.include.rfind("set NCCL_MESH_IFNAME==cb,cc,mgmt0 ", 0), 0u) << e.include;
  // The note (logged at INFO, shown by the doctor) says both.
  const auto note = std::find_if(s.notes.begin(), s.notes.end(), [](const std::string& n) {
    return n.rfind("mgmt0 (198.19.255.1/24): ", 0) == 0;
  });
  ASSERT_NE(note, s.notes.end());
  EXPECT_NE(note->find("default route"), std::string::npos);
  EXPECT_NE(note->find("NCCL_MESH_IFNAME==cb,cc,mgmt0"), std::string::npos);
  EXPECT_TRUE(describe_missing_cables(s).empty());
}

TEST(CableDefaults, BridgesTunnelsAndContainerInterfacesAreLeftOut) {
  Interface docker = nic("docker0", ip(172, 17, 0, 1), 16);
  docker.not_a_cable = not_a_cable_reason({"docker0", true, false, false, false, 1, "bridge"});
  Interface br = nic("br0", ip(10, 1, 0, 1), 24);  // a bridge with an ordinary name
  br.not_a_cable = not_a_cable_reason({"br0", true, false, false, false, 1, "bridge"});
  Interface tun = nic("vpn0", ip(10, 8, 0, 2), 24);
  tun.not_a_cable = not_a_cable_reason({"vpn0", false, false, true, false, 65534, ""});
  const std::vector<Interface> all = {docker, br, tun,
                                      cable("enp1s0", ip(10, 0, 1, 1), 30, ip(10, 0, 1, 2))};
  const Selection s = select_interfaces(all, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"enp1s0"}));
  for (const char* name : {"docker0", "br0", "vpn0"}) {
    const Exclusion e = left_out(s, name);
    ASSERT_EQ(e.itf.name, name);
    EXPECT_EQ(e.reason, LeftOut::kNotACable) << name;
    EXPECT_NE(e.include.find("NCCL_MESH_IFNAME==enp1s0," + std::string(name)), std::string::npos)
        << e.include;
  }
  EXPECT_NE(left_out(s, "br0").why.find("bridge"), std::string::npos);
  EXPECT_NE(left_out(s, "vpn0").why.find("tun"), std::string::npos);
}

TEST(CableDefaults, PointToPointVethWithOneNeighbourIsACable) {
  // The namespace tests' cables: veths (no bridge, no brport, no tun_flags, type 1, no DEVTYPE)
  // on /24, /30 and /31 subnets.
  const NetdevFacts veth{"cb", false, false, false, false, 1, ""};
  EXPECT_EQ(not_a_cable_reason(veth), "");
  Interface c24 = cable("cb", ip(198, 18, 1, 1), 24, ip(198, 18, 1, 2));
  Interface c31 = cable("cc", ip(198, 18, 3, 0), 31, ip(198, 18, 3, 1));
  const Selection s = select_interfaces({c24, c31}, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"cb", "cc"}));
  EXPECT_TRUE(s.left_out.empty());
}

TEST(CableDefaults, SubnetWhereSeveralHostsAnswerIsASwitch) {
  Interface lan = nic("eno1", ip(10, 10, 0, 5), 24);
  lan.neighbours = {ip(10, 10, 0, 6), ip(10, 10, 0, 7)};
  const Selection s = select_interfaces(
      {lan, cable("enp1s0", ip(10, 0, 1, 1), 30, ip(10, 0, 1, 2))}, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"enp1s0"}));
  const Exclusion e = left_out(s, "eno1");
  ASSERT_EQ(e.itf.name, "eno1");
  EXPECT_EQ(e.reason, LeftOut::kSwitch);
  EXPECT_NE(e.why.find("2 other hosts"), std::string::npos) << e.why;
  EXPECT_NE(e.why.find("10.10.0.0/24"), std::string::npos) << e.why;
}

TEST(CableDefaults, SparkHalvesShowTwoPeerAddressesAndStayCables) {
  // Both halves of a port on one subnet; the peer's two halves answer: one cable, not a switch.
  Interface a = nic("p0a", ip(198, 18, 20, 1), 24);
  Interface b = nic("p0b", ip(198, 18, 20, 2), 24);
  a.neighbours = {ip(198, 18, 20, 3), ip(198, 18, 20, 4)};
  b.neighbours = {ip(198, 18, 20, 3), ip(198, 18, 20, 4)};
  const Selection two = select_interfaces({a, b}, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(two.used), (Names{"p0a", "p0b"}));
  // A third answering address is more than one peer's port: a switch, both halves left out.
  a.neighbours.push_back(ip(198, 18, 20, 9));
  const Selection three = select_interfaces({a, b}, IfnameFilter::parse(""));
  EXPECT_TRUE(three.used.empty());
  EXPECT_EQ(left_out(three, "p0b").reason, LeftOut::kSwitch);
}

TEST(CableDefaults, LocalAddressesInTheNeighbourTableAreNotOtherHosts) {
  // Both ends of a cable in one host (a loopback test rig): the neighbour is this host.
  Interface x = nic("x0", ip(10, 5, 0, 1), 24);
  Interface y = nic("x1", ip(10, 5, 0, 2), 24);
  x.neighbours = {ip(10, 5, 0, 2), ip(10, 5, 0, 3)};
  const Selection s = select_interfaces({x, y}, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"x0", "x1"}));
}

// ---------------------------------------------------------------------------------------------
// NCCL_MESH_IFNAME

TEST(CableDefaults, InclusionListTakesWhatItNamesWhateverItLooksLike) {
  Interface docker = nic("docker0", ip(172, 17, 0, 1), 16);
  docker.not_a_cable = "a bridge (sysfs bridge/)";
  const std::vector<Interface> all = {loopback(), mgmt(), docker,
                                      cable("cb", ip(198, 18, 1, 1), 24, ip(198, 18, 1, 2))};
  const Selection s = select_interfaces(all, IfnameFilter::parse("=mgmt0,cb,docker0"));
  EXPECT_EQ(names_of(s.used), (Names{"mgmt0", "docker0", "cb"}));
  const Selection prefix = select_interfaces(all, IfnameFilter::parse("mgmt"));
  EXPECT_EQ(names_of(prefix.used), (Names{"mgmt0"}));
  EXPECT_FALSE(prefix.loopback_fallback);
}

TEST(CableDefaults, ExclusionListKeepsTheAutomaticRules) {
  // "^cc" removes names from the default choice; it does not switch the rules off.
  const std::vector<Interface> all = {mgmt(), cable("cb", ip(198, 18, 1, 1), 24, ip(198, 18, 1, 2)),
                                      cable("cc", ip(198, 18, 2, 1), 30, ip(198, 18, 2, 2))};
  const Selection s = select_interfaces(all, IfnameFilter::parse("^cc"));
  EXPECT_EQ(names_of(s.used), (Names{"cb"}));
  EXPECT_EQ(left_out(s, "mgmt0").reason, LeftOut::kDefaultRoute);
  EXPECT_EQ(left_out(s, "cc").reason, LeftOut::kFilter);
}

// ---------------------------------------------------------------------------------------------
// Loopback fallback and the WARN

TEST(CableDefaults, LoopbackFallbackWhenOnlyTheManagementNetworkIsLeft) {
  const Selection s = select_interfaces({loopback(), mgmt()}, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"lo"}));
  EXPECT_TRUE(s.loopback_fallback);
  const std::string warn = describe_missing_cables(s);
  EXPECT_NE(warn.find("mgmt0 (198.19.255.1/24)"), std::string::npos) << warn;
  EXPECT_NE(warn.find("default route"), std::string::npos) << warn;
  EXPECT_NE(warn.find("NCCL_MESH_IFNAME==mgmt0"), std::string::npos) << warn;
  EXPECT_NE(warn.find("only loopback"), std::string::npos) << warn;
  // The hint of a fallback names only the interface, not lo.
  EXPECT_EQ(left_out(s, "mgmt0").include.rfind("set NCCL_MESH_IFNAME==mgmt0 ", 0), 0u);
}

TEST(CableDefaults, NoWarnForAPlainSingleHostMachine) {
  // Loopback alone (nothing was left out by the automatic rules): a single-host run, quiet.
  const Selection s = select_interfaces({loopback()}, IfnameFilter::parse(""));
  EXPECT_TRUE(s.loopback_fallback);
  EXPECT_EQ(describe_missing_cables(s), "");
  // An explicit "lo" is a choice, not a missing cable.
  const Selection named = select_interfaces({loopback(), mgmt()}, IfnameFilter::parse("lo"));
  EXPECT_EQ(describe_missing_cables(named), "");
}

// ---------------------------------------------------------------------------------------------
// The facts: classification, /proc/net/route, /proc/net/arp

TEST(CableFacts, ClassifiesFromSysfsFactsFirst) {
  EXPECT_NE(not_a_cable_reason({"x", true, false, false, false, 1, "bridge"}).find("bridge"),
            std::string::npos);
  EXPECT_NE(not_a_cable_reason({"x", false, true, false, false, 1, ""}).find("bridge port"),
            std::string::npos);
  EXPECT_NE(not_a_cable_reason({"x", false, false, true, false, 65534, ""}).find("tun/tap"),
            std::string::npos);
  EXPECT_NE(not_a_cable_reason({"x", false, false, false, true, 1, "wlan"}).find("wireless"),
            std::string::npos);
  EXPECT_NE(
      not_a_cable_reason({"x", false, false, false, false, 65534, "wireguard"}).find("WireGuard"),
      std::string::npos);
  EXPECT_NE(not_a_cable_reason({"x", false, false, false, false, 1, "vxlan"}).find("VXLAN"),
            std::string::npos);
  EXPECT_NE(not_a_cable_reason({"x", false, false, false, false, 778, ""}).find("778"),
            std::string::npos);  // GRE
  // Cables: Ethernet (veth, PCI NICs, bonds, VLANs) and IPoIB.
  EXPECT_EQ(not_a_cable_reason({"enp1s0f0np0", false, false, false, false, 1, ""}), "");
  EXPECT_EQ(not_a_cable_reason({"bond0", false, false, false, false, 1, "bond"}), "");
  EXPECT_EQ(not_a_cable_reason({"enp1s0.100", false, false, false, false, 1, "vlan"}), "");
  EXPECT_EQ(not_a_cable_reason({"ib0", false, false, false, false, 32, ""}), "");
  EXPECT_EQ(not_a_cable_reason({"veth1a2b", false, false, false, false, 1, ""}), "");
}

TEST(CableFacts, ContainerAndVpnNamesWhereSysfsSaysNothing) {
  for (const char* name :
       {"docker0", "br-3f2a9c", "virbr0", "cni0", "flannel.1", "cali12ab", "cilium_host", "weave",
        "vxlan.calico", "tun0", "tap3", "wg0", "tailscale0", "ztabcdef12", "lxcbr0", "podman1"}) {
    EXPECT_NE(not_a_cable_reason({name, false, false, false, false, 1, ""}), "") << name;
  }
  for (const char* name : {"eth0", "eno1", "ens5", "cb", "ca0", "p0a", "mgmt0", "bridgeport"}) {
    EXPECT_EQ(not_a_cable_reason({name, false, false, false, false, 1, ""}), "") << name;
  }
}

TEST(CableFacts, DefaultRoutesOfAnyMetricFromProcNetRoute) {
  std::istringstream route(
      "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
      "eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
      "wlan0\t00000000\t0102A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n"
      "eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
      "cb\t000112C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
      "old\t00000000\t0103A8C0\t0002\t0\t0\t0\t00000000\t0\t0\t0\n");  // not RTF_UP
  EXPECT_EQ(parse_default_route_interfaces(route), (std::set<std::string>{"eth0", "wlan0"}));
}

TEST(CableFacts, OnlyCompleteNeighbourEntriesCount) {
  std::istringstream arp(
      "IP address       HW type     Flags       HW address            Mask     Device\n"
      "198.19.255.2     0x1         0x2         02:00:00:00:00:02     *        mgmt0\n"
      "198.19.255.9     0x1         0x0         00:00:00:00:00:00     *        mgmt0\n"
      "198.18.1.2       0x1         0x6         02:00:00:00:01:02     *        cb\n"
      "garbage\n");
  const std::vector<Neighbour> n = parse_arp_table(arp);
  ASSERT_EQ(n.size(), 2u);
  EXPECT_EQ(n[0].addr, ip(198, 19, 255, 2));
  EXPECT_EQ(n[0].dev, "mgmt0");
  EXPECT_EQ(n[1].addr, ip(198, 18, 1, 2));
  EXPECT_EQ(n[1].dev, "cb");
}

class FactsTree : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/nccl-mesh-facts-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  fs::path root_;
};

TEST_F(FactsTree, ReadsSysfsRouteAndArpIntoTheInterfaceTable) {
  write("sys/class/net/br0/type", "1\n");
  write("sys/class/net/br0/uevent", "DEVTYPE=bridge\nINTERFACE=br0\nIFINDEX=4\n");
  fs::create_directories(root_ / "sys/class/net/br0/bridge");
  write("sys/class/net/tap0/type", "1\n");
  write("sys/class/net/tap0/tun_flags", "0x1002\n");
  write("sys/class/net/cb/type", "1\n");
  write("sys/class/net/cb/uevent", "INTERFACE=cb\nIFINDEX=7\n");
  write("sys/class/net/mgmt0/type", "1\n");
  write("proc/net/route",
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
        "mgmt0\t00000000\tFEFF13C6\t0003\t0\t0\t0\t00000000\t0\t0\t0\n");
  write("proc/net/arp",
        "IP address       HW type     Flags       HW address            Mask     Device\n"
        "198.18.1.2       0x1         0x2         02:00:00:00:01:02     *        cb\n"
        "10.9.9.9         0x1         0x2         02:00:00:00:01:09     *        cb\n"
        "198.19.255.2     0x1         0x2         02:00:00:00:00:02     *        mgmt0\n");
  std::vector<Interface> itfs = {nic("br0", ip(10, 1, 0, 1), 24), nic("tap0", ip(10, 2, 0, 1), 24),
                                 nic("cb", ip(198, 18, 1, 1), 24),
                                 nic("mgmt0", ip(198, 19, 255, 1), 24)};
  read_cable_facts(itfs, (root_ / "sys").string(), (root_ / "proc").string());
  EXPECT_NE(itfs[0].not_a_cable.find("bridge"), std::string::npos) << itfs[0].not_a_cable;
  EXPECT_NE(itfs[1].not_a_cable.find("tun/tap"), std::string::npos) << itfs[1].not_a_cable;
  EXPECT_EQ(itfs[2].not_a_cable, "");
  EXPECT_FALSE(itfs[2].default_route);
  // Only the neighbour inside cb's subnet counts (10.9.9.9 is off-subnet).
  EXPECT_EQ(itfs[2].neighbours, (std::vector<uint32_t>{ip(198, 18, 1, 2)}));
  EXPECT_TRUE(itfs[3].default_route);
  EXPECT_EQ(itfs[3].neighbours, (std::vector<uint32_t>{ip(198, 19, 255, 2)}));
  const Selection s = select_interfaces(itfs, IfnameFilter::parse(""));
  EXPECT_EQ(names_of(s.used), (Names{"cb"}));
}

}  // namespace
}  // namespace mesh::topology
