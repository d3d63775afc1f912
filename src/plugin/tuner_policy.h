// SPDX-License-Identifier: Apache-2.0
// The tuner's policy (NCCL_MESH_TUNER): on a mesh of 3 or more nodes, steer the bandwidth-heavy
// collectives to NCCL's Ring algorithm, whose neighbours are cables when ranks are launched in
// cable order (nccl-mesh-doctor prints that order). Pure functions over data: the ABI tables
// (abi/tuner.cc) only convert arguments.
//
// Why the decision looks at so little: NCCL asks every rank's tuner separately and has no step
// that makes the ranks agree; ranks that pick different algorithms wait for each other forever
// (a 3-rank split of a line hung NCCL 2.28.9 that way when this policy counted the host's
// cables). So the decision is a pure function of what NCCL passes identically to every rank of a
// communicator (the node count, the collective, its size, and whether the cost table has a usable
// Ring entry: NCCL computes the table from graphs it min-reduces across ranks) and of the
// tuner settings, which the handshake makes every pair of hosts agree on (handshake/handle.h,
// "agreement"). Cable counts, link state, interface lists and regBuff differ from rank to rank
// and are never an input: no function here takes them.
//
// The rule for auto, and its cost (docs/measurements.md, "Tuner: the rule for auto"): with 3 or
// more nodes, ring-able collectives of at least NCCL_MESH_TUNER_MIN_BYTES (default 128 KiB) go to
// Ring; smaller ones keep NCCL's choice (Tree/PAT: latency-bound, and their non-neighbour pairs
// are relayed on a partial mesh, correct and slower). On a full mesh with one GPU per node,
// NCCL's own cost model already picks Ring for AllReduce from 32-128 KiB at 3-8 nodes, so the
// steer costs nothing there; AllGather/ReduceScatter lose PAT at 5+ nodes between 128 KiB and
// 4 MiB (model: at most 1.17x). Full meshes of NVSwitch servers lose NVLSTree above the
// threshold: set NCCL_MESH_TUNER=off on every host there. Two nodes share one cable: nothing to
// steer.
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/settings.h"

namespace mesh {

struct TunerConfig {
  TunerMode mode = TunerMode::kAuto;
  uint64_t min_bytes = 0;  // smaller collectives keep NCCL's choice
};

// What one communicator's tuner context remembers (immutable after init).
struct TunerState {
  bool steer = false;  // this communicator's ring-able collectives go to Ring
  uint64_t min_bytes = 0;
};

// `n_nodes` is NCCL's node count for the communicator, identical on every rank.
TunerState decide_tuner(const TunerConfig& config, size_t n_nodes);

// Why decide_tuner chose what it did, for the INFO line at init.
const char* describe_tuner_decision(const TunerConfig& config, size_t n_nodes);

// A digest of everything the decision depends on (mode, threshold, node count, outcome), logged
// at init so that the rank logs of one communicator can be compared at a glance.
uint32_t tuner_decision_digest(const TunerConfig& config, size_t n_nodes);

// Applies the policy to NCCL's cost table, float[num_algo][num_proto] row-major (nccl/tuner.h):
// for AllReduce, AllGather, ReduceScatter, Broadcast and Reduce of at least min_bytes, every
// entry outside the Ring row becomes NCCL_ALGO_PROTO_IGNORE, so NCCL picks the cheapest Ring
// protocol itself. The table is left untouched when the state does not steer, for other
// collectives, for smaller sizes, and when no Ring entry is usable (Ring disabled, e.g. by
// NCCL_ALGO): the tuner never leaves NCCL without a choice. Returns true when it changed the
// table. The caller validates the pointer and the dimensions (validate_cost_table).
bool steer_cost_table(const TunerState& state, int coll_type, uint64_t n_bytes, float* table,
                      int num_algo, int num_proto);

// The algorithm NCCL's topoGetAlgoInfo picks from a table: the cheapest usable entry's row, -1
// when none is usable.
int picked_algorithm(const float* table, int num_algo, int num_proto);

// The dimensions a table must have for the policy to index it: Ring's row must exist and the
// sizes must be sane (NCCL passes 7 x 3). False with *why otherwise.
bool validate_cost_table(const void* table, int num_algo, int num_proto, const char** why);

}  // namespace mesh
