// SPDX-License-Identifier: Apache-2.0
// The send comm of a connection relayed over RDMA (docs/relay.md, "RDMA relay"): this host has
// no cable to the peer, so its QPs go to a neighbour's relay, which forwards every chunk to the
// peer with the ordinary protocol (the peer's receive comm is a plain RdmaConnection).
//  - isend queues the message and returns its request at once (up to NCCL_NET_MAX_REQUESTS);
//    the message is cut into chunks of at most the relay's slot size, each written with one
//    WRITE_WITH_IMM into the relay's staging slot (wire.h 5.) as soon as the relay's credit
//    word says that slot is free;
//  - test() polls the completion queues and posts the chunks that credits now allow; a
//    request is done when all its chunks were written (the relay holds them: NCCL may reuse
//    the buffer).
// The relay learns nothing of the receiver's buffers here; a message larger than the receive
// fails at the receiver (its size travels on), as on a direct connection.
//
// Memory the CPU touches: the credit word (the endpoint's clear-to-send memory, written by the
// relay's NIC) and host registrations for inline sends; GPU registrations never.
// Threads: isend/test run on NCCL's progress thread under `mu_`; the device's async thread only
// touches `failure_`.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "transport/connection.h"
#include "transport/rdma/endpoint.h"
#include "transport/rdma/rdma_memory.h"
#include "transport/rdma/relay_chunk_writer.h"
#include "util/socket_util.h"

namespace mesh::rdma {

class RelaySendConnection final : public Connection {
 public:
  // `relay` is the relay's decoded answer (relay flag set, K and S in range: checked by the
  // caller); the endpoint's QPs are in RTS.
  RelaySendConnection(std::shared_ptr<Endpoint> endpoint, const SetupMessage& relay,
                      UniqueFd control, std::string local, std::string peer, std::string route);
  ~RelaySendConnection() override;

  ncclResult_t isend(void* data, size_t size, int tag, MemoryRegion* mr, void** request) override;
  ncclResult_t irecv(int n, void** data, size_t* sizes, int* tags, MemoryRegion** mrs,
                     void** request) override;
  ncclResult_t test(RequestHeader* request, int* done, int* sizes) override;
  bool accepts_memory(int type) const override {
    return type == NCCL_PTR_HOST || type == NCCL_PTR_CUDA;
  }
  ncclResult_t register_memory(MemoryRegion* mr, int dmabuf_fd, uint64_t offset) override;
  void close() override;
  std::string describe() const override;

 private:
  struct Request {
    RequestHeader hdr;
    bool in_use = false;
    uint32_t seq = 0;
    const uint8_t* data = nullptr;
    size_t size = 0;
    const RdmaMemory* mem = nullptr;
    uint32_t chunks = 0;   // chunks of this message (1 for an empty one)
    uint32_t posted = 0;   // chunks written so far
    uint32_t pending = 0;  // posted chunks whose completion has not arrived
  };

  void poll();  // completions, credits, liveness, then posts what credits allow; holds mu_
  void pump();  // posts the queued chunks that credits allow; holds mu_
  void check_control();
  ncclResult_t report_failure() { return failure_->report(describe()); }
  ncclResult_t closed_error();

  std::shared_ptr<Endpoint> ep_;
  UniqueFd control_;
  std::string local_, peer_, route_, summary_;
  RelayChunkWriter writer_;  // chunks into the relay's slots, paced by its credits
  std::shared_ptr<FailureLatch> failure_ = std::make_shared<FailureLatch>();
  std::atomic<bool> closed_warned_{false};

  std::mutex mu_;
  std::array<Request, NCCL_NET_MAX_REQUESTS> pool_;
  std::array<Request*, NCCL_NET_MAX_REQUESTS> by_seq_{};  // sequence % 32: posting order
  uint32_t next_seq_ = 0;                                 // the next isend's sequence
  uint32_t post_seq_ = 0;  // the oldest message with chunks still to post
  int64_t peer_gone_ms_ = -1;
};

}  // namespace mesh::rdma
