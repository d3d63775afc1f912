// SPDX-License-Identifier: Apache-2.0
// One rank's tuner, as NCCL 2.28.9 drives it in that rank's process: dlopen the net plugin's
// library, ncclTunerPlugin_v5.init(commId, nRanks, nNodes), getCollInfo for every collective at
// sizes 1 B .. 1 GiB on the cost table NCCL gives every rank alike, finalize. Prints one line,
//   decisions <one digit per (collective, size): the algorithm NCCL would run>
// or "init-failed <rc>" (exit 0 either way; exit 2 on a usage or load error). The environment
// (NCCL_MESH_EMULATE for this rank's emulated host, NCCL_MESH_TUNER*) is the rank's own.
// tuner_agreement_world.py runs one per member rank of many communicators and compares.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "nccl/tuner.h"

namespace {

constexpr int kAlgos = 7;
constexpr int kProtos = 3;

// Tree and PAT cheaper than Ring at every size, so a steer always shows.
void fill_table(float* t, unsigned long long n_bytes) {
  for (int i = 0; i < kAlgos * kProtos; ++i) t[i] = static_cast<float>(NCCL_ALGO_PROTO_IGNORE);
  const float size_cost = static_cast<float>(n_bytes) / 1e4f;
  for (int p = 0; p < kProtos; ++p) {
    t[NCCL_ALGO_TREE * kProtos + p] = 10.0f + static_cast<float>(p) + size_cost;
    t[NCCL_ALGO_RING * kProtos + p] = 20.0f + static_cast<float>(p) + size_cost;
    t[NCCL_ALGO_PAT * kProtos + p] = 5.0f + static_cast<float>(p) + size_cost;
  }
}

int picked(const float* t) {
  int best = -1;
  for (int i = 0; i < kAlgos * kProtos; ++i) {
    if (t[i] >= 0.0f && (best < 0 || t[i] < t[best])) best = i;
  }
  return best < 0 ? -1 : best / kProtos;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s PLUGIN.so N_RANKS N_NODES\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  auto* tuner = static_cast<ncclTuner_v5_t*>(dlsym(lib, "ncclTunerPlugin_v5"));
  if (tuner == nullptr) {
    std::fprintf(stderr, "no ncclTunerPlugin_v5\n");
    return 2;
  }
  const size_t n_ranks = std::strtoul(argv[2], nullptr, 10);
  const size_t n_nodes = std::strtoul(argv[3], nullptr, 10);
  ncclTunerConstants_v5_t constants{};
  ncclNvlDomainInfo_v5_t nvl{};
  void* ctx = nullptr;
  const ncclResult_t rc = tuner->init(&ctx, 0xC0FFEE, n_ranks, n_nodes, nullptr, &nvl, &constants);
  if (rc != ncclSuccess) {
    std::printf("init-failed %d\n", static_cast<int>(rc));
    return 0;
  }
  std::string out;
  float table[kAlgos * kProtos];
  for (int coll = ncclFuncBroadcast; coll <= ncclFuncAllReduce; ++coll) {
    for (unsigned long long size = 1; size <= (1ull << 30); size <<= 2) {
      fill_table(table, size);
      int channels = 0;
      if (tuner->getCollInfo(ctx, static_cast<ncclFunc_t>(coll), size, 1,
                             reinterpret_cast<float**>(table), kAlgos, kProtos, 0,
                             &channels) != ncclSuccess) {
        out += 'E';
        continue;
      }
      out += static_cast<char>('0' + picked(table));
    }
  }
  tuner->finalize(ctx);
  std::printf("decisions %s\n", out.c_str());
  return 0;
}
