// SPDX-License-Identifier: Apache-2.0
// The first failure of a connection, kept until NCCL's next isend/irecv/test returns it. Both
// transports use it: TCP's stream workers and RDMA's device async thread record failures from
// their own threads, and NCCL's progress thread checks failed() on every call.
//
// Threads: fail() from any thread; failed() is a lock-free read; report() from the progress
// thread (any thread is safe).
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "nccl/common.h"

namespace mesh {

class FailureLatch {
 public:
  // Records the first failure; later ones are its consequences (a dead peer fails every
  // socket and QP) and are dropped, so the WARN names the cause.
  void fail(ncclResult_t code, const std::string& why);
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // The recorded code (ncclInternalError if nothing was recorded); the first call logs one
  // WARN "<who>: <why>", so a connection warns once however often NCCL calls it afterwards.
  ncclResult_t report(const std::string& who);

 private:
  std::atomic<bool> failed_{false};
  std::mutex mu_;
  ncclResult_t code_ = ncclSuccess;
  std::string why_;
  bool warned_ = false;
};

}  // namespace mesh
