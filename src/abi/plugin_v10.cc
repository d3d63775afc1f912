// SPDX-License-Identifier: Apache-2.0
// ncclNetPlugin_v10 (NCCL 2.26-2.27): init once per process, traffic class passed to connect.
#include "abi/entry_points.h"

namespace mesh::abi {
namespace {

ncclResult_t init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t /*prof*/) {
  return legacy_init(logger);
}

ncclResult_t connect_v10(int dev, ncclNetCommConfig_v10_t* /*config*/, void* handle,
                         void** send_comm, ncclNetDeviceHandle_v10_t** /*dev_comm*/) {
  return legacy_connect(dev, handle, send_comm);
}

ncclResult_t get_properties_v10(int dev, ncclNetProperties_v10_t* props) {
  return fill_properties(dev, props);
}

}  // namespace
}  // namespace mesh::abi

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = "Mesh",
    .init = mesh::abi::init_v10,
    .devices = mesh::abi::devices,
    .getProperties = mesh::abi::get_properties_v10,
    .listen = mesh::abi::legacy_listen,
    .connect = mesh::abi::connect_v10,
    .accept = mesh::abi::accept,
    .regMr = mesh::abi::reg_mr,
    .regMrDmaBuf = mesh::abi::reg_mr_dmabuf,
    .deregMr = mesh::abi::dereg_mr,
    .isend = mesh::abi::isend_v10plus,
    .irecv = mesh::abi::irecv_v10plus,
    .iflush = mesh::abi::iflush,
    .test = mesh::abi::test,
    .closeSend = mesh::abi::close_send,
    .closeRecv = mesh::abi::close_recv,
    .closeListen = mesh::abi::close_listen,
    .getDeviceMr = nullptr,    // device-offload plugins only
    .irecvConsumed = nullptr,  // device-offload plugins only
    .makeVDevice = nullptr,    // devices are already grouped by NUMA node (docs/design.md)
};
}  // extern "C"
