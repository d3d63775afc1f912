// SPDX-License-Identifier: Apache-2.0
#include "transport/requests.h"

#include "util/log.h"

namespace mesh {

ncclResult_t warn_pool_exhausted(const std::string& conn, bool send) {
  if (send) {
    MESH_WARN("%s: more than %d sends in flight (NCCL's contract allows %d); test() earlier ones",
              conn.c_str(), NCCL_NET_MAX_REQUESTS, NCCL_NET_MAX_REQUESTS);
  } else {
    MESH_WARN("%s: more than %d receives in flight (NCCL's contract allows %d)", conn.c_str(),
              NCCL_NET_MAX_REQUESTS, NCCL_NET_MAX_REQUESTS);
  }
  return ncclInternalError;
}

ncclResult_t warn_not_in_flight(const std::string& conn) {
  MESH_WARN("%s: test() on a request that is not in flight (already completed?)", conn.c_str());
  return ncclInternalError;
}

ncclResult_t warn_grouped_receive(const std::string& conn, int n) {
  MESH_WARN("%s: irecv with %d buffers, but this device advertises maxRecvs=1", conn.c_str(), n);
  return ncclInternalError;
}

std::string oversize_at_receiver(uint64_t size, uint64_t capacity) {
  return "message of " + std::to_string(size) + " bytes exceeds the posted receive buffer of " +
         std::to_string(capacity) + " bytes (sender and receiver disagree on sizes)";
}

std::string oversize_at_sender(uint64_t size, uint64_t capacity) {
  return "message of " + std::to_string(size) + " bytes exceeds the receiver's posted buffer of " +
         std::to_string(capacity) + " bytes (sender and receiver disagree on sizes)";
}

}  // namespace mesh
