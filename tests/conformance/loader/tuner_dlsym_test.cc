// SPDX-License-Identifier: Apache-2.0
// The tuner tables as NCCL 2.28.9 finds them (src/plugin/tuner.cc): dlopen the net plugin's
// library, dlsym ncclTunerPlugin_v5 (then _v4, _v3), init per communicator, getCollInfo on a cost
// table, finalize. Run with NCCL_MESH_EMULATE=ring:4:0 (set by CTest), so this process is rank 0
// of an emulated ring of 4. The decision depends on NCCL's node count and the settings alone:
// large all_reduce goes to Ring on 3 or more nodes (4, and 3 although this host has the 2 cables
// of a triangle), never on 2 nodes, never below NCCL_MESH_TUNER_MIN_BYTES; bad arguments must
// return errors, never crash.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <array>

#include "nccl/tuner.h"

namespace {

constexpr int kAlgos = 7;
constexpr int kProtos = 3;
using Table = std::array<float, kAlgos * kProtos>;

Table nccl_table() {
  Table t;
  t.fill(-1.0f);
  for (int p = 0; p < kProtos; ++p) {
    t[NCCL_ALGO_TREE * kProtos + p] = 10.0f;
    t[NCCL_ALGO_RING * kProtos + p] = 50.0f;
    t[NCCL_ALGO_PAT * kProtos + p] = 5.0f;
  }
  return t;
}

float** as_nccl_passes(Table& t) {
  return reinterpret_cast<float**>(t.data());
}

void* open_plugin() {
  void* lib = dlopen(MESH_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(lib, nullptr) << dlerror();
  return lib;
}

TEST(TunerDlsym, EveryVersionIsFound) {
  void* lib = open_plugin();
  ASSERT_NE(lib, nullptr);
  for (const char* sym : {"ncclTunerPlugin_v5", "ncclTunerPlugin_v4", "ncclTunerPlugin_v3"}) {
    EXPECT_NE(dlsym(lib, sym), nullptr) << sym;
  }
  EXPECT_EQ(dlsym(lib, "ncclTunerPlugin_v2"), nullptr) << "v2 has another layout: not exported";
}

TEST(TunerDlsym, V5SteersFromThreeNodesAndLargeSizesOnly) {
  ASSERT_STREQ(getenv("NCCL_MESH_EMULATE"), "ring:4:0") << "CTest sets the emulated ring";
  void* lib = open_plugin();
  ASSERT_NE(lib, nullptr);
  auto* tuner = static_cast<ncclTuner_v5_t*>(dlsym(lib, "ncclTunerPlugin_v5"));
  ASSERT_NE(tuner, nullptr);
  EXPECT_STREQ(tuner->name, "Mesh");
  ncclTunerConstants_v5_t constants{};
  ncclNvlDomainInfo_v5_t nvl{};

  void* ring = nullptr;
  ASSERT_EQ(tuner->init(&ring, 1, 4, 4, nullptr, &nvl, &constants), ncclSuccess);
  Table t = nccl_table();
  int channels = 0;
  ASSERT_EQ(tuner->getCollInfo(ring, ncclFuncAllReduce, 64 << 20, 1, as_nccl_passes(t), kAlgos,
                               kProtos, 0, &channels),
            ncclSuccess);
  for (int a = 0; a < kAlgos; ++a)
    EXPECT_EQ(t[static_cast<size_t>(a * kProtos)], a == NCCL_ALGO_RING ? 50.0f : -1.0f) << a;
  EXPECT_EQ(channels, 0) << "the channel count is left to NCCL";

  Table small = nccl_table();
  const Table before = small;
  ASSERT_EQ(tuner->getCollInfo(ring, ncclFuncAllReduce, 64 << 10, 1, as_nccl_passes(small), kAlgos,
                               kProtos, 0, &channels),
            ncclSuccess);
  EXPECT_EQ(small, before) << "64 KiB is below the default 128 KiB threshold";

  void* three = nullptr;  // 3 nodes: steered like 4, whatever this host's cables
  ASSERT_EQ(tuner->init(&three, 2, 3, 3, nullptr, &nvl, &constants), ncclSuccess);
  Table v = nccl_table();
  ASSERT_EQ(tuner->getCollInfo(three, ncclFuncAllReduce, 64 << 20, 1, as_nccl_passes(v), kAlgos,
                               kProtos, 0, &channels),
            ncclSuccess);
  EXPECT_EQ(v[NCCL_ALGO_PAT * kProtos], -1.0f);

  void* full = nullptr;  // 2 nodes: one cable, nothing to steer
  ASSERT_EQ(tuner->init(&full, 5, 2, 2, nullptr, &nvl, &constants), ncclSuccess);
  Table u = nccl_table();
  ASSERT_EQ(tuner->getCollInfo(full, ncclFuncAllReduce, 64 << 20, 1, as_nccl_passes(u), kAlgos,
                               kProtos, 0, &channels),
            ncclSuccess);
  EXPECT_EQ(u, before);

  // Bad arguments: errors, no crash, table untouched.
  EXPECT_NE(
      tuner->getCollInfo(ring, ncclFuncAllReduce, 1, 1, nullptr, kAlgos, kProtos, 0, &channels),
      ncclSuccess);
  EXPECT_NE(tuner->getCollInfo(ring, ncclFuncAllReduce, 1, 1, as_nccl_passes(u), 1, kProtos, 0,
                               &channels),
            ncclSuccess);
  EXPECT_NE(tuner->getCollInfo(ring, ncclFuncAllReduce, 1, 1, as_nccl_passes(u), kAlgos, -3, 0,
                               &channels),
            ncclSuccess);
  // A foreign object where the context belongs: its first 8 bytes are not the context tag (an
  // object smaller than the tag would be a read past it, as for any tagged pointer check).
  uint64_t not_a_context = 0;
  EXPECT_NE(tuner->getCollInfo(&not_a_context, ncclFuncAllReduce, 1, 1, as_nccl_passes(u), kAlgos,
                               kProtos, 0, &channels),
            ncclSuccess);
  EXPECT_EQ(u, before);
  EXPECT_NE(tuner->init(nullptr, 3, 4, 4, nullptr, &nvl, &constants), ncclSuccess);
  void* bad = nullptr;
  EXPECT_NE(tuner->init(&bad, 3, 2, 4, nullptr, &nvl, &constants), ncclSuccess)
      << "fewer ranks than nodes";

  EXPECT_EQ(tuner->finalize(ring), ncclSuccess);
  EXPECT_EQ(tuner->finalize(three), ncclSuccess);
  EXPECT_EQ(tuner->finalize(full), ncclSuccess);
  EXPECT_NE(tuner->finalize(nullptr), ncclSuccess);
}

TEST(TunerDlsym, V4AndV3TablesWork) {
  void* lib = open_plugin();
  ASSERT_NE(lib, nullptr);
  auto* v4 = static_cast<ncclTuner_v4_t*>(dlsym(lib, "ncclTunerPlugin_v4"));
  auto* v3 = static_cast<ncclTuner_v3_t*>(dlsym(lib, "ncclTunerPlugin_v3"));
  ASSERT_NE(v4, nullptr);
  ASSERT_NE(v3, nullptr);
  void* c4 = nullptr;
  void* c3 = nullptr;
  ASSERT_EQ(v4->init(4, 4, nullptr, &c4), ncclSuccess);
  ASSERT_EQ(v3->init(4, 4, nullptr, &c3), ncclSuccess);
  int channels = 0;
  Table t4 = nccl_table();
  Table t3 = nccl_table();
  ASSERT_EQ(v4->getCollInfo(c4, ncclFuncAllGather, 64 << 20, 1, as_nccl_passes(t4), kAlgos, kProtos,
                            1, &channels),
            ncclSuccess);
  ASSERT_EQ(v3->getCollInfo(c3, ncclFuncReduceScatter, 64 << 20, 1, as_nccl_passes(t3), kAlgos,
                            kProtos, &channels),
            ncclSuccess);
  EXPECT_EQ(t4[NCCL_ALGO_PAT * kProtos], -1.0f);
  EXPECT_EQ(t3[NCCL_ALGO_PAT * kProtos], -1.0f);
  EXPECT_EQ(t3[NCCL_ALGO_RING * kProtos], 50.0f);
  EXPECT_EQ(v4->destroy(c4), ncclSuccess);
  EXPECT_EQ(v3->destroy(c3), ncclSuccess);
}

}  // namespace
