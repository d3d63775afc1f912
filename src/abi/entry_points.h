// SPDX-License-Identifier: Apache-2.0
// Entry points shared by the ncclNetPlugin_v6 ... _v12 tables: a function appears here when its
// signature is the same in several versions. Each one forwards to the version-independent core
// (plugin/plugin.h) inside guard(), so no C++ exception ever crosses the C ABI.
//
// Device handles (v7 and later): connect/accept receive `ncclNetDeviceHandle_t** devComm`. NCCL
// points it at a NULL handle for a host plugin and RCCL (AMD AINIC) at a live object; either way a
// host plugin must never write through it, so no entry point here reads or writes it.
#pragma once

#include <exception>

#include "nccl/net.h"
#include "plugin/plugin.h"
#include "util/log.h"

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

// ---- Every version ----
ncclResult_t devices(int* ndev);
ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle);
ncclResult_t dereg_mr(void* comm, void* mhandle);
ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                    void** request);
ncclResult_t test(void* request, int* done, int* sizes);
ncclResult_t close_send(void* comm);
ncclResult_t close_recv(void* comm);
ncclResult_t close_listen(void* comm);

// ---- v6..v10: init once per process, one shared context ----
ncclResult_t legacy_init(ncclDebugLogger_t logger);
ncclResult_t legacy_listen(int dev, void* handle, void** listen_comm);
ncclResult_t legacy_connect(int dev, void* handle, void** send_comm);
ncclResult_t accept_v6(void* listen_comm, void** recv_comm);

// ---- v7..v12: device handles, left untouched (see above) ----
ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v7_t** dev_comm);

// ---- v6..v8: int message sizes (NCCL's shims refuse more than 1 GiB before calling) ----
ncclResult_t isend_int(void* comm, void* data, int size, int tag, void* mhandle, void** request);
ncclResult_t irecv_int(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                       void** request);
// v6 and v7 register with an int size too; v8 and later with size_t.
ncclResult_t reg_mr_int(void* comm, void* data, int size, int type, void** mhandle);
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);

// ---- v10..v12: size_t sizes and profiler handles (ignored: the plugin does no profiling) ----
ncclResult_t isend_v10plus(void* comm, void* data, size_t size, int tag, void* mhandle,
                           void* phandle, void** request);
ncclResult_t irecv_v10plus(void* comm, int n, void** data, size_t* sizes, int* tags,
                           void** mhandles, void** phandles, void** request);

// ---- v11, v12: one context per communicator ----
ncclResult_t context_init(void** ctx, uint64_t comm_id, int traffic_class,
                          ncclDebugLogger_t logger);
ncclResult_t context_finalize(void* ctx);
ncclResult_t context_listen(void* ctx, int dev, void* handle, void** listen_comm);
ncclResult_t context_connect(void* ctx, int dev, void* handle, void** send_comm,
                             ncclNetDeviceHandle_v7_t** dev_comm);

// getProperties of every version: one filler for all properties structs, each field written only
// where the version has it (NCCL's shims fill the rest for old versions: v6-v8 get maxP2pBytes =
// 1 GiB and vProps = {1, {dev}} from NCCL itself).
template <typename Props>
ncclResult_t fill_properties(int dev, Props* props) {
  return guard("getProperties", [&] {
    DeviceProperties p;
    ncclResult_t rc = core().properties(dev, &p);
    if (rc != ncclSuccess) return rc;
    *props = Props{};
    props->name = const_cast<char*>(p.name);
    props->pciPath = const_cast<char*>(p.pci_path);
    props->guid = p.guid;
    props->ptrSupport = p.ptr_support;
    props->speed = p.speed_mbps;
    props->port = p.port;
    props->latency = p.latency_us;
    props->maxComms = p.max_comms;
    props->maxRecvs = p.max_recvs;
    if constexpr (requires { props->netDeviceType; }) {  // v7+
      props->netDeviceType = NCCL_NET_DEVICE_HOST;
      props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
    }
    if constexpr (requires { props->regIsGlobal; }) props->regIsGlobal = 0;  // v8+
    if constexpr (requires { props->vProps; }) {                             // v9+
      props->forceFlush = 0;
      props->vProps.ndevs = 1;
      props->vProps.devs[0] = dev;
      props->maxP2pBytes = p.max_p2p_bytes;
      props->maxCollBytes = p.max_coll_bytes;
    }
    if constexpr (requires { props->maxMultiRequestSize; }) props->maxMultiRequestSize = 1;  // v11+
    if constexpr (requires { props->railId; }) {                                             // v12
      // A rail (NCCL: NICs of every node behind one switch; with NCCL_CROSS_NIC=0 both ends of a
      // connection must have the same railId) and a plane (NICs of different planes are never
      // connected) describe a switched fabric. In a switchless mesh a device is a NUMA-local group
      // of cables, every device reaches every peer, and which cable carries a connection depends
      // on the peer, not on the device: any rail number would be invented, and distinct planes
      // would forbid connections that work. UNDEF is the truth, and it is what NCCL 2.30 assumes
      // for every v11 plugin, so v12 behaves exactly like v11 here (docs/design.md).
      props->railId = NCCL_NET_ID_UNDEF;
      props->planeId = NCCL_NET_ID_UNDEF;
    }
    return ncclSuccess;
  });
}

}  // namespace mesh::abi
