// SPDX-License-Identifier: Apache-2.0
// Draining a QP's completion queue, and the words of a failed completion: shared by the direct
// comm, the relayed sender and the relay's forwarder, so each reads one loop and a user reads
// one wording.
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "nccl/common.h"
#include "transport/rdma/queue_pair.h"

namespace mesh::rdma {

// "completion error on rxe_a port 1 QP 0x11: transport retry counter exceeded (status 12,
// vendor error 0x0)".
std::string completion_error(const QueuePair& qp, const ibv_wc& c);
// What a failed completion means to NCCL: the peer (retries exhausted, remote abort) or us.
ncclResult_t completion_code(const ibv_wc& c);

// Calls on(completion) for everything in qp's completion queue, in order, until it is empty.
// False when ibv_poll_cq fails (*why says so) or on() returns false (it has recorded why).
template <typename OnCompletion>
bool drain_completions(QueuePair& qp, std::string* why, OnCompletion&& on) {
  ibv_wc wc[16];
  for (;;) {
    const int n = ibv_poll_cq(qp.cq(), 16, wc);
    if (n < 0) {
      *why = "ibv_poll_cq on " + qp.describe() + " failed";
      return false;
    }
    for (int i = 0; i < n; ++i) {
      if (!on(wc[i])) return false;
    }
    if (n < 16) return true;
  }
}

}  // namespace mesh::rdma
