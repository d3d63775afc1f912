// SPDX-License-Identifier: Apache-2.0
// One rank of a GIN communicator inside a forked test rank: init, listen, the handle allgather,
// collective connect and the data-path target, as NCCL's ncclGinConnectOnce does; teardown in
// NCCL's order (barrier first: NCCL closes collectively).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gin_api.h"
#include "ranks.h"

namespace gintest {

std::string plugin_path();
// NCCL_PTR_HOST, or NCCL_PTR_CUDA with MESH_GIN_MEMORY=cuda (the Soft-RoCE step: the GPU-memory
// stand-in, with NCCL_MESH_TEST_GIN_CUDA_LIBRARY naming the CUDA driver stand-in fake_cuda.cc).
int registration_type();

struct GinRank {
  explicit GinRank(RankEnv& e) : env(e) {}
  // Opens the table of `version` and connects every rank; `contexts` for createContext (v13+).
  bool setup(int version, int contexts);
  // setup()'s first half: open, init, listen and the handle allgather (no connect).
  bool listen_and_gather(int version, std::vector<void*>* handles);
  bool teardown();
  // Collective registration (every rank, same order).
  bool reg(void* data, size_t size, void** mh, uint64_t flags = 0);
  bool dereg(void* mh);
  // Fails the rank with `what` and the code unless rc is ncclSuccess.
  bool ok(ncclResult_t rc, const std::string& what);

  RankEnv& env;
  GinApi api;
  void* ctx = nullptr;
  void* listen = nullptr;
  void* comm = nullptr;
  void* target = nullptr;
  int contexts = 1;
};

// The byte every pattern test expects at `index` of a buffer written by `writer` for `reader`.
inline uint8_t pattern(int writer, int reader, uint64_t salt, uint64_t index) {
  return static_cast<uint8_t>(writer * 131 + reader * 17 + salt * 7 + index * 13 + (index >> 8));
}

// Reads a signal word the way a GPU kernel's waitSignal does: an acquire load.
inline uint64_t load_signal(const uint64_t* word) {
  return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

}  // namespace gintest
