// SPDX-License-Identifier: Apache-2.0
#include "plugin/tuner_policy.h"

#include "nccl/tuner_common.h"
#include "util/fnv1a.h"

namespace mesh {
namespace {

// NCCL's tables are 7 x 3 (2.23+) or 6 x 3 (2.22); anything far beyond is garbage, not a future
// NCCL, and is refused rather than indexed.
constexpr int kMaxAlgorithms = 64;
constexpr int kMaxProtocols = 16;

// Three or more nodes: some pair may lack a cable (a ring, a line, a subset of any mesh), and
// NCCL's Tree/PAT would then send bulk data through relays. Two nodes share their one cable.
constexpr size_t kAutoMinNodes = 3;

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

TunerState decide_tuner(const TunerConfig& config, size_t n_nodes) {
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
      state.steer = n_nodes >= kAutoMinNodes;
      break;
  }
  return state;
}

const char* describe_tuner_decision(const TunerConfig& config, size_t n_nodes) {
  if (config.mode == TunerMode::kOff) return "off (NCCL_MESH_TUNER=off)";
  if (n_nodes < 2) return "idle: one node, no network";
  if (config.mode == TunerMode::kRing) return "steering to Ring (NCCL_MESH_TUNER=ring)";
  if (n_nodes >= kAutoMinNodes) return "steering to Ring (NCCL_MESH_TUNER=auto, 3 or more nodes)";
  return "idle: two nodes share one cable (NCCL_MESH_TUNER=auto)";
}

uint32_t tuner_decision_digest(const TunerConfig& config, size_t n_nodes) {
  const TunerState s = decide_tuner(config, n_nodes);
  const uint64_t words[] = {static_cast<uint64_t>(config.mode), config.min_bytes, n_nodes,
                            s.steer ? 1u : 0u};
  return fnv1a(reinterpret_cast<const uint8_t*>(words), sizeof(words));
}

int picked_algorithm(const float* table, int num_algo, int num_proto) {
  int best = -1;
  float best_cost = 0.0f;
  for (int a = 0; a < num_algo; ++a) {
    for (int p = 0; p < num_proto; ++p) {
      const float cost =
          table[static_cast<size_t>(a) * static_cast<size_t>(num_proto) + static_cast<size_t>(p)];
      if (usable(cost) && (best < 0 || cost < best_cost)) {
        best = a;
        best_cost = cost;
      }
    }
  }
  return best;
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
