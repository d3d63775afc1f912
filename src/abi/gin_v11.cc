// SPDX-License-Identifier: Apache-2.0
// ncclGinPlugin_v11 (NCCL 2.28.7 ... 2.29.3; found only in the net plugin's library): the
// collComm is the data-path target and every operation uses context 0; createContext is not
// called in proxy mode, and answers with a one-context GinContext where it is.
#include "abi/gin_entry.h"

namespace mesh::abi::gin_abi {
namespace {

ncclResult_t create_context_v11(void* comm, int /*signals*/, int /*counters*/, void** gin_ctx,
                                ncclNetDeviceHandle_v11_t** dev_handle) {
  if (dev_handle != nullptr) *dev_handle = nullptr;  // proxy mode: no device-side handle
  return create_context(comm, 1, gin_ctx);
}
ncclResult_t iput_v11(void* comm, uint64_t src_off, void* src, size_t size, uint64_t dst_off,
                      void* dst, uint32_t rank, void** request) {
  return iput(comm, 0, src_off, src, size, dst_off, dst, rank, request);
}
ncclResult_t iput_signal_v11(void* comm, uint64_t src_off, void* src, size_t size, uint64_t dst_off,
                             void* dst, uint32_t rank, uint64_t signal_off, void* signal,
                             uint64_t value, uint32_t op, void** request) {
  return iput_signal(comm, 0, src_off, src, size, dst_off, dst, rank, signal_off, signal, value, op,
                     request);
}

}  // namespace
}  // namespace mesh::abi::gin_abi

extern "C" {
__attribute__((visibility("default"))) ncclGin_v11_t ncclGinPlugin_v11 = {
    .name = "Mesh",
    .init = mesh::abi::gin_abi::init,
    .devices = mesh::abi::gin_abi::devices,
    .getProperties = mesh::abi::gin_abi::get_properties<ncclNetProperties_v11_t>,
    .listen = mesh::abi::gin_abi::listen,
    .connect = mesh::abi::gin_abi::connect,
    .createContext = mesh::abi::gin_abi::create_context_v11,
    .regMrSym = mesh::abi::gin_abi::reg_mr_sym_gin,
    .regMrSymDmaBuf = mesh::abi::gin_abi::reg_mr_sym_dmabuf_gin,
    .deregMrSym = mesh::abi::gin_abi::dereg_mr_sym,
    .destroyContext = mesh::abi::gin_abi::destroy_context,
    .closeColl = mesh::abi::gin_abi::close_coll,
    .closeListen = mesh::abi::gin_abi::close_listen,
    .iput = mesh::abi::gin_abi::iput_v11,
    .iputSignal = mesh::abi::gin_abi::iput_signal_v11,
    .test = mesh::abi::gin_abi::test,
    .ginProgress = mesh::abi::gin_abi::progress,
    .queryLastError = mesh::abi::gin_abi::query_last_error,
    .finalize = mesh::abi::gin_abi::finalize,
};
}  // extern "C"
