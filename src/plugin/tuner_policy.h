// SPDX-License-Identifier: Apache-2.0
// The tuner's policy (NCCL_MESH_TUNER): on a partial mesh, steer the bandwidth-heavy
// collectives to NCCL's Ring algorithm, whose neighbours are cables when ranks are launched in
// cable order (nccl-mesh-doctor prints that order); leave everything else, and every full mesh,
// to NCCL. Pure functions over data: the ABI tables (abi/tuner_v*.cc) only convert arguments.
//
// How a host learns that the mesh is partial: NCCL tells the tuner nNodes; a full mesh needs a
// cable from every host to every other, so a host with fewer cables (distinct subnets among the
// interfaces the plugin uses) than nNodes - 1 is part of a partial mesh. Limits: a host that has
// a cable to every other host cannot see that other hosts lack some (an irregular mesh), and two
// cables to one neighbour look like cables to two hosts; every rank must make the same choice
// (NCCL runs one algorithm per collective everywhere), so on such meshes set NCCL_MESH_TUNER=ring
// (or off) on every host. Rings and lines of any size, and DGX Spark clusters of 4 or more hosts
// (two ports each), are decided the same way on every host. A shared (switched) subnet counts as
// one cable, so a switched network of 3 or more hosts also reads as partial: Ring is still a
// correct choice there, only not always the fastest.
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

// `local_cables`: topology::count_cables of the interfaces the plugin uses; `loopback_fallback`:
// only loopback was usable (single-host tests without NCCL_MESH_EMULATE), a shared subnet that
// reaches every local rank, so no evidence of a partial mesh.
TunerState decide_tuner(const TunerConfig& config, size_t n_nodes, size_t local_cables,
                        bool loopback_fallback);

// Why decide_tuner chose what it did, for the INFO line at init.
const char* describe_tuner_decision(const TunerConfig& config, size_t n_nodes, size_t local_cables,
                                    bool loopback_fallback);

// Applies the policy to NCCL's cost table, float[num_algo][num_proto] row-major (nccl/tuner.h):
// for AllReduce, AllGather, ReduceScatter, Broadcast and Reduce of at least min_bytes, every
// entry outside the Ring row becomes NCCL_ALGO_PROTO_IGNORE, so NCCL picks the cheapest Ring
// protocol itself. The table is left untouched when the state does not steer, for other
// collectives, for smaller sizes, and when no Ring entry is usable (Ring disabled, e.g. by
// NCCL_ALGO): the tuner never leaves NCCL without a choice. Returns true when it changed the
// table. The caller validates the pointer and the dimensions (validate_cost_table).
bool steer_cost_table(const TunerState& state, int coll_type, uint64_t n_bytes, float* table,
                      int num_algo, int num_proto);

// The dimensions a table must have for the policy to index it: Ring's row must exist and the
// sizes must be sane (NCCL passes 7 x 3). False with *why otherwise.
bool validate_cost_table(const void* table, int num_algo, int num_proto, const char** why);

}  // namespace mesh
