// SPDX-License-Identifier: Apache-2.0
// What the `gin` check needs to know about this host, as plain data (gather_gin.cc fills it at
// run time with dlopen only, so the doctor has no link-time CUDA or NCCL dependency; tests build
// synthetic ones), and which GIN/RMA symbols each NCCL release looks up (docs/gin.md,
// shared/reference/gin-rma.md 1.1).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace mesh::doctor {

// The tables this library exports, oldest first (src/abi/gin_*.cc, rma_*.cc).
inline constexpr const char* kGinSymbols[] = {"ncclGinPlugin_v11", "ncclGinPlugin_v12",
                                              "ncclGinPlugin_v13", "ncclRmaPlugin_v14",
                                              "ncclRmaPlugin_v15"};

struct GpuGinFacts {
  int index = 0;
  int cc_major = -1;  // compute capability; -1 when the driver did not say
  int cc_minor = -1;
  // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED; nullopt when the query failed.
  std::optional<int> vmm_gdr;
};

struct GinFacts {
  // The plugin library inspected: its path and which of kGinSymbols it exports. Empty path
  // when no candidate loaded (plugin_error says why).
  std::string plugin_path;
  std::string plugin_error;
  std::vector<std::string> exported;
  // libcuda.so.1: loaded and cuInit succeeded (the GIN core's own condition for GPU memory).
  bool cuda_loaded = false;
  std::string cuda_error;
  std::vector<GpuGinFacts> gpus;  // only when cuda_loaded
  // libnccl.so.2's ncclGetVersion (e.g. 22809), when a libnccl.so.2 could be loaded.
  std::optional<int> nccl_version;
  std::string nccl_path;  // where it was found (dladdr), or empty
  std::string nccl_error;
};

// How an NCCL release looks for GIN/RMA tables in a plugin library.
struct NcclGinLookup {
  bool known = false;                // a release the reference covers (else: could not tell)
  std::vector<std::string> symbols;  // symbols it takes, preferred first; empty: no GIN plugins
  std::string where;                 // which library it searches, in words
  std::string gate;                  // what else that release needs before GIN runs
};

NcclGinLookup nccl_gin_lookup(int version_code);

// "2.28.9" from 22809 (NCCL_VERSION_CODE since 2.9: major*10000 + minor*100 + patch).
std::string nccl_version_text(int version_code);

}  // namespace mesh::doctor
