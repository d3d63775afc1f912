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
  return fill_properties_v9plus(dev, props);
}

}  // namespace
}  // namespace mesh::abi

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v10_t ncclNetPlugin_v10 = {
    "Mesh",
    mesh::abi::init_v10,
    mesh::abi::devices,
    mesh::abi::get_properties_v10,
    mesh::abi::legacy_listen,
    mesh::abi::connect_v10,
    mesh::abi::accept,
    mesh::abi::reg_mr,
    mesh::abi::reg_mr_dmabuf,
    mesh::abi::dereg_mr,
    mesh::abi::isend_v10plus,
    mesh::abi::irecv_v10plus,
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
