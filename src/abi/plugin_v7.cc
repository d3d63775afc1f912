// SPDX-License-Identifier: Apache-2.0
// ncclNetPlugin_v7 (NCCL 2.19): v6 plus device handles in connect/accept (never written: see
// entry_points.h), getDeviceMr and irecvConsumed (NULL: host plugin), netDeviceType/Version in
// the properties; int sizes for regMr, isend and irecv.
#include "abi/entry_points.h"

namespace mesh::abi {
namespace {

ncclResult_t connect_v7(int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v7_t** /*dev_comm*/) {
  return legacy_connect(dev, handle, send_comm);
}

ncclResult_t get_properties_v7(int dev, ncclNetProperties_v7_t* props) {
  return fill_properties(dev, props);
}

}  // namespace
}  // namespace mesh::abi

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v7_t ncclNetPlugin_v7 = {
    .name = "Mesh",
    .init = mesh::abi::legacy_init,
    .devices = mesh::abi::devices,
    .getProperties = mesh::abi::get_properties_v7,
    .listen = mesh::abi::legacy_listen,
    .connect = mesh::abi::connect_v7,
    .accept = mesh::abi::accept,
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
    .getDeviceMr = nullptr,    // device-offload plugins only
    .irecvConsumed = nullptr,  // device-offload plugins only
};
}  // extern "C"
