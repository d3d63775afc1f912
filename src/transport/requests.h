// SPDX-License-Identifier: Apache-2.0
// What both transports do alike with NCCL's requests: a fixed pool of NCCL_NET_MAX_REQUESTS
// per comm, the int size test() reports, and the words of the errors for the same misuse, so
// a user reads one wording whatever the cable.
#pragma once

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl/common.h"

namespace mesh {

// test() reports int sizes in every ABI version; NCCL never sends more than 1 GiB at once.
inline int reported_size(size_t size) {
  return size > INT_MAX ? INT_MAX : static_cast<int>(size);
}

// True when `r` is one of `pool`'s requests and in flight: test() on anything else (a request
// already completed, another comm's) is a caller error, answered by warn_not_in_flight().
template <typename Request, size_t N>
bool is_in_flight(const std::array<Request, N>& pool, const Request* r) {
  return r >= pool.data() && r < pool.data() + N && r->in_use;
}

// Each logs one WARN naming the connection `conn` and returns the code to return to NCCL.
// A request past NCCL_NET_MAX_REQUESTS in flight (`send`: isend, else irecv).
ncclResult_t warn_pool_exhausted(const std::string& conn, bool send);
// test() on a request that is_in_flight() rejects.
ncclResult_t warn_not_in_flight(const std::string& conn);
// irecv with n buffers where the device advertises maxRecvs = 1.
ncclResult_t warn_grouped_receive(const std::string& conn, int n);

// The failure text when a message does not fit the receive buffer posted for it: at the
// receiver (it learnt the size from the peer) and at the sender (the receiver announced the
// capacity). No byte is written past the buffer in either case.
std::string oversize_at_receiver(uint64_t size, uint64_t capacity);
std::string oversize_at_sender(uint64_t size, uint64_t capacity);

}  // namespace mesh
