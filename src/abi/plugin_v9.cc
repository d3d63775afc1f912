// SPDX-License-Identifier: Apache-2.0
// ncclNetPlugin_v9 (NCCL 2.24-2.25): size_t sizes, no profiler handles.
#include "abi/entry_points.h"

namespace mesh::abi {
namespace {

ncclResult_t connect_v9(int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v9_t** /*dev_comm*/) {
  return legacy_connect(dev, handle, send_comm);
}

ncclResult_t get_properties_v9(int dev, ncclNetProperties_v9_t* props) {
  return fill_properties(dev, props);
}

ncclResult_t isend_v9(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return isend_v10plus(comm, data, size, tag, mhandle, nullptr, request);
}

ncclResult_t irecv_v9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                      void** request) {
  return irecv_v10plus(comm, n, data, sizes, tags, mhandles, nullptr, request);
}

}  // namespace
}  // namespace mesh::abi

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = "Mesh",
    .init = mesh::abi::legacy_init,
    .devices = mesh::abi::devices,
    .getProperties = mesh::abi::get_properties_v9,
    .listen = mesh::abi::legacy_listen,
    .connect = mesh::abi::connect_v9,
    .accept = mesh::abi::accept,
    .regMr = mesh::abi::reg_mr,
    .regMrDmaBuf = mesh::abi::reg_mr_dmabuf,
    .deregMr = mesh::abi::dereg_mr,
    .isend = mesh::abi::isend_v9,
    .irecv = mesh::abi::irecv_v9,
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
