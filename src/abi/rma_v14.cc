// SPDX-License-Identifier: Apache-2.0
// ncclRmaPlugin_v14 (NCCL 2.30.7): NCCL's own GIN proxy runs on top of this RMA table. Every
// signal is strong here (one ordered stream per peer), so isStrongSignal asks for nothing more.
#include "abi/rma_table.h"

namespace mesh::abi::gin_abi {
namespace {

ncclResult_t iput_signal_v14(void* ctx, int context, uint64_t src_off, void* src, size_t size,
                             uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                             void* signal, uint64_t value, uint32_t op, bool /*strong*/,
                             void** request) {
  return iput_signal(ctx, context, src_off, src, size, dst_off, dst, rank, signal_off, signal,
                     value, op, request);
}

}  // namespace
}  // namespace mesh::abi::gin_abi

extern "C" {
__attribute__((visibility("default"))) ncclRma_v14_t ncclRmaPlugin_v14 = {
    MESH_RMA_HEAD,
    .iput = mesh::abi::gin_abi::iput,
    .iputSignal = mesh::abi::gin_abi::iput_signal_v14,
    .iget = mesh::abi::gin_abi::iget,
    .iflush = mesh::abi::gin_abi::iflush,
    .test = mesh::abi::gin_abi::test,
    .rmaProgress = mesh::abi::gin_abi::progress,
    .queryLastError = mesh::abi::gin_abi::query_last_error,
    .finalize = mesh::abi::gin_abi::finalize,
};
}  // extern "C"
