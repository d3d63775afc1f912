// SPDX-License-Identifier: Apache-2.0
// Entry points shared by the ncclGinPlugin_v11 ... ncclRmaPlugin_v15 tables (gin_v*.cc,
// rma_v*.cc): each forwards to the version-independent GIN core (gin/core.h) inside guard(), so
// no C++ exception crosses the C ABI. The tables differ only in argument lists; the adapters
// here convert them (context index, signal strength, option flags) and nothing else.
#pragma once

#include "abi/entry_points.h"
#include "gin/core.h"
#include "nccl/gin.h"

namespace mesh::abi::gin_abi {

inline ncclResult_t init(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  return guard("GIN init", [&] { return gin::init(ctx, comm_id, logger); });
}
inline ncclResult_t finalize(void* ctx) {
  return guard("GIN finalize", [&] { return gin::finalize(ctx); });
}
inline ncclResult_t devices(int* ndev) {
  return guard("GIN devices", [&] { return gin::devices(ndev); });
}
// The net properties of the device, as a GIN proxy device: NCCL's GIN proxy (and NCCL 2.30.7's
// RMA loader) takes netDeviceType from here; host memory, plus CUDA memory where the driver loads.
template <typename Props>
ncclResult_t get_properties(int dev, Props* props) {
  const ncclResult_t rc = fill_properties(dev, props);
  if (rc != ncclSuccess) return rc;
  return guard("GIN getProperties", [&] {
    props->netDeviceType = NCCL_NET_DEVICE_GIN_PROXY;
    props->ptrSupport = gin::pointer_support();
    return ncclSuccess;
  });
}
inline ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) {
  return guard("GIN listen", [&] { return gin::listen(ctx, dev, handle, listen_comm); });
}
// `ctx` is not used: NCCL 2.28.9 passes its own net context here, not init()'s.
inline ncclResult_t connect(void* /*ctx*/, void* handles[], int nranks, int rank, void* listen_comm,
                            void** coll_comm) {
  return guard("GIN connect",
               [&] { return gin::connect(handles, nranks, rank, listen_comm, coll_comm); });
}
inline ncclResult_t reg_mr_sym(void* comm, void* data, size_t size, int type, uint64_t flags,
                               void** mhandle) {
  return guard("GIN regMrSym",
               [&] { return gin::reg_mr_sym(comm, data, size, type, flags, mhandle); });
}
// With a ginHandle: NCCL ships the handle's pointer value to the GPU and hands it back to the
// data path, so the mhandle itself serves.
inline ncclResult_t reg_mr_sym_gin(void* comm, void* data, size_t size, int type, uint64_t flags,
                                   void** mhandle, void** gin_handle) {
  const ncclResult_t rc = reg_mr_sym(comm, data, size, type, flags, mhandle);
  if (gin_handle != nullptr) *gin_handle = rc == ncclSuccess ? *mhandle : nullptr;
  return rc;
}
// dma-buf is not advertised (ptrSupport has no NCCL_PTR_DMABUF): the buffer is addressed by its
// virtual address like regMrSym; the fd is not kept.
inline ncclResult_t reg_mr_sym_dmabuf(void* comm, void* data, size_t size, int type,
                                      uint64_t /*offset*/, int /*fd*/, uint64_t flags,
                                      void** mhandle) {
  return reg_mr_sym(comm, data, size, type, flags, mhandle);
}
inline ncclResult_t reg_mr_sym_dmabuf_gin(void* comm, void* data, size_t size, int type,
                                          uint64_t offset, int fd, uint64_t flags, void** mhandle,
                                          void** gin_handle) {
  const ncclResult_t rc = reg_mr_sym_dmabuf(comm, data, size, type, offset, fd, flags, mhandle);
  if (gin_handle != nullptr) *gin_handle = rc == ncclSuccess ? *mhandle : nullptr;
  return rc;
}
inline ncclResult_t dereg_mr_sym(void* comm, void* mhandle) {
  return guard("GIN deregMrSym", [&] { return gin::dereg_mr_sym(comm, mhandle); });
}
inline ncclResult_t destroy_context(void* ctx) {
  return guard("GIN destroyContext", [&] { return gin::destroy_context(ctx); });
}
inline ncclResult_t close_coll(void* comm) {
  return guard("GIN closeColl", [&] { return gin::close_coll(comm); });
}
inline ncclResult_t close_listen(void* comm) {
  return guard("GIN closeListen", [&] { return gin::close_listen(comm); });
}
inline ncclResult_t test(void* comm, void* request, int* done) {
  return guard("GIN test", [&] { return gin::test(comm, request, done); });
}
inline ncclResult_t progress(void* target) {
  return guard("GIN progress", [&] { return gin::progress(target); });
}
inline ncclResult_t query_last_error(void* target, bool* has_error) {
  return guard("GIN queryLastError", [&] { return gin::query_last_error(target, has_error); });
}
inline ncclResult_t create_context(void* comm, int contexts, void** gin_ctx) {
  return guard("GIN createContext", [&] { return gin::create_context(comm, contexts, gin_ctx); });
}

// ---- data path with a context index (v13, RMA v14, v15) ----
inline ncclResult_t iput(void* target, int context, uint64_t src_off, void* src, size_t size,
                         uint64_t dst_off, void* dst, uint32_t rank, void** request) {
  return guard("GIN iput", [&] {
    return gin::iput(target, context, src_off, src, size, dst_off, dst, rank, request);
  });
}
inline ncclResult_t iput_signal(void* target, int context, uint64_t src_off, void* src, size_t size,
                                uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                                void* signal, uint64_t value, uint32_t op, void** request) {
  return guard("GIN iputSignal", [&] {
    return gin::iput_signal(target, context, src_off, src, size, dst_off, dst, rank, signal_off,
                            signal, value, op, request);
  });
}
inline ncclResult_t iget(void* target, int context, uint64_t remote_off, void* remote, size_t size,
                         uint64_t local_off, void* local, uint32_t rank, void** request) {
  return guard("GIN iget", [&] {
    return gin::iget(target, context, remote_off, remote, size, local_off, local, rank, request);
  });
}
inline ncclResult_t iflush(void* target, int context, void* mhandle, uint32_t rank,
                           void** request) {
  return guard("GIN iflush", [&] { return gin::iflush(target, context, mhandle, rank, request); });
}

}  // namespace mesh::abi::gin_abi
