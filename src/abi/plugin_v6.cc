// SPDX-License-Identifier: Apache-2.0
// ncclNetPlugin_v6 (NCCL 2.13-2.18): no device handles, int sizes, properties end at maxRecvs.
//
// Requests in flight: NCCL of that era defined NCCL_NET_MAX_REQUESTS as 8 and never posts more
// than NCCL_STEPS (8) requests on one comm (the plugin advertises maxRecvs = 1, so no comm is
// shared between connections), and its own Socket and IB transports failed a 9th request with an
// error. A v6 plugin therefore has to accept 8; the core accepts 32 (NCCL_NET_MAX_REQUESTS of v7
// and later), which includes NCCL 2.13's 8, so this adapter adds no lower cap: a cap NCCL can
// never reach would only add per-comm state to a stateless adapter. The conformance suite runs v6
// at its own limit (8 posted before the first test()).
#include "abi/entry_points.h"

namespace mesh::abi {
namespace {

ncclResult_t get_properties_v6(int dev, ncclNetProperties_v6_t* props) {
  return fill_properties(dev, props);
}

}  // namespace
}  // namespace mesh::abi

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v6_t ncclNetPlugin_v6 = {
    .name = "Mesh",
    .init = mesh::abi::legacy_init,
    .devices = mesh::abi::devices,
    .getProperties = mesh::abi::get_properties_v6,
    .listen = mesh::abi::legacy_listen,
    .connect = mesh::abi::legacy_connect,
    .accept = mesh::abi::accept_v6,
    .regMr = mesh::abi::reg_mr_int,
    .regMrDmaBuf = mesh::abi::reg_mr_dmabuf,
    .deregMr = mesh::abi::dereg_mr,
    .isend = mesh::abi::isend_int,
    .irecv = mesh::abi::irecv_int,
    .iflush = mesh::abi::iflush,
    .test = mesh::abi::test,
    .closeSend = mesh::abi::close_send,
    .closeRecv = mesh::abi::close_recv,
    .closeListen = mesh::abi::close_listen,
};
}  // extern "C"
