// SPDX-License-Identifier: Apache-2.0
// One interface over every GIN/RMA table the plugin exports, each call converted the way NCCL's
// proxy for that version makes it (gin-rma.md 1.3/1.4): v11 has one context and takes the
// collComm on the data path; v12 passes the context as connectionId to the collComm; v13 and
// the RMA tables take createContext's object and a context index (v14/v15 also isStrongSignal,
// v15 optFlags). v11/v12 have no iget/iflush: has_get() is false there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl/gin.h"
#include "nccl/net.h"

namespace gintest {

class GinApi {
 public:
  // Opens `library` and finds the table of `version` (11..15). False with *why otherwise.
  bool open(const std::string& library, int version, std::string* why);
  int version() const { return version_; }
  const char* symbol() const;
  bool has_get() const { return version_ >= 13; }
  // Contexts one comm can have for this version's proxy (v11: only 0).
  int max_contexts() const { return version_ == 11 ? 1 : 4; }

  ncclResult_t init(void** ctx, uint64_t comm_id);
  ncclResult_t devices(int* ndev);
  ncclResult_t properties(int dev, int* device_type, int* ptr_support, std::string* name);
  ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm);
  ncclResult_t connect(void* ctx, void** handles, int nranks, int rank, void* listen_comm,
                       void** comm);
  // The data-path target NCCL's proxy uses: the comm (v11, v12; createContext not called in
  // proxy mode) or createContext's object with `contexts` contexts (v13+).
  ncclResult_t make_target(void* comm, int contexts, void** target);
  ncclResult_t release_target(void* comm, void* target);
  ncclResult_t reg(void* comm, void* data, size_t size, int type, uint64_t flags, void** mh);
  ncclResult_t dereg(void* comm, void* mh);
  ncclResult_t iput(void* target, int context, uint64_t src_off, void* src, size_t size,
                    uint64_t dst_off, void* dst, uint32_t rank, void** request);
  ncclResult_t iput_signal(void* target, int context, uint64_t src_off, void* src, size_t size,
                           uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                           void* signal, uint64_t value, uint32_t op, bool strong, void** request);
  ncclResult_t iget(void* target, int context, uint64_t remote_off, void* remote, size_t size,
                    uint64_t local_off, void* local, uint32_t rank, void** request);
  ncclResult_t iflush(void* target, int context, void* mh, uint32_t rank, void** request);
  ncclResult_t test(void* comm, void* request, int* done);
  ncclResult_t progress(void* target);
  ncclResult_t query_last_error(void* target, bool* has_error);
  ncclResult_t close_coll(void* comm);
  ncclResult_t close_listen(void* listen_comm);
  ncclResult_t finalize(void* ctx);

 private:
  int version_ = 0;
  void* lib_ = nullptr;
  ncclGin_v11_t* v11_ = nullptr;
  ncclGin_v12_t* v12_ = nullptr;
  ncclGin_v13_t* v13_ = nullptr;
  ncclRma_v14_t* v14_ = nullptr;
  ncclRma_v15_t* v15_ = nullptr;
};

}  // namespace gintest
