// SPDX-License-Identifier: Apache-2.0
// The version-independent GIN/RMA plugin: every entry point of ncclGin_v11 ... ncclRma_v15 once.
// The per-version tables (src/abi/gin_*.cc) only convert arguments and call these inside guard().
//
// Objects NCCL gets back (objects.h) are checked against the set of live ones before use, so a
// stale or foreign pointer is reported (one WARN) instead of dereferenced. The data-path calls
// take `target`: a collComm (v11, v12: context = 0 or the connectionId) or a GinContext from
// createContext (v13+), whose context index must be below its nContexts.
//
// Threads: init/listen/connect/createContext/regMrSym/close* on NCCL's init and proxy service
// threads; iput/iputSignal/iget/iflush/test/progress/queryLastError on NCCL's GIN progress
// thread and, from NCCL 2.29.2 on, its host RMA proxy thread, possibly at the same time on the
// same comm (comm.h says what each touches).
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl/gin_common.h"

namespace mesh::gin {

ncclResult_t init(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger);
ncclResult_t finalize(void* ctx);
ncclResult_t devices(int* ndev);
// NCCL_PTR_HOST, plus NCCL_PTR_CUDA where the CUDA driver loads (said once in the log).
int pointer_support();
ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm);
ncclResult_t connect(void* const* handles, int nranks, int rank, void* listen_comm,
                     void** coll_comm);
ncclResult_t create_context(void* coll_comm, int contexts, void** gin_ctx);
ncclResult_t destroy_context(void* gin_ctx);
ncclResult_t reg_mr_sym(void* coll_comm, void* data, size_t size, int type, uint64_t flags,
                        void** mhandle);
ncclResult_t dereg_mr_sym(void* coll_comm, void* mhandle);
ncclResult_t close_coll(void* coll_comm);
ncclResult_t close_listen(void* listen_comm);

ncclResult_t iput(void* target, int context, uint64_t src_off, void* src, size_t size,
                  uint64_t dst_off, void* dst, uint32_t rank, void** request);
ncclResult_t iput_signal(void* target, int context, uint64_t src_off, void* src, size_t size,
                         uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                         void* signal, uint64_t signal_value, uint32_t signal_op, void** request);
ncclResult_t iget(void* target, int context, uint64_t remote_off, void* remote, size_t size,
                  uint64_t local_off, void* local, uint32_t rank, void** request);
ncclResult_t iflush(void* target, int context, void* mhandle, uint32_t rank, void** request);
ncclResult_t test(void* coll_comm, void* request, int* done);
// ginProgress/rmaProgress: the engine thread does the work; this reports a failed stream.
ncclResult_t progress(void* target);
ncclResult_t query_last_error(void* target, bool* has_error);

}  // namespace mesh::gin
