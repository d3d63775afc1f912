// SPDX-License-Identifier: Apache-2.0
// ncclNetPlugin_v8 (NCCL 2.20-2.23): int message sizes (at most 1 GiB), size_t regMr, no
// makeVDevice.
#include "abi/entry_points.h"

namespace mesh::abi {
namespace {

ncclResult_t connect_v8(int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v8_t** /*dev_comm*/) {
  return legacy_connect(dev, handle, send_comm);
}

ncclResult_t get_properties_v8(int dev, ncclNetProperties_v8_t* props) {
  return fill_properties(dev, props);
}

}  // namespace
}  // namespace mesh::abi

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "Mesh",
    .init = mesh::abi::legacy_init,
    .devices = mesh::abi::devices,
    .getProperties = mesh::abi::get_properties_v8,
    .listen = mesh::abi::legacy_listen,
    .connect = mesh::abi::connect_v8,
    .accept = mesh::abi::accept,
    .regMr = mesh::abi::reg_mr,
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
