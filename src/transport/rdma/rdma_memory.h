// SPDX-License-Identifier: Apache-2.0
// What an RDMA comm keeps for one of NCCL's registrations (MemoryRegion::transport), shared by
// the direct comm (rdma_connection.h) and the relayed sender (relay_send_connection.h): the
// keys per QP of the comm (QPs on one device share one registration).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "transport/connection.h"
#include "transport/rdma/devices.h"
#include "transport/rdma/queue_pair.h"
#include "transport/rdma/wire.h"

namespace mesh::rdma {

struct RdmaMemory final : TransportMemory {
  std::array<uint32_t, kMaxQps> lkey{};
  std::array<uint32_t, kMaxQps> rkey{};
  std::vector<std::pair<VerbsDevice*, CachedMr*>> held;  // one per distinct device
  bool gpu = false;  // NCCL_PTR_CUDA or dma-buf: the CPU must never read or write it
  ~RdmaMemory() override {
    for (auto& [dev, mr] : held) dev->release_mr(mr);
  }
};

// Registers [addr, addr + size) on the device of every QP in `qps` (dma-buf when dmabuf_fd >= 0),
// once per distinct device, and fills mem's keys per QP; false with *why.
bool register_for_qps(const std::vector<std::unique_ptr<QueuePair>>& qps, void* addr, size_t size,
                      int dmabuf_fd, uint64_t offset, RdmaMemory* mem, std::string* why);

// Registers `mr` on the device of every QP in `qps` (dma-buf when dmabuf_fd >= 0) and attaches
// the keys to mr->transport. One WARN naming `conn` on failure.
ncclResult_t register_rdma_memory(const std::vector<std::unique_ptr<QueuePair>>& qps,
                                  MemoryRegion* mr, int dmabuf_fd, uint64_t offset,
                                  const std::string& conn);

// isend's checks, shared by both send comms: the registration NCCL passed (required unless the
// message is empty) and the size limit of the immediate. ncclSuccess with *mem set (null for an
// empty message without one); otherwise one WARN naming `conn`.
ncclResult_t memory_for_send(const std::string& conn, size_t size, MemoryRegion* mr,
                             const RdmaMemory** mem);

// The control socket of an RDMA comm (rdma_connection.h): its only byte is the connector's
// "ready"; afterwards it is a liveness signal, EOF meaning the peer (or the relay) is gone.
inline constexpr uint8_t kReadyByte = 'R';
// A closed control socket becomes an error after this long: the peer's last completions may
// still be on their way when its kernel closes the socket.
inline constexpr int64_t kPeerGoneGraceMs = 500;
// Sends the ready byte; false with *why when the socket refused it.
bool send_ready_byte(int fd, std::string* why);

}  // namespace mesh::rdma
