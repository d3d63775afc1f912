// SPDX-License-Identifier: Apache-2.0
#include "plugin/tuner_policy.h"

#include "nccl/tuner_common.h"

namespace mesh {
namespace {

// NCCL's tables are 7 x 3 (2.23+) or 6 x 3 (2.22); anything far beyond is garbage, not a future
// NCCL, and is refused rather than indexed.
constexpr int kMaxAlgorithms = 64;
constexpr int kMaxProtocols = 16;

bool partial_mesh(size_t n_nodes, size_t local_cables, bool loopback_fallback) {
  return !loopback_fallback && n_nodes >= 3 && local_cables + 1 < n_nodes;
}

bool ring_able(int coll_type) {
  switch (coll_type) {
    case ncclFuncBroadcast:
    case ncclFuncReduce:
    case ncclFuncAllGather:
    case ncclFuncReduceScatter:
    case ncclFuncAllReduce:
      return true;
    default:
      return false;
  }
}

bool usable(float cost) {
  return cost >= 0.0f;  // NCCL_ALGO_PROTO_IGNORE (-1) and any other negative are never picked
}

}  // namespace

TunerState decide_tuner(const TunerConfig& config, size_t n_nodes, size_t local_cables,
                        bool loopback_fallback) {
  TunerState state;
  state.min_bytes = config.min_bytes;
  switch (config.mode) {
    case TunerMode::kOff:
      state.steer = false;
      break;
    case TunerMode::kRing:
      state.steer = n_nodes >= 2;  // one node: no network, nothing to steer
      break;
    case TunerMode::kAuto:
      state.steer = partial_mesh(n_nodes, local_cables, loopback_fallback);
      break;
  }
  return state;
}

const char* describe_tuner_decision(const TunerConfig& config, size_t n_nodes, size_t local_cables,
                                    bool loopback_fallback) {
  if (config.mode == TunerMode::kOff) return "off (NCCL_MESH_TUNER=off)";
  if (n_nodes < 2) return "idle: one node, no network";
  if (config.mode == TunerMode::kRing) return "steering to Ring (NCCL_MESH_TUNER=ring)";
  if (loopback_fallback) return "idle: loopback only, no cables to judge the mesh by";
  if (partial_mesh(n_nodes, local_cables, loopback_fallback))
    return "steering to Ring: partial mesh (fewer cables on this host than nodes - 1)";
  return "idle: full mesh (a cable per other node)";
}

bool validate_cost_table(const void* table, int num_algo, int num_proto, const char** why) {
  if (table == nullptr) {
    *why = "the cost table pointer is NULL";
    return false;
  }
  if (num_algo <= NCCL_ALGO_RING || num_algo > kMaxAlgorithms) {
    *why = "numAlgo is outside 2..64 (the table has no Ring row)";
    return false;
  }
  if (num_proto <= 0 || num_proto > kMaxProtocols) {
    *why = "numProto is outside 1..16";
    return false;
  }
  return true;
}

bool steer_cost_table(const TunerState& state, int coll_type, uint64_t n_bytes, float* table,
                      int num_algo, int num_proto) {
  if (!state.steer || !ring_able(coll_type) || n_bytes < state.min_bytes) return false;
  const auto at = [&](int a, int p) -> float& {
    return table[static_cast<size_t>(a) * static_cast<size_t>(num_proto) + static_cast<size_t>(p)];
  };
  bool ring_usable = false;
  for (int p = 0; p < num_proto; ++p) ring_usable = ring_usable || usable(at(NCCL_ALGO_RING, p));
  if (!ring_usable) return false;
  bool changed = false;
  for (int a = 0; a < num_algo; ++a) {
    if (a == NCCL_ALGO_RING) continue;
    for (int p = 0; p < num_proto; ++p) {
      if (usable(at(a, p))) {
        at(a, p) = static_cast<float>(NCCL_ALGO_PROTO_IGNORE);
        changed = true;
      }
    }
  }
  return changed;
}

}  // namespace mesh
