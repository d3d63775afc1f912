// SPDX-License-Identifier: Apache-2.0
// ncclGinPlugin_v12 (NCCL 2.29.7): the collComm is the data-path target and NCCL's proxy passes
// the context as `connectionId`; nConnections and queueDepth at connect are hints (one ordered
// stream per peer carries every context; the queue is bounded per comm, comm.h).
#include "abi/gin_entry.h"

namespace mesh::abi::gin_abi {
namespace {

ncclResult_t connect_v12(void* ctx, void* handles[], int nranks, int rank, int /*connections*/,
                         int /*queue_depth*/, void* listen_comm, void** coll_comm) {
  return connect(ctx, handles, nranks, rank, listen_comm, coll_comm);
}
ncclResult_t create_context_v12(void* comm, int /*signals*/, int /*counters*/, int contexts,
                                void** gin_ctx, ncclNetDeviceHandle_v11_t** dev_handle) {
  if (dev_handle != nullptr) *dev_handle = nullptr;
  return create_context(comm, contexts, gin_ctx);
}
ncclResult_t iput_v12(void* comm, uint64_t src_off, void* src, size_t size, uint64_t dst_off,
                      void* dst, uint32_t rank, int connection, void** request) {
  return iput(comm, connection, src_off, src, size, dst_off, dst, rank, request);
}
ncclResult_t iput_signal_v12(void* comm, uint64_t src_off, void* src, size_t size, uint64_t dst_off,
                             void* dst, uint32_t rank, uint64_t signal_off, void* signal,
                             uint64_t value, uint32_t op, int connection, void** request) {
  return iput_signal(comm, connection, src_off, src, size, dst_off, dst, rank, signal_off, signal,
                     value, op, request);
}

}  // namespace
}  // namespace mesh::abi::gin_abi

extern "C" {
__attribute__((visibility("default"))) ncclGin_v12_t ncclGinPlugin_v12 = {
    .name = "Mesh",
    .init = mesh::abi::gin_abi::init,
    .devices = mesh::abi::gin_abi::devices,
    .getProperties = mesh::abi::gin_abi::get_properties<ncclNetProperties_v11_t>,
    .listen = mesh::abi::gin_abi::listen,
    .connect = mesh::abi::gin_abi::connect_v12,
    .createContext = mesh::abi::gin_abi::create_context_v12,
    .regMrSym = mesh::abi::gin_abi::reg_mr_sym_gin,
    .regMrSymDmaBuf = mesh::abi::gin_abi::reg_mr_sym_dmabuf_gin,
    .deregMrSym = mesh::abi::gin_abi::dereg_mr_sym,
    .destroyContext = mesh::abi::gin_abi::destroy_context,
    .closeColl = mesh::abi::gin_abi::close_coll,
    .closeListen = mesh::abi::gin_abi::close_listen,
    .iput = mesh::abi::gin_abi::iput_v12,
    .iputSignal = mesh::abi::gin_abi::iput_signal_v12,
    .test = mesh::abi::gin_abi::test,
    .ginProgress = mesh::abi::gin_abi::progress,
    .queryLastError = mesh::abi::gin_abi::query_last_error,
    .finalize = mesh::abi::gin_abi::finalize,
};
}  // extern "C"
