// SPDX-License-Identifier: Apache-2.0
// One tuner context per NCCL communicator (NCCL calls the tuner's init once per communicator):
// the decision of tuner_policy.h for this communicator, made at init from NCCL's arguments and
// the tuner settings, and read-only afterwards.
//
// Threads: init and finalize run on the thread creating or destroying the communicator;
// getCollInfo on whichever thread enqueues a collective (ncclAllReduce, ncclGroupEnd), possibly
// several at once for different communicators. The decision is immutable after init, so no
// lock; `picked` (which algorithms NCCL ended up with) is an atomic bit set that the net
// plugin's connect reads (tuner_ring_only) from NCCL's proxy thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plugin/tuner_policy.h"
#include "topology/interface.h"

namespace mesh {

// "mesh-tun": first member, checked on every call so a stale or foreign pointer is refused.
inline constexpr uint64_t kTunerContextTag = 0x6d6573682d74756e;
inline constexpr uint64_t kTunerContextDead = 0x6d6573682d646561;  // "mesh-dea"

// NCCL's init arguments: identical on every rank of the communicator.
struct TunerInit {
  uint64_t comm_id = 0;  // NCCL's commHash (tuner v5; 0 from v3/v4, which do not pass it)
  size_t n_ranks = 0;
  size_t n_nodes = 0;
};

struct TunerContext {
  uint64_t tag = kTunerContextTag;
  uint64_t comm_id = 0;
  TunerState state;
  std::atomic<uint32_t> picked{0};  // bit a: NCCL picked algorithm a for some collective
};

// The context for one communicator. `local` is this host's interface list and `ifname` its
// NCCL_MESH_IFNAME: they feed the init log line only (the cable count, for the reader), never
// the decision, which is decide_tuner(config, init.n_nodes) by construction. Registers the
// context under init.comm_id (when non-zero) for tuner_ring_only.
TunerContext* make_tuner_context(const TunerConfig& config, const TunerInit& init,
                                 const std::vector<topology::Interface>& local,
                                 const std::string& ifname);

// Reads the settings, finds the interfaces the plugin would use (NCCL_MESH_EMULATE included) and
// calls make_tuner_context. Null with *why when a tuner setting is malformed (it would silently
// differ from the other hosts' value) or discovery fails (a malformed NCCL_MESH_EMULATE).
TunerContext* create_tuner_context(const TunerInit& init, std::string* why);

// Null with *why unless `ctx` is a live context from create_tuner_context.
TunerContext* checked_tuner_context(void* ctx, const char** why);

// Records the algorithm NCCL will pick for one collective (after steering).
void note_picked_algorithm(TunerContext* ctx, int algorithm);

// True when this process's tuner steers communicator `comm_id` and NCCL has so far run its
// collectives on Ring alone: a relayed connection in it then most likely joins ring neighbours
// that have no cable (ranks launched out of cable order). False for unknown ids.
bool tuner_ring_only(uint64_t comm_id);

void destroy_tuner_context(TunerContext* ctx);

}  // namespace mesh
