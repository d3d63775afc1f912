// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/rdma_memory.h"

#include <sys/socket.h>

#include <cerrno>
#include <memory>

#include "util/log.h"
#include "util/socket_util.h"

namespace mesh::rdma {

bool register_for_qps(const std::vector<std::unique_ptr<QueuePair>>& qps, void* addr, size_t size,
                      int dmabuf_fd, uint64_t offset, RdmaMemory* mem, std::string* why) {
  for (size_t q = 0; q < qps.size(); ++q) {
    VerbsDevice* dev = qps[q]->device();
    CachedMr* held = nullptr;
    for (auto& [d, m] : mem->held) {
      if (d == dev) held = m;
    }
    if (held == nullptr) {
      held = dmabuf_fd >= 0 ? dev->acquire_dmabuf_mr(addr, size, offset, dmabuf_fd, why)
                            : dev->acquire_mr(addr, size, why);
      if (held == nullptr) return false;
      mem->held.emplace_back(dev, held);
    }
    mem->lkey[q] = held->mr->lkey;
    mem->rkey[q] = held->mr->rkey;
  }
  return true;
}

ncclResult_t register_rdma_memory(const std::vector<std::unique_ptr<QueuePair>>& qps,
                                  MemoryRegion* mr, int dmabuf_fd, uint64_t offset,
                                  const std::string& conn) {
  auto mem = std::make_unique<RdmaMemory>();
  // GPU memory (and its stand-in, NCCL_MESH_TEST_HOST_AS_GPU): reached by the NIC only.
  mem->gpu = mr->type == NCCL_PTR_CUDA || dmabuf_fd >= 0;
  std::string why;
  if (!register_for_qps(qps, mr->data, mr->size, dmabuf_fd, offset, mem.get(), &why)) {
    MESH_WARN("%s: registering %zu bytes at %p failed: %s", conn.c_str(), mr->size, mr->data,
              why.c_str());
    return ncclSystemError;
  }
  mr->transport = std::move(mem);
  return ncclSuccess;
}

ncclResult_t memory_for_send(const std::string& conn, size_t size, MemoryRegion* mr,
                             const RdmaMemory** mem) {
  *mem = mr != nullptr ? dynamic_cast<const RdmaMemory*>(mr->transport.get()) : nullptr;
  if (size > 0 && *mem == nullptr) {
    MESH_WARN("%s: isend of %zu bytes without an RDMA registration (mhandle %p)", conn.c_str(),
              size, static_cast<void*>(mr));
    return ncclInvalidArgument;
  }
  if (size > kMaxMessageSize) {
    MESH_WARN("%s: isend of %zu bytes: RDMA messages are limited to %llu bytes", conn.c_str(), size,
              static_cast<unsigned long long>(kMaxMessageSize));
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

bool send_ready_byte(int fd, std::string* why) {
  // One byte into an empty socket buffer: never blocks, never partial.
  const ssize_t n = send(fd, &kReadyByte, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n == 1) return true;
  *why =
      "sending the ready byte on the control socket failed: " + errno_text(n < 0 ? errno : EPIPE) +
      " (the peer closed the connection during setup?)";
  return false;
}

}  // namespace mesh::rdma
