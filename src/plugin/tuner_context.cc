// SPDX-License-Identifier: Apache-2.0
#include "plugin/tuner_context.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "nccl/tuner_common.h"
#include "topology/emulated_mesh.h"
#include "topology/ifname_filter.h"
#include "topology/mesh_shape.h"
#include "topology/selection.h"
#include "util/log.h"
#include "util/settings.h"

namespace mesh {
namespace {

// comm_id -> live context, for the net plugin's connect (tuner_ring_only). Both run in one
// process: NCCL loads the tuner from the net plugin's library.
struct Registry {
  std::mutex mu;
  std::unordered_map<uint64_t, TunerContext*> by_comm;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: NCCL may finalize after static dtors
  return *r;
}

constexpr const char* kTunerSettings[] = {"NCCL_MESH_TUNER", "NCCL_MESH_TUNER_MIN_BYTES"};

}  // namespace

TunerContext* make_tuner_context(const TunerConfig& config, const TunerInit& init,
                                 const std::vector<topology::Interface>& local,
                                 const std::string& ifname) {
  auto* ctx = new TunerContext;
  ctx->comm_id = init.comm_id;
  ctx->state = decide_tuner(config, init.n_nodes);
  const topology::Selection sel =
      topology::select_interfaces(local, topology::IfnameFilter::parse(ifname));
  // One line per communicator; ranks of one communicator print the same decision digest.
  MESH_INFO(NCCL_INIT | NCCL_TUNING,
            "tuner: comm 0x%llx, %zu ranks on %zu nodes: %s (from %llu bytes; decision %08x; "
            "this host's %zu cable(s) are not an input)",
            static_cast<unsigned long long>(init.comm_id), init.n_ranks, init.n_nodes,
            describe_tuner_decision(config, init.n_nodes),
            static_cast<unsigned long long>(config.min_bytes),
            tuner_decision_digest(config, init.n_nodes), topology::count_cables(sel.used));
  if (init.comm_id != 0) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.by_comm[init.comm_id] = ctx;
  }
  return ctx;
}

TunerContext* create_tuner_context(const TunerInit& init, std::string* why) {
  const Settings& s = settings();
  for (const char* name : kTunerSettings) {
    if (std::find(s.malformed.begin(), s.malformed.end(), name) != s.malformed.end()) {
      *why = std::string(name) + " is malformed (see the WARN above); every host must use the " +
             "same valid value, so the tuner does not guess one";
      return nullptr;
    }
  }
  std::vector<topology::Interface> all;
  if (!topology::discover_mesh_interfaces(s.emulate, &all, why)) return nullptr;
  const TunerConfig config{s.tuner, static_cast<uint64_t>(s.tuner_min_bytes)};
  return make_tuner_context(config, init, all, s.ifname);
}

TunerContext* checked_tuner_context(void* ctx, const char** why) {
  auto* c = static_cast<TunerContext*>(ctx);
  if (c == nullptr) {
    *why = "NULL context";
    return nullptr;
  }
  if (c->tag != kTunerContextTag) {
    *why = c->tag == kTunerContextDead ? "context already finalized" : "not a mesh tuner context";
    return nullptr;
  }
  return c;
}

void note_picked_algorithm(TunerContext* ctx, int algorithm) {
  if (algorithm < 0 || algorithm >= 32) return;
  ctx->picked.fetch_or(1u << algorithm, std::memory_order_relaxed);
}

bool tuner_ring_only(uint64_t comm_id) {
  if (comm_id == 0) return false;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_comm.find(comm_id);
  if (it == r.by_comm.end() || !it->second->state.steer) return false;
  return it->second->picked.load(std::memory_order_relaxed) == (1u << NCCL_ALGO_RING);
}

void destroy_tuner_context(TunerContext* ctx) {
  if (ctx->comm_id != 0) {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.by_comm.find(ctx->comm_id);
    if (it != r.by_comm.end() && it->second == ctx) r.by_comm.erase(it);
  }
  ctx->tag = kTunerContextDead;
  delete ctx;
}

}  // namespace mesh
