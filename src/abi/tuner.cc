// SPDX-License-Identifier: Apache-2.0
// The tuner tables NCCL finds in this library when NCCL_TUNER_PLUGIN is unset: ncclTunerPlugin_v5
// (NCCL 2.28 - 2.30), _v4 (2.24 - 2.27) and _v3 (2.22 - 2.23), each a thin adapter over
// plugin/tuner_context.h and plugin/tuner_policy.h. Every entry runs inside guard() and
// validates its arguments; a failing getCollInfo fails the collective in NCCL, so bad arguments
// get a WARN and an error rather than a guess.
#include "nccl/tuner.h"
#include "abi/entry_points.h"
#include "plugin/tuner_context.h"

namespace mesh::abi {
namespace {

ncclResult_t tuner_init_with_id(uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                                ncclDebugLogger_t logger, void** context) {
  return guard("tuner init", [&] {
    if (logger != nullptr) set_logger(logger);
    if (context == nullptr) {
      MESH_WARN("tuner init: NULL context pointer from NCCL");
      return ncclInvalidArgument;
    }
    *context = nullptr;
    if (n_nodes == 0 || n_ranks < n_nodes) {
      MESH_WARN("tuner init: %zu ranks on %zu nodes is inconsistent", n_ranks, n_nodes);
      return ncclInvalidArgument;
    }
    std::string why;
    TunerContext* ctx = create_tuner_context({comm_id, n_ranks, n_nodes}, &why);
    if (ctx == nullptr) {
      MESH_WARN("tuner init failed: %s (set NCCL_TUNER_PLUGIN=none to load no tuner)", why.c_str());
      return ncclInvalidArgument;
    }
    *context = ctx;
    return ncclSuccess;
  });
}

// v3/v4: NCCL passes no communicator id.
ncclResult_t tuner_init(size_t n_ranks, size_t n_nodes, ncclDebugLogger_t logger, void** context) {
  return tuner_init_with_id(0, n_ranks, n_nodes, logger, context);
}

ncclResult_t tuner_init_v5(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                           ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t* /*nvl*/,
                           ncclTunerConstants_v5_t* /*constants: left as NCCL set them*/) {
  return tuner_init_with_id(comm_id, n_ranks, n_nodes, logger, context);
}

ncclResult_t get_coll_info(void* context, ncclFunc_t coll_type, size_t n_bytes,
                           int /*num_pipe_ops*/, float** cost_table, int num_algo, int num_proto,
                           int /*reg_buff*/, int* /*n_channels: NCCL's choice*/) {
  return guard("tuner getCollInfo", [&] {
    const char* why = nullptr;
    TunerContext* ctx = checked_tuner_context(context, &why);
    if (ctx == nullptr) {
      MESH_WARN("tuner getCollInfo: %s", why);
      return ncclInvalidArgument;
    }
    if (!validate_cost_table(cost_table, num_algo, num_proto, &why)) {
      MESH_WARN("tuner getCollInfo: %s (numAlgo %d, numProto %d)", why, num_algo, num_proto);
      return ncclInvalidArgument;
    }
    // NCCL passes its float[numAlgo][numProto] array cast to float** (nccl/tuner_common.h).
    float* table = reinterpret_cast<float*>(cost_table);
    if (steer_cost_table(ctx->state, static_cast<int>(coll_type), n_bytes, table, num_algo,
                         num_proto)) {
      MESH_TRACE(NCCL_TUNING, "tuner: collective %d of %zu bytes steered to Ring",
                 static_cast<int>(coll_type), n_bytes);
    }
    note_picked_algorithm(ctx, picked_algorithm(table, num_algo, num_proto));
    return ncclSuccess;
  });
}

ncclResult_t get_coll_info_v3(void* context, ncclFunc_t coll_type, size_t n_bytes, int num_pipe_ops,
                              float** cost_table, int num_algo, int num_proto, int* n_channels) {
  return get_coll_info(context, coll_type, n_bytes, num_pipe_ops, cost_table, num_algo, num_proto,
                       0, n_channels);
}

ncclResult_t tuner_finalize(void* context) {
  return guard("tuner finalize", [&] {
    const char* why = nullptr;
    TunerContext* ctx = checked_tuner_context(context, &why);
    if (ctx == nullptr) {
      MESH_WARN("tuner finalize: %s", why);
      return ncclInvalidArgument;
    }
    destroy_tuner_context(ctx);
    return ncclSuccess;
  });
}

}  // namespace
}  // namespace mesh::abi

// The symbols NCCL looks up with dlsym in the net plugin's library; NCCL 2.28.9 takes the first
// of _v5, _v4, _v3, _v2 it finds.
extern "C" {
__attribute__((visibility("default"))) ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = "Mesh",
    .init = mesh::abi::tuner_init_v5,
    .getCollInfo = mesh::abi::get_coll_info,
    .finalize = mesh::abi::tuner_finalize,
};
__attribute__((visibility("default"))) ncclTuner_v4_t ncclTunerPlugin_v4 = {
    .name = "Mesh",
    .init = mesh::abi::tuner_init,
    .getCollInfo = mesh::abi::get_coll_info,
    .destroy = mesh::abi::tuner_finalize,
};
__attribute__((visibility("default"))) ncclTuner_v3_t ncclTunerPlugin_v3 = {
    .name = "Mesh",
    .init = mesh::abi::tuner_init,
    .getCollInfo = mesh::abi::get_coll_info_v3,
    .destroy = mesh::abi::tuner_finalize,
};
}  // extern "C"
