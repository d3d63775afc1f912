// SPDX-License-Identifier: Apache-2.0
#include "plugin/tuner_context.h"

#include "topology/emulated_mesh.h"
#include "topology/ifname_filter.h"
#include "topology/mesh_shape.h"
#include "topology/selection.h"
#include "util/log.h"
#include "util/settings.h"

namespace mesh {

TunerContext* create_tuner_context(size_t n_ranks, size_t n_nodes, std::string* why) {
  const Settings& s = settings();
  std::vector<topology::Interface> all;
  if (!topology::discover_mesh_interfaces(s.emulate, &all, why)) return nullptr;
  const topology::Selection sel =
      topology::select_interfaces(all, topology::IfnameFilter::parse(s.ifname));
  const size_t cables = topology::count_cables(sel.used);
  const TunerConfig config{s.tuner, static_cast<uint64_t>(s.tuner_min_bytes)};
  auto* ctx = new TunerContext;
  ctx->state = decide_tuner(config, n_nodes, cables, sel.loopback_fallback);
  MESH_INFO(NCCL_INIT | NCCL_TUNING,
            "tuner: %zu ranks on %zu nodes, %zu cable(s) on this host: %s (from %llu bytes)",
            n_ranks, n_nodes, cables,
            describe_tuner_decision(config, n_nodes, cables, sel.loopback_fallback),
            static_cast<unsigned long long>(config.min_bytes));
  return ctx;
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

void destroy_tuner_context(TunerContext* ctx) {
  ctx->tag = kTunerContextDead;
  delete ctx;
}

}  // namespace mesh
