// SPDX-License-Identifier: Apache-2.0
// What NCCL reads from the plugin before any connection: the table's name, devices() and
// getProperties(), checked against the bounds NCCL enforces (section 3 of the ABI notes).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "tests/fixture.h"

namespace conformance {
namespace {

class PropertiesTest : public VersionedTest {};

TEST_P(PropertiesTest, TableIsNamedMesh) {
  // NCCL_NET=Mesh selects the plugin by this name (strcasecmp).
  ASSERT_NE(net().name(), nullptr);
  EXPECT_STREQ(net().name(), "Mesh");
}

TEST_P(PropertiesTest, EveryDeviceHasPropertiesNcclAccepts) {
  int ndev = 0;
  ASSERT_EQ(net().devices(&ndev), ncclSuccess);
  ASSERT_GE(ndev, 1);
  std::set<std::string> names;
  for (int dev = 0; dev < ndev; ++dev) {
    SCOPED_TRACE("device " + std::to_string(dev));
    DeviceProps p;
    ASSERT_EQ(net().get_properties(dev, &p), ncclSuccess);
    // The name is the topology key: NULL crashes NCCL, duplicates merge distinct NICs.
    ASSERT_NE(p.name, nullptr);
    EXPECT_TRUE(names.insert(p.name).second) << "duplicate device name " << p.name;
    EXPECT_GE(p.max_recvs, 1);
    if (p.has_device_type) {  // v7+; NCCL's v6 shim reports HOST itself
      EXPECT_EQ(p.net_device_type, NCCL_NET_DEVICE_HOST) << "a host plugin must not claim offload";
      EXPECT_EQ(p.net_device_version, 0) << "NCCL_NET_DEVICE_INVALID_VERSION for a host device";
    }
    EXPECT_GT(p.speed, 0) << "Mbps; NCCL's bandwidth model needs a positive speed";
    EXPECT_NE(p.ptr_support & NCCL_PTR_HOST, 0) << "ptrSupport " << p.ptr_support;
    if (p.has_v9_fields) {
      // NCCL rejects the connection with "invalid value for maxP2pBytes" otherwise.
      EXPECT_GT(p.max_p2p_bytes, 0u);
      EXPECT_LE(p.max_p2p_bytes, NCCL_MAX_NET_SIZE_BYTES);
      EXPECT_EQ(p.vprops.ndevs, 1);
      EXPECT_EQ(p.vprops.devs[0], dev);
    }
    // NCCL keeps the name pointer and calls getProperties again from several places.
    const std::string first_name = p.name;
    DeviceProps again;
    ASSERT_EQ(net().get_properties(dev, &again), ncclSuccess);
    ASSERT_NE(again.name, nullptr);
    EXPECT_EQ(first_name, again.name);
    EXPECT_EQ(first_name, p.name) << "the first name pointer no longer holds the name";
  }
}

MESH_INSTANTIATE_ALL_VERSIONS(PropertiesTest);

// NCCL calls these members without checking them for NULL (finalize included, in v11).
template <typename Table>
std::vector<std::string> missing_members(const Table& t) {
  std::vector<std::string> missing;
  const auto need = [&](const void* p, const char* name) {
    if (p == nullptr) missing.push_back(name);
  };
  need(t.name, "name");
  need(reinterpret_cast<const void*>(t.init), "init");
  need(reinterpret_cast<const void*>(t.devices), "devices");
  need(reinterpret_cast<const void*>(t.getProperties), "getProperties");
  need(reinterpret_cast<const void*>(t.listen), "listen");
  need(reinterpret_cast<const void*>(t.connect), "connect");
  need(reinterpret_cast<const void*>(t.accept), "accept");
  need(reinterpret_cast<const void*>(t.regMr), "regMr");
  need(reinterpret_cast<const void*>(t.deregMr), "deregMr");
  need(reinterpret_cast<const void*>(t.isend), "isend");
  need(reinterpret_cast<const void*>(t.irecv), "irecv");
  need(reinterpret_cast<const void*>(t.test), "test");
  need(reinterpret_cast<const void*>(t.closeSend), "closeSend");
  need(reinterpret_cast<const void*>(t.closeRecv), "closeRecv");
  need(reinterpret_cast<const void*>(t.closeListen), "closeListen");
  return missing;
}

TEST(PluginTables, MembersNcclCallsAreSet) {
  for (int v : kVersions) {
    SCOPED_TRACE(std::string("v").append(std::to_string(v)));
    std::string error;
    const void* table = find_table(plugin_path(), v, &error);
    ASSERT_NE(table, nullptr) << error;
    std::vector<std::string> missing;
    switch (v) {
      case 6:
        missing = missing_members(*static_cast<const ncclNet_v6_t*>(table));
        break;
      case 7:
        missing = missing_members(*static_cast<const ncclNet_v7_t*>(table));
        break;
      case 8:
        missing = missing_members(*static_cast<const ncclNet_v8_t*>(table));
        break;
      case 9:
        missing = missing_members(*static_cast<const ncclNet_v9_t*>(table));
        break;
      case 10:
        missing = missing_members(*static_cast<const ncclNet_v10_t*>(table));
        break;
      case 11: {
        const auto* t11 = static_cast<const ncclNet_v11_t*>(table);
        missing = missing_members(*t11);
        // 2.28.9 calls finalize unconditionally, even after a failed init.
        if (t11->finalize == nullptr) missing.push_back("finalize");
        break;
      }
      default: {
        const auto* t12 = static_cast<const ncclNet_v12_t*>(table);
        missing = missing_members(*t12);
        if (t12->finalize == nullptr) missing.push_back("finalize");
      }
    }
    EXPECT_TRUE(missing.empty()) << "NULL members:" << join_lines(missing);
  }
}

// One library exports every table; NCCL uses whichever it probes first, so the tables must
// describe the same devices.
TEST(PropertiesAcrossVersions, AllTablesDescribeTheSameDevices) {
  std::map<int, std::vector<std::string>> names;
  std::map<int, std::vector<int>> speeds;
  for (int v : kVersions) {
    SCOPED_TRACE(std::string("v").append(std::to_string(v)));
    std::string error;
    auto net = open_net(plugin_path(), v, &error);
    ASSERT_TRUE(net) << error;
    void* ctx = nullptr;
    ASSERT_EQ(net->init(0xA11, &ctx), ncclSuccess);
    int ndev = 0;
    ASSERT_EQ(net->devices(&ndev), ncclSuccess);
    for (int dev = 0; dev < ndev; ++dev) {
      DeviceProps p;
      ASSERT_EQ(net->get_properties(dev, &p), ncclSuccess);
      ASSERT_NE(p.name, nullptr);
      names[v].push_back(p.name);
      speeds[v].push_back(p.speed);
    }
    EXPECT_EQ(net->finalize(ctx), ncclSuccess);
  }
  for (int v : kVersions) {
    EXPECT_EQ(names[v], names[12]) << "v" << v << " vs v12 device names";
    EXPECT_EQ(speeds[v], speeds[12]) << "v" << v << " vs v12 speeds";
  }
}

}  // namespace
}  // namespace conformance
