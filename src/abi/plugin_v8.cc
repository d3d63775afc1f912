// ncclNetPlugin_v8 (NCCL 2.20-2.23): int sizes (at most 1 GiB per message), no makeVDevice.
#include <algorithm>
#include <vector>

#include "abi/entry_points.h"

namespace mesh::abi {
namespace {

ncclResult_t connect_v8(int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v8_t** /*dev_comm*/) {
  return legacy_connect(dev, handle, send_comm);
}

ncclResult_t get_properties_v8(int dev, ncclNetProperties_v8_t* props) {
  return guard("getProperties", [&] {
    DeviceProperties p;
    ncclResult_t rc = core().properties(dev, &p);
    if (rc != ncclSuccess) return rc;
    *props = ncclNetProperties_v8_t{};
    props->name = const_cast<char*>(p.name);
    props->pciPath = const_cast<char*>(p.pci_path);
    props->guid = p.guid;
    props->ptrSupport = p.ptr_support;
    props->regIsGlobal = 0;
    props->speed = p.speed_mbps;
    props->port = p.port;
    props->latency = p.latency_us;
    props->maxComms = p.max_comms;
    props->maxRecvs = p.max_recvs;
    props->netDeviceType = NCCL_NET_DEVICE_HOST;
    props->netDeviceVersion = 0;
    return ncclSuccess;
  });
}

ncclResult_t isend_v8(void* comm, void* data, int size, int tag, void* mhandle, void** request) {
  return guard("isend", [&] {
    if (size < 0) {
      *request = nullptr;
      MESH_WARN("isend: negative size %d", size);
      return ncclInvalidArgument;
    }
    return core().isend(comm, data, static_cast<size_t>(size), tag, mhandle, request);
  });
}

ncclResult_t irecv_v8(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                      void** request) {
  return guard("irecv", [&] {
    *request = nullptr;
    if (n < 1 || n > NCCL_PROXY_MAX_SUBS || sizes == nullptr) {
      MESH_WARN("irecv: invalid receive count %d", n);
      return ncclInvalidArgument;
    }
    size_t wide[NCCL_PROXY_MAX_SUBS];
    for (int i = 0; i < n; ++i) {
      if (sizes[i] < 0) {
        MESH_WARN("irecv: negative size %d", sizes[i]);
        return ncclInvalidArgument;
      }
      wide[i] = static_cast<size_t>(sizes[i]);
    }
    return core().irecv(comm, n, data, wide, tags, mhandles, request);
  });
}

}  // namespace
}  // namespace mesh::abi

// The symbol NCCL looks up with dlsym: an exported data object of the table type.
extern "C" {
__attribute__((visibility("default"))) ncclNet_v8_t ncclNetPlugin_v8 = {
    "Mesh",
    mesh::abi::legacy_init,
    mesh::abi::devices,
    mesh::abi::get_properties_v8,
    mesh::abi::legacy_listen,
    mesh::abi::connect_v8,
    mesh::abi::accept,
    mesh::abi::reg_mr,
    mesh::abi::reg_mr_dmabuf,
    mesh::abi::dereg_mr,
    mesh::abi::isend_v8,
    mesh::abi::irecv_v8,
    mesh::abi::iflush,
    mesh::abi::test,
    mesh::abi::close_send,
    mesh::abi::close_recv,
    mesh::abi::close_listen,
    nullptr,  // getDeviceMr
    nullptr,  // irecvConsumed
};
}  // extern "C"
