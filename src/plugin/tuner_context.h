// SPDX-License-Identifier: Apache-2.0
// One tuner context per NCCL communicator (NCCL calls the tuner's init once per communicator):
// the decision of tuner_policy.h for this communicator, made at init from the interfaces the
// plugin uses, and read-only afterwards.
//
// Threads: init and finalize run on the thread creating or destroying the communicator;
// getCollInfo on whichever thread enqueues a collective (ncclAllReduce, ncclGroupEnd), possibly
// several at once for different communicators. The context is immutable after init, so no lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "plugin/tuner_policy.h"

namespace mesh {

// "mesh-tun": first member, checked on every call so a stale or foreign pointer is refused.
inline constexpr uint64_t kTunerContextTag = 0x6d6573682d74756e;
inline constexpr uint64_t kTunerContextDead = 0x6d6573682d646561;  // "mesh-dea"

struct TunerContext {
  uint64_t tag = kTunerContextTag;
  TunerState state;
};

// Builds the context for a communicator of `n_ranks` ranks on `n_nodes` nodes: reads the
// settings, finds the interfaces the plugin would use (NCCL_MESH_EMULATE included) and decides.
// Logs one INFO line with the decision. Null with *why when discovery fails (a malformed
// NCCL_MESH_EMULATE).
TunerContext* create_tuner_context(size_t n_ranks, size_t n_nodes, std::string* why);

// Null with *why unless `ctx` is a live context from create_tuner_context.
TunerContext* checked_tuner_context(void* ctx, const char** why);

void destroy_tuner_context(TunerContext* ctx);

}  // namespace mesh
