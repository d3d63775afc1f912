// SPDX-License-Identifier: Apache-2.0
// A send or receive comm over RDMA (RoCE v2 or InfiniBand), NCCL-IB style:
//  - irecv writes a clear-to-send entry (buffer address, capacity, rkeys) into the sender's ring
//    with one inline RDMA WRITE on QP 0;
//  - isend answers "retry" (NULL) until its entry is there, then writes the message with one
//    WRITE_WITH_IMM per QP (128-byte-aligned slices of the sender's actual size, immediate =
//    size) straight into the posted buffer: no copy, no receiver CPU;
//  - test() polls the QPs' completion queues; a request is done when every QP reported it.
// The TCP control socket of the handshake stays open as a liveness signal: when the peer's
// process dies its kernel closes it, which is faster than RDMA retry timeouts. Its only payload
// is one "ready" byte from the connector once its QPs are in RTS: the listener hands out the
// receive comm only after reading it (poll_ready), so no clear-to-send hits a QP still in INIT.
//
// Memory the CPU may touch: the plugin's own (clear-to-send ring, flush buffer) and host
// registrations. NCCL_PTR_CUDA and dma-buf registrations (RdmaMemory::gpu) are reached by the
// NIC only: never posted inline (the verbs library would copy them with the CPU).
//
// Threads: isend/irecv/test run on NCCL's progress thread under `mu_`; the device's async
// thread only touches `failure_`.
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
#include "util/socket_util.h"

namespace mesh::rdma {

class RdmaConnection final : public Connection {
 public:
  RdmaConnection(std::shared_ptr<Endpoint> endpoint, UniqueFd control, std::string local,
                 std::string peer);
  ~RdmaConnection() override;

  ncclResult_t isend(void* data, size_t size, int tag, MemoryRegion* mr, void** request) override;
  ncclResult_t irecv(int n, void** data, size_t* sizes, int* tags, MemoryRegion** mrs,
                     void** request) override;
  ncclResult_t test(RequestHeader* request, int* done, int* sizes) override;
  ncclResult_t iflush(int n, void** data, int* sizes, MemoryRegion** mrs, void** request) override;
  // Host memory and GPU memory (registered through GPUDirect: peer memory or dma-buf).
  bool accepts_memory(int type) const override {
    return type == NCCL_PTR_HOST || type == NCCL_PTR_CUDA;
  }
  ncclResult_t register_memory(MemoryRegion* mr, int dmabuf_fd, uint64_t offset) override;
  void close() override;
  std::string describe() const override;
  // Listener side: true once the connector's "ready" byte arrived (non-blocking). False with
  // an empty *why while waiting; false with *why set when the connection failed meanwhile.
  bool poll_ready(std::string* why) override;
  // Its QPs (one or more per cable): GIN's one-sided path opens its own QP on the first one's
  // port (gin/one_sided.h).
  const Endpoint& endpoint() const { return *ep_; }

 private:
  struct Request {
    RequestHeader hdr;
    bool in_use = false;
    uint32_t seq = 0;
    size_t capacity = 0;
    size_t size = 0;
    size_t pending = 0;  // QP completions still expected
  };

  bool open_flush_qps(std::string* why);  // caller holds mu_
  void poll_flush();                      // caller holds mu_
  void poll();                            // completions and liveness; caller holds mu_
  void check_control();                   // caller holds mu_
  bool post_cts(Request* r, void* data, const RdmaMemory* mem);
  void fail(ncclResult_t code, const std::string& why);
  ncclResult_t report_failure();
  ncclResult_t closed_error();  // a call after close(): one WARN, ncclInternalError
  size_t in_flight() const;

  const bool sender_;
  std::shared_ptr<Endpoint> ep_;
  UniqueFd control_;
  std::string local_;
  std::string peer_;
  std::string summary_;
  std::shared_ptr<FailureLatch> failure_ = std::make_shared<FailureLatch>();
  std::atomic<bool> closed_warned_{false};  // closed_error() warns once

  std::mutex mu_;
  // Any NCCL_NET_MAX_REQUESTS requests may be outstanding, tested in any order: a request takes
  // any free slot; by_seq_ finds the request of a sequence number for its completions.
  std::array<Request, NCCL_NET_MAX_REQUESTS> pool_;
  std::array<Request*, NCCL_NET_MAX_REQUESTS> by_seq_{};  // index = sequence % 32
  uint32_t next_seq_ = 0;
  bool ready_ = false;                         // receiver: the connector's ready byte arrived
  std::array<uint32_t, kMaxQps> completed_{};  // receiver: messages completed per QP
  uint32_t cts_posted_ = 0;

  // GPU flush (receiver): per RDMA device of the connection, a QP connected to itself; an RDMA
  // READ of one byte of the received buffer through a device completes only after that device's
  // earlier writes reached GPU memory, so a striped receive needs one READ per device.
  struct FlushRequest {
    RequestHeader hdr;
    bool in_use = false;
    size_t pending = 0;  // READs still to complete
  };
  struct FlushQp {
    std::unique_ptr<QueuePair> qp;
    CachedMr* mr = nullptr;  // flush_buf_ on this device
    size_t data_qp = 0;      // a data QP on this device: its rkey of the flushed buffer
  };
  Request* take_slot(uint32_t seq);  // nullptr: no free slot or the sequence's slot is busy
  std::vector<FlushQp> flush_qps_;
  uint8_t* flush_buf_ = nullptr;
  std::array<FlushRequest, NCCL_NET_MAX_REQUESTS> flushes_;
  int64_t peer_gone_ms_ = -1;
};

}  // namespace mesh::rdma
