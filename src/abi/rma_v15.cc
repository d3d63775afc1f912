// SPDX-License-Identifier: Apache-2.0
// ncclRmaPlugin_v15 (NCCL 2.31): v14 with `optFlags` on iput, iputSignal and iget, a hint that
// must not change data or ordering; none is needed (every signal is strong, messages are already
// batched per peer stream).
#include "abi/rma_table.h"

namespace mesh::abi::gin_abi {
namespace {

ncclResult_t iput_v15(void* ctx, int context, uint64_t src_off, void* src, size_t size,
                      uint64_t dst_off, void* dst, uint32_t rank, uint32_t /*opt*/,
                      void** request) {
  return iput(ctx, context, src_off, src, size, dst_off, dst, rank, request);
}
ncclResult_t iput_signal_v15(void* ctx, int context, uint64_t src_off, void* src, size_t size,
                             uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                             void* signal, uint64_t value, uint32_t op, bool /*strong*/,
                             uint32_t /*opt*/, void** request) {
  return iput_signal(ctx, context, src_off, src, size, dst_off, dst, rank, signal_off, signal,
                     value, op, request);
}
ncclResult_t iget_v15(void* ctx, int context, uint64_t remote_off, void* remote, size_t size,
                      uint64_t local_off, void* local, uint32_t rank, uint32_t /*opt*/,
                      void** request) {
  return iget(ctx, context, remote_off, remote, size, local_off, local, rank, request);
}

}  // namespace
}  // namespace mesh::abi::gin_abi

extern "C" {
__attribute__((visibility("default"))) ncclRma_v15_t ncclRmaPlugin_v15 = {
    MESH_RMA_HEAD,
    .iput = mesh::abi::gin_abi::iput_v15,
    .iputSignal = mesh::abi::gin_abi::iput_signal_v15,
    .iget = mesh::abi::gin_abi::iget_v15,
    .iflush = mesh::abi::gin_abi::iflush,
    .test = mesh::abi::gin_abi::test,
    .rmaProgress = mesh::abi::gin_abi::progress,
    .queryLastError = mesh::abi::gin_abi::query_last_error,
    .finalize = mesh::abi::gin_abi::finalize,
};
}  // extern "C"
