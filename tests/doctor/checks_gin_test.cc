// SPDX-License-Identifier: Apache-2.0
// The `gin` check over synthetic facts: exported tables, memory types with and without the CUDA
// driver, the VMM/GPUDirect gate per GPU and per NCCL version, transport, NCCL's symbol lookup
// and the NCCL_* settings that turn GIN off. Never "fail": a host without GPU is fine.
#include <gtest/gtest.h>

#include "fixtures.h"

namespace mesh::doctor {
namespace {

using testing::contains;

Inventory host_with_plugin() {
  Inventory inv;
  inv.gin.plugin_path = "/usr/lib/libnccl-net-mesh.so";
  inv.gin.exported = {std::begin(kGinSymbols), std::end(kGinSymbols)};
  inv.gin.cuda_error = "libcuda.so.1 not loadable (no such file)";
  inv.gin.nccl_error = "libnccl.so.2: cannot open shared object file";
  return inv;
}

const Finding& by_subject(const Findings& f, const std::string& subject) {
  for (const Finding& x : f) {
    if (x.subject == subject) return x;
  }
  static const Finding none{"gin", Verdict::kFail, "<missing>", "", ""};
  ADD_FAILURE() << "no finding about " << subject;
  return none;
}

TEST(GinCheck, HostWithoutGpuIsOkHostMemoryOnlyAndCannotTellNccl) {
  const Findings f = check_gin(host_with_plugin());
  EXPECT_EQ(worst(f), Verdict::kOk);
  for (const Finding& x : f) EXPECT_EQ(x.check, "gin");
  EXPECT_TRUE(contains(by_subject(f, "exports").message, "ncclRmaPlugin_v15"));
  EXPECT_TRUE(contains(by_subject(f, "memory").message, "host memory only"));
  EXPECT_TRUE(contains(by_subject(f, "nccl").message, "could not tell the NCCL version"));
  EXPECT_TRUE(contains(by_subject(f, "transport").message, "TCP (no usable RDMA device"));
}

TEST(GinCheck, DriverLoadedMeansGpuMemory) {
  Inventory inv = host_with_plugin();
  inv.gin.cuda_loaded = true;
  inv.gin.gpus = {{0, 9, 0, 1}};
  const Findings f = check_gin(inv);
  EXPECT_EQ(worst(f), Verdict::kOk);
  EXPECT_TRUE(contains(by_subject(f, "memory").message, "GPU memory (NCCL_PTR_CUDA"));
  EXPECT_TRUE(contains(by_subject(f, "gpu 0").message, "gate passes"));
}

TEST(GinCheck, NvidiaDriverWithoutLibcudaWarns) {
  Inventory inv = host_with_plugin();
  inv.nvidia_driver = "NVRM version: NVIDIA UNIX Open Kernel Module 580.95.05";
  const Findings f = check_gin(inv);
  const Finding& m = by_subject(f, "memory");
  EXPECT_EQ(m.verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(m.fix, "libcuda.so.1"));
}

TEST(GinCheck, VmmAttributeZeroWarnsUnlessTheNcclFoundPredatesTheGate) {
  Inventory inv = host_with_plugin();
  inv.gin.cuda_loaded = true;
  inv.gin.gpus = {{0, 12, 1, 0}};  // as reported for DGX Spark GB10
  Finding g = by_subject(check_gin(inv), "gpu 0");
  EXPECT_EQ(g.verdict, Verdict::kWarn) << "unknown NCCL: assume the gate";
  EXPECT_TRUE(contains(g.message, "GIN type to NONE"));
  inv.gin.nccl_version = 22809;
  g = by_subject(check_gin(inv), "gpu 0");
  EXPECT_EQ(g.verdict, Verdict::kOk) << g.message;
  EXPECT_TRUE(contains(g.message, "2.28.9) does not check it"));
  inv.gin.nccl_version = 22907;
  EXPECT_EQ(by_subject(check_gin(inv), "gpu 0").verdict, Verdict::kWarn);
}

TEST(GinCheck, OldGpuAndUnreadableAttributeWarn) {
  Inventory inv = host_with_plugin();
  inv.gin.cuda_loaded = true;
  inv.gin.gpus = {{0, 6, 0, 1}, {1, 9, 0, std::nullopt}};
  const Findings f = check_gin(inv);
  EXPECT_TRUE(contains(by_subject(f, "gpu 0").message, "below 7.0"));
  EXPECT_EQ(by_subject(f, "gpu 1").verdict, Verdict::kWarn);
  EXPECT_NE(worst(f), Verdict::kFail);
}

TEST(GinCheck, NcclLookupPerRelease) {
  EXPECT_TRUE(nccl_gin_lookup(22803).symbols.empty());
  EXPECT_EQ(nccl_gin_lookup(22809).symbols, std::vector<std::string>{"ncclGinPlugin_v11"});
  EXPECT_TRUE(contains(nccl_gin_lookup(22809).where, "net plugin's library only"));
  EXPECT_EQ(nccl_gin_lookup(22907).symbols.front(), "ncclGinPlugin_v12");
  EXPECT_EQ(nccl_gin_lookup(23004).symbols.front(), "ncclGinPlugin_v13");
  EXPECT_EQ(nccl_gin_lookup(23007).symbols.front(), "ncclRmaPlugin_v14");
  EXPECT_EQ(nccl_gin_lookup(23102).symbols.front(), "ncclRmaPlugin_v15");
  EXPECT_FALSE(nccl_gin_lookup(23203).known);
  EXPECT_EQ(nccl_version_text(22809), "2.28.9");
  EXPECT_EQ(nccl_version_text(23007), "2.30.7");
}

TEST(GinCheck, NcclFoundSaysWhichTableItTakes) {
  Inventory inv = host_with_plugin();
  inv.gin.nccl_version = 22809;
  inv.gin.nccl_path = "/usr/lib/libnccl.so.2";
  Finding n = by_subject(check_gin(inv), "nccl");
  EXPECT_EQ(n.verdict, Verdict::kOk);
  EXPECT_TRUE(contains(n.message, "will take ncclGinPlugin_v11")) << n.message;
  EXPECT_TRUE(contains(n.message, "ginForceEnable")) << n.message;
  // A plugin build without v11 (only the newer tables) leaves 2.28.9 without GIN.
  inv.gin.exported = {"ncclRmaPlugin_v14", "ncclRmaPlugin_v15"};
  n = by_subject(check_gin(inv), "nccl");
  EXPECT_EQ(n.verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(n.message, "none of which the plugin exports"));
  EXPECT_EQ(by_subject(check_gin(inv), "exports").verdict, Verdict::kWarn);
  // Too old and too new.
  inv.gin.nccl_version = 22703;
  EXPECT_TRUE(contains(by_subject(check_gin(inv), "nccl").message, "no GIN plugin interface"));
  inv.gin.nccl_version = 23203;
  EXPECT_EQ(by_subject(check_gin(inv), "nccl").verdict, Verdict::kWarn);
}

TEST(GinCheck, PluginNotFoundWarnsAndFallsBackToThisBuildsList) {
  Inventory inv = host_with_plugin();
  inv.gin.plugin_path.clear();
  inv.gin.exported.clear();
  inv.gin.plugin_error = "libnccl-net-mesh.so: cannot open shared object file";
  inv.gin.nccl_version = 23007;
  const Findings f = check_gin(inv);
  EXPECT_EQ(by_subject(f, "exports").verdict, Verdict::kWarn);
  EXPECT_TRUE(contains(by_subject(f, "exports").fix, "NCCL_NET_PLUGIN"));
  EXPECT_TRUE(contains(by_subject(f, "nccl").message, "will take ncclRmaPlugin_v14"));
  inv.gin.plugin_path = "/opt/old/libnccl-net-mesh.so";  // loaded, but an old build
  EXPECT_TRUE(contains(by_subject(check_gin(inv), "exports").message, "exports no GIN"));
}

TEST(GinCheck, TransportFollowsTheRdmaStackAndTheSetting) {
  Inventory inv = host_with_plugin();
  topology::RdmaPort p;
  p.device = "mlx5_0";
  inv.rdma_ports.push_back(p);
  inv.libibverbs_loadable = true;
  inv.uverbs_devices = 1;
  EXPECT_TRUE(contains(by_subject(check_gin(inv), "transport").message, "RDMA one-sided"));
  inv.settings.transport = TransportMode::kTcp;
  EXPECT_TRUE(contains(by_subject(check_gin(inv), "transport").message, "TCP on every cable"));
}

TEST(GinCheck, SettingsThatTurnGinOffWarn) {
  Inventory inv = host_with_plugin();
  EXPECT_EQ(by_subject(check_gin(inv), "settings").verdict, Verdict::kOk);
  inv.env = {{"NCCL_GIN_ENABLE", "0"}, {"NCCL_CUMEM_ENABLE", "0"},  {"NCCL_WIN_ENABLE", "0"},
             {"NCCL_GIN_TYPE", "3"},   {"NCCL_GIN_PLUGIN", "none"}, {"NCCL_RMA_PLUGIN", "ofi"}};
  const Findings f = check_gin(inv);
  for (const char* name : {"NCCL_GIN_ENABLE", "NCCL_CUMEM_ENABLE", "NCCL_WIN_ENABLE",
                           "NCCL_GIN_TYPE", "NCCL_GIN_PLUGIN", "NCCL_RMA_PLUGIN"}) {
    EXPECT_EQ(by_subject(f, name).verdict, Verdict::kWarn) << name;
  }
  EXPECT_TRUE(contains(by_subject(f, "NCCL_GIN_TYPE").fix, "NCCL_GIN_TYPE=2"));
  inv.env = {{"NCCL_GIN_TYPE", "2"}, {"NCCL_RMA_PLUGIN", "mesh"}};
  EXPECT_EQ(by_subject(check_gin(inv), "settings").verdict, Verdict::kOk);
}

}  // namespace
}  // namespace mesh::doctor
