// ncclNetPlugin_v11 (NCCL 2.28-2.29): per-communicator init/finalize with a context.
#include "abi/entry_points.h"

namespace mesh::abi {
namespace {

ncclResult_t init_v11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                      ncclDebugLogger_t logger, ncclProfilerCallback_t /*prof*/) {
  // NCCL passes a pointer to a config on its stack: keep the value, not the pointer.
  return context_init(ctx, comm_id, config != nullptr ? config->trafficClass : -1, logger);
}

ncclResult_t get_properties_v11(int dev, ncclNetProperties_v11_t* props) {
  return fill_properties(dev, props);
}

}  // namespace
}  // namespace mesh::abi

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "Mesh",
    .init = mesh::abi::init_v11,
    .devices = mesh::abi::devices,
    .getProperties = mesh::abi::get_properties_v11,
    .listen = mesh::abi::context_listen,
    .connect = mesh::abi::context_connect,
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
    .finalize = mesh::abi::context_finalize,
    .setNetAttr = nullptr,  // optional hints, not used
};
}  // extern "C"
