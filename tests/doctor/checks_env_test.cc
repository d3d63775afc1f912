// SPDX-License-Identifier: Apache-2.0
// Environment checks over synthetic inventories: NCCL variables that bypass the plugin,
// NCCL_MESH_* values the plugin rejects, NCCL_MESH_IFNAME that matches nothing.
#include <gtest/gtest.h>

#include "fixtures.h"

namespace mesh::doctor {
namespace {

using testing::add_netdevs;
using testing::contains;
using testing::iface;

Inventory with_env(std::map<std::string, std::string> env) {
  Inventory inv;
  inv.interfaces = {iface("lo", "127.0.0.1/8", 65536), iface("enp1s0f0np0", "198.18.1.1/24"),
                    iface("enp1s0f1np1", "198.18.2.1/24")};
  add_netdevs(inv);
  inv.env = std::move(env);
  inv.settings = settings_from_env(inv.env);
  return inv;
}

TEST(NcclEnv, OkWhenNcclWillLoadThePlugin) {
  for (const char* plugin : {"mesh", "/opt/nccl-mesh/lib/libnccl-net-mesh.so",
                             "libnccl-net-mesh.so", "/opt/rocm/lib/librccl-net-mesh.so"}) {
    Inventory inv = with_env({{"NCCL_NET", "mesh"}, {"NCCL_NET_PLUGIN", plugin}});
    if (contains(plugin, "/")) inv.net_plugin_file_exists = true;
    const Findings f = check_nccl_env(inv);
    ASSERT_EQ(f.size(), 1u) << plugin;
    EXPECT_EQ(f[0].verdict, Verdict::kOk) << plugin;
  }
}

TEST(NcclEnv, WarnWhenUnset) {
  const Findings f = check_nccl_env(with_env({}));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_EQ(f[0].fix.rfind("export NCCL_NET=Mesh", 0), 0u) << f[0].fix;
  EXPECT_EQ(f[1].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[1].fix, "NCCL_NET_PLUGIN=mesh")) << f[1].fix;
}

TEST(NcclEnv, FailWhenNcclNetSelectsAnotherTransport) {
  const Findings f = check_nccl_env(with_env({{"NCCL_NET", "IB"}, {"NCCL_NET_PLUGIN", "mesh"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kFail);
  EXPECT_EQ(f[0].subject, "NCCL_NET=IB");
}

TEST(NcclEnv, FailWhenPluginVariableNamesAnotherPluginOrNone) {
  for (const char* plugin : {"none", "aws-ofi", "/usr/lib/libnccl-net.so"}) {
    Inventory inv = with_env({{"NCCL_NET", "Mesh"}, {"NCCL_NET_PLUGIN", plugin}});
    inv.net_plugin_file_exists = true;
    const Findings f = check_nccl_env(inv);
    ASSERT_EQ(f.size(), 1u) << plugin;
    EXPECT_EQ(f[0].verdict, Verdict::kFail) << plugin;
  }
}

TEST(NcclEnv, PluginListOrderMattersOnlyWithoutNcclNetMesh) {
  Findings f = check_nccl_env(with_env({{"NCCL_NET_PLUGIN", "aws-ofi,mesh"}}));
  ASSERT_EQ(f.size(), 2u);  // NCCL_NET unset, and mesh is not first
  EXPECT_EQ(f[1].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[1].message, "not the first entry")) << f[1].message;

  f = check_nccl_env(with_env({{"NCCL_NET", "Mesh"}, {"NCCL_NET_PLUGIN", "aws-ofi,mesh"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(NcclEnv, FailWhenPluginPathDoesNotExist) {
  Inventory inv =
      with_env({{"NCCL_NET", "Mesh"}, {"NCCL_NET_PLUGIN", "/nope/libnccl-net-mesh.so"}});
  inv.net_plugin_file_exists = false;
  const Findings f = check_nccl_env(inv);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(f[0].message, "does not exist")) << f[0].message;
}

TEST(NcclEnv, IbHcaMattersOnlyWithoutNcclNetMesh) {
  Findings f = check_nccl_env(
      with_env({{"NCCL_NET", "Mesh"}, {"NCCL_NET_PLUGIN", "mesh"}, {"NCCL_IB_HCA", "mlx5_0"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);

  f = check_nccl_env(with_env({{"NCCL_NET_PLUGIN", "mesh"}, {"NCCL_IB_HCA", "mlx5_0"}}));
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[1].verdict, Verdict::kWarn);
  EXPECT_EQ(f[1].subject, "NCCL_IB_HCA=mlx5_0");
}

TEST(MeshSettings, OkWhenUnsetOrValid) {
  Findings f = check_mesh_settings(with_env({}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);

  f = check_mesh_settings(with_env({{"NCCL_MESH_TCP_STREAMS", "8"},
                                    {"NCCL_MESH_TCP_MIN_CHUNK", "256K"},
                                    {"NCCL_MESH_GID_INDEX", "3"},
                                    {"NCCL_SOCKET_IFNAME", "whatever"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(f[0].message, "3 NCCL_MESH_* setting(s)")) << f[0].message;
}

TEST(MeshSettings, FailOnValuesThePluginRejects) {
  const Inventory inv = with_env({{"NCCL_MESH_TCP_STREAMS", "abc"},
                                  {"NCCL_MESH_CONNECT_TIMEOUT_MS", "5"},
                                  {"NCCL_MESH_GID_INDEX", "-1"}});
  const Findings f = check_mesh_settings(inv);
  ASSERT_EQ(f.size(), 3u);
  for (const Finding& x : f) EXPECT_EQ(x.verdict, Verdict::kFail) << x.subject;
  // std::map order: CONNECT_TIMEOUT_MS, GID_INDEX, TCP_STREAMS.
  EXPECT_TRUE(contains(f[0].message, "outside 100..3600000")) << f[0].message;
  EXPECT_TRUE(contains(f[0].message, "default 30000")) << f[0].message;
  EXPECT_TRUE(contains(f[1].message, "outside 0..65535")) << f[1].message;
  EXPECT_TRUE(contains(f[2].message, "not an integer")) << f[2].message;
  EXPECT_TRUE(contains(f[2].fix, "1..64")) << f[2].fix;
  // The plugin keeps the default, and so does the doctor's view of the settings.
  EXPECT_EQ(inv.settings.tcp_streams, 4);
}

TEST(MeshSettings, WarnOnUnknownNameWithSuggestion) {
  const Findings f = check_mesh_settings(with_env({{"NCCL_MESH_IFNAMES", "eth"}}));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].fix, "did you mean NCCL_MESH_IFNAME?")) << f[0].fix;
}

TEST(Ifname, OkWhenUnsetOrMatching) {
  Inventory inv = with_env({});
  Findings f = check_ifname(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);

  inv = with_env({{"NCCL_MESH_IFNAME", "enp1s0f"}});
  f = check_ifname(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
  EXPECT_TRUE(contains(f[0].message, "enp1s0f0np0, enp1s0f1np1")) << f[0].message;

  inv = with_env({{"NCCL_MESH_IFNAME", "^=enp1s0f1np1"}});
  f = check_ifname(inv, build_model(inv));
  EXPECT_EQ(f[0].verdict, Verdict::kOk);
}

TEST(Ifname, FailWhenMatchingNothing) {
  const Inventory inv = with_env({{"NCCL_MESH_IFNAME", "eth"}});
  const Findings f = check_ifname(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kFail);
  EXPECT_TRUE(contains(f[0].message, "matches no interface")) << f[0].message;
  EXPECT_TRUE(contains(f[0].message, "enp1s0f0np0")) << f[0].message;
  // And the plugin indeed uses nothing.
  EXPECT_EQ(worst(check_mesh_interfaces(inv, build_model(inv))), Verdict::kFail);
}

TEST(Ifname, ExactNamesMustMatchExactly) {
  const Inventory inv = with_env({{"NCCL_MESH_IFNAME", "=enp1s0f"}});
  const Findings f = check_ifname(inv, build_model(inv));
  EXPECT_EQ(f[0].verdict, Verdict::kFail);
}

TEST(Ifname, WarnOnPartlyMatchingListOrUselessExclusion) {
  Inventory inv = with_env({{"NCCL_MESH_IFNAME", "enp1s0f0,ehtX"}});
  Findings f = check_ifname(inv, build_model(inv));
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(f[0].message, "ehtX")) << f[0].message;

  inv = with_env({{"NCCL_MESH_IFNAME", "^docker"}});
  f = check_ifname(inv, build_model(inv));
  EXPECT_EQ(f[0].verdict, Verdict::kWarn);
}

TEST(SettingsFromEnv, UsesThePluginsParser) {
  std::vector<std::string> problems;
  const Settings s = settings_from_env({{"NCCL_MESH_IFNAME", "lo"},
                                        {"NCCL_MESH_TCP_STREAMS", "2"},
                                        {"NCCL_MESH_TCP_MIN_CHUNK", "1x"}},
                                       &problems);
  EXPECT_EQ(s.ifname, "lo");
  EXPECT_EQ(s.tcp_streams, 2);
  EXPECT_EQ(s.tcp_min_chunk, 131072);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_TRUE(contains(problems[0], "NCCL_MESH_TCP_MIN_CHUNK")) << problems[0];
}

}  // namespace
}  // namespace mesh::doctor
