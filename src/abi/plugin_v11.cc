// ncclNetPlugin_v11 (NCCL >= 2.28.3): per-communicator init/finalize with a context.
#include "abi/entry_points.h"

namespace mesh::abi {
namespace {

ncclResult_t init_v11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                      ncclDebugLogger_t logger, ncclProfilerCallback_t /*prof*/) {
  return guard("init", [&] {
    Context* c = nullptr;
    const int tc = config != nullptr ? config->trafficClass : -1;
    ncclResult_t rc = core().init(logger, comm_id, tc, false, &c);
    *ctx = c;
    return rc;
  });
}

ncclResult_t finalize_v11(void* ctx) {
  return guard("finalize", [&] { return core().finalize(ctx); });
}

ncclResult_t listen_v11(void* ctx, int dev, void* handle, void** listen_comm) {
  return guard("listen", [&] { return core().listen(ctx, dev, handle, listen_comm); });
}

ncclResult_t connect_v11(void* ctx, int dev, void* handle, void** send_comm,
                         ncclNetDeviceHandle_v11_t** /*dev_comm*/) {
  return guard("connect", [&] { return core().connect(ctx, dev, handle, send_comm); });
}

ncclResult_t get_properties_v11(int dev, ncclNetProperties_v11_t* props) {
  ncclResult_t rc = fill_properties_v9plus(dev, props);
  if (rc == ncclSuccess) props->maxMultiRequestSize = 1;
  return rc;
}

}  // namespace
}  // namespace mesh::abi

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    "Mesh",
    mesh::abi::init_v11,
    mesh::abi::devices,
    mesh::abi::get_properties_v11,
    mesh::abi::listen_v11,
    mesh::abi::connect_v11,
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
    nullptr,  // getDeviceMr: device-offload plugins only
    nullptr,  // irecvConsumed: device-offload plugins only
    nullptr,  // makeVDevice: devices are already grouped by NUMA node (docs/design.md)
    mesh::abi::finalize_v11,
    nullptr,  // setNetAttr: optional hints, not used
};
}  // extern "C"
