// Entry points whose signature is the same in every ABI version, shared by the v8..v11 tables.
// Each one forwards to the version-independent core (plugin/plugin.h) inside guard(), so no C++
// exception ever crosses the C ABI.
#pragma once

#include <exception>

#include "nccl/net.h"
#include "util/log.h"
#include "plugin/plugin.h"

namespace mesh::abi {

template <typename F>
ncclResult_t guard(const char* what, F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    MESH_WARN("%s: out of memory", what);
    return ncclSystemError;
  } catch (const std::exception& e) {
    MESH_WARN("%s: internal error: %s", what, e.what());
    return ncclInternalError;
  } catch (...) {
    MESH_WARN("%s: internal error (unknown exception)", what);
    return ncclInternalError;
  }
}

inline Plugin& core() {
  return Plugin::instance();
}

ncclResult_t devices(int* ndev);
ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v11_t** dev_comm);
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle);
ncclResult_t dereg_mr(void* comm, void* mhandle);
ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                    void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t close_send(void* comm);
ncclResult_t close_recv(void* comm);
ncclResult_t close_listen(void* comm);

// v10 and v11 share the isend/irecv signatures (size_t sizes, profiler handles, ignored here).
ncclResult_t isend_v10plus(void* comm, void* data, size_t size, int tag, void* mhandle,
                           void* phandle, void** request);
ncclResult_t irecv_v10plus(void* comm, int n, void** data, size_t* sizes, int* tags,
                           void** mhandles, void** phandles, void** request);

// Legacy (v8..v10) init: one shared context for the process.
ncclResult_t legacy_init(ncclDebugLogger_t logger);
ncclResult_t legacy_listen(int dev, void* handle, void** listen_comm);
ncclResult_t legacy_connect(int dev, void* handle, void** send_comm);

// Fills the fields common to the v9/v10/v11 properties structs.
template <typename Props>
ncclResult_t fill_properties_v9plus(int dev, Props* props) {
  return guard("getProperties", [&] {
    DeviceProperties p;
    ncclResult_t rc = core().properties(dev, &p);
    if (rc != ncclSuccess) return rc;
    *props = Props{};
    props->name = const_cast<char*>(p.name);
    props->pciPath = const_cast<char*>(p.pci_path);
    props->guid = p.guid;
    props->ptrSupport = p.ptr_support;
    props->regIsGlobal = 0;
    props->forceFlush = 0;
    props->speed = p.speed_mbps;
    props->port = p.port;
    props->latency = p.latency_us;
    props->maxComms = p.max_comms;
    props->maxRecvs = p.max_recvs;
    props->netDeviceType = NCCL_NET_DEVICE_HOST;
    props->netDeviceVersion = 0;
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
    props->maxP2pBytes = p.max_p2p_bytes;
    props->maxCollBytes = p.max_coll_bytes;
    return ncclSuccess;
  });
}

}  // namespace mesh::abi
