// ncclNetPlugin_v9 (NCCL 2.24-2.25): size_t sizes, no profiler handles.
#include "abi/entry_points.h"

namespace mesh::abi {
namespace {

ncclResult_t connect_v9(int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v9_t** /*dev_comm*/) {
  return legacy_connect(dev, handle, send_comm);
}

ncclResult_t get_properties_v9(int dev, ncclNetProperties_v9_t* props) {
  return fill_properties_v9plus(dev, props);
}

ncclResult_t isend_v9(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  return guard("isend", [&] { return core().isend(comm, data, size, tag, mhandle, request); });
}

ncclResult_t irecv_v9(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                      void** request) {
  return guard("irecv",
               [&] { return core().irecv(comm, n, data, sizes, tags, mhandles, request); });
}

}  // namespace
}  // namespace mesh::abi

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v9_t ncclNetPlugin_v9 = {
    "Mesh",
    mesh::abi::legacy_init,
    mesh::abi::devices,
    mesh::abi::get_properties_v9,
    mesh::abi::legacy_listen,
    mesh::abi::connect_v9,
    mesh::abi::accept,
    mesh::abi::reg_mr,
    mesh::abi::reg_mr_dmabuf,
    mesh::abi::dereg_mr,
    mesh::abi::isend_v9,
    mesh::abi::irecv_v9,
    mesh::abi::iflush,
    mesh::abi::test,
    mesh::abi::close_send,
    mesh::abi::close_recv,
    mesh::abi::close_listen,
    nullptr,  // getDeviceMr
    nullptr,  // irecvConsumed
    nullptr,  // makeVDevice
};
}  // extern "C"
