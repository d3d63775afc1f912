// SPDX-License-Identifier: Apache-2.0
#include "transport/failure_latch.h"

#include "util/log.h"

namespace mesh {

void FailureLatch::fail(ncclResult_t code, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.load(std::memory_order_relaxed)) return;
  code_ = code;
  why_ = why;
  failed_.store(true, std::memory_order_release);
}

ncclResult_t FailureLatch::report(const std::string& who) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failed_.load(std::memory_order_relaxed)) return ncclInternalError;
  if (!warned_) {
    warned_ = true;
    MESH_WARN("%s: %s", who.c_str(), why_.c_str());
  }
  return code_;
}

}  // namespace mesh
