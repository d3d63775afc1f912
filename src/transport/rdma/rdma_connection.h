// A send or receive comm over RDMA (RoCE v2 or InfiniBand), NCCL-IB style:
//  - irecv writes a clear-to-send entry (buffer address, capacity, rkeys) into the sender's ring
//    with one inline RDMA WRITE on QP 0;
//  - isend answers "retry" (NULL) until its entry is there, then writes the message with one
//    WRITE_WITH_IMM per QP (128-byte-aligned slices of the sender's actual size, immediate =
//    size) straight into the posted buffer: no copy, no receiver CPU;
//  - test() polls the QPs' completion queues; a request is done when every QP reported it.
// The TCP control socket of the handshake stays open as a liveness signal: when the peer's
// process dies its kernel closes it, which is faster than RDMA retry timeouts.
//
// Threads: isend/irecv/test run on NCCL's progress thread under `mu_`; the device's async
// thread only touches `failure_`.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "transport/connection.h"
#include "util/socket_util.h"
#include "transport/rdma/endpoint.h"

namespace mesh::rdma {

// The per-QP keys of one registration (MemoryRegion::transport for RDMA comms).
struct RdmaMemory final : TransportMemory {
  std::array<uint32_t, kMaxQps> lkey{};
  std::array<uint32_t, kMaxQps> rkey{};
  std::vector<std::pair<VerbsDevice*, CachedMr*>> held;  // one per distinct device
  ~RdmaMemory() override {
    for (auto& [dev, mr] : held) dev->release_mr(mr);
  }
};

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

 private:
  struct Request {
    RequestHeader hdr;
    bool in_use = false;
    uint32_t seq = 0;
    size_t capacity = 0;
    size_t size = 0;
    size_t pending = 0;  // QP completions still expected
  };

  bool open_flush_qp(std::string* why);  // caller holds mu_
  void poll_flush();                     // caller holds mu_
  void poll();                           // completions and liveness; caller holds mu_
  void check_control();                  // caller holds mu_
  bool post_cts(Request* r, void* data, const RdmaMemory* mem);
  void fail(ncclResult_t code, const std::string& why);
  ncclResult_t report_failure();
  size_t in_flight() const;

  const bool sender_;
  std::shared_ptr<Endpoint> ep_;
  UniqueFd control_;
  std::string local_;
  std::string peer_;
  std::string summary_;
  std::shared_ptr<FailureLatch> failure_ = std::make_shared<FailureLatch>();

  std::mutex mu_;
  std::array<Request, NCCL_NET_MAX_REQUESTS> pool_;  // slot = sequence % NCCL_NET_MAX_REQUESTS
  uint32_t next_seq_ = 0;
  std::array<uint32_t, kMaxQps> completed_{};  // receiver: messages completed per QP
  uint32_t cts_posted_ = 0;

  // GPU flush (receiver): a QP connected to itself on QP 0's device; an RDMA READ of one byte
  // of the received buffer completes only after the NIC's earlier writes reached GPU memory.
  struct FlushRequest {
    RequestHeader hdr;
    bool in_use = false;
    bool done = false;
  };
  std::unique_ptr<QueuePair> flush_qp_;
  uint8_t* flush_buf_ = nullptr;
  CachedMr* flush_mr_ = nullptr;
  std::array<FlushRequest, NCCL_NET_MAX_REQUESTS> flushes_;
  int64_t peer_gone_ms_ = -1;
};

}  // namespace mesh::rdma
