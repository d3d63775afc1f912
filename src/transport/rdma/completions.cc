// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/completions.h"

#include <cstdio>

namespace mesh::rdma {

std::string completion_error(const QueuePair& qp, const ibv_wc& c) {
  char vendor[16];
  std::snprintf(vendor, sizeof(vendor), "0x%x", c.vendor_err);
  return "completion error on " + qp.describe() + ": " +
         qp.device()->api()->wc_status_str(c.status) + " (status " + std::to_string(c.status) +
         ", vendor error " + vendor + ")";
}

ncclResult_t completion_code(const ibv_wc& c) {
  return c.status == IBV_WC_RETRY_EXC_ERR || c.status == IBV_WC_REM_ABORT_ERR ||
                 c.status == IBV_WC_RNR_RETRY_EXC_ERR
             ? ncclRemoteError
             : ncclSystemError;
}

}  // namespace mesh::rdma
