// SPDX-License-Identifier: Apache-2.0
// The table of the per-communicator ABI versions, v11 (NCCL 2.28-2.29) and v12 (NCCL 2.30,
// current RCCL): NCCL 2.30 kept v11's order and signatures and renamed the types, so one
// template builds both tables from the same entry points.
#pragma once

#include "abi/entry_points.h"

namespace mesh::abi {

template <typename Config>
ncclResult_t context_init_with_config(void** ctx, uint64_t comm_id, Config* config,
                                      ncclDebugLogger_t logger, ncclProfilerCallback_t /*prof*/) {
  // NCCL passes a pointer to a config on its stack: keep the value, not the pointer.
  return context_init(ctx, comm_id, config != nullptr ? config->trafficClass : -1, logger);
}

template <typename Props>
ncclResult_t get_properties(int dev, Props* props) {
  return fill_properties(dev, props);
}

// `Table` is ncclNet_v11_t or ncclNet_v12_t, with its config and properties types.
template <typename Table, typename Config, typename Props>
constexpr Table context_table() {
  return Table{
      .name = "Mesh",
      .init = context_init_with_config<Config>,
      .devices = devices,
      .getProperties = get_properties<Props>,
      .listen = context_listen,
      .connect = context_connect,
      .accept = accept,
      .regMr = reg_mr,
      .regMrDmaBuf = reg_mr_dmabuf,
      .deregMr = dereg_mr,
      .isend = isend_v10plus,
      .irecv = irecv_v10plus,
      .iflush = iflush,
      .test = test,
      .closeSend = close_send,
      .closeRecv = close_recv,
      .closeListen = close_listen,
      .getDeviceMr = nullptr,    // device-offload plugins only
      .irecvConsumed = nullptr,  // device-offload plugins only
      .makeVDevice = nullptr,    // devices are already grouped by NUMA node (docs/design.md)
      .finalize = context_finalize,
      .setNetAttr = nullptr,  // optional hints, not used
  };
}

}  // namespace mesh::abi
