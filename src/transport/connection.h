// SPDX-License-Identifier: Apache-2.0
// What the ABI layer sees of a send or receive comm, whatever the transport. Every opaque
// pointer handed to NCCL starts with an ObjectTag so a wrong or stale pointer is reported
// instead of being used (NCCL passes our own pointers back, but a mix-up must not corrupt memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nccl/common.h"

namespace mesh {

enum class ObjectTag : uint64_t {
  kContext = 0x6d6573682d637478,  // "mesh-ctx"
  kListen = 0x6d6573682d6c736e,   // "mesh-lsn"
  kSend = 0x6d6573682d736e64,     // "mesh-snd"
  kRecv = 0x6d6573682d726376,     // "mesh-rcv"
  kRequest = 0x6d6573682d726571,  // "mesh-req"
  kMemory = 0x6d6573682d6d656d,   // "mesh-mem"
  kDead = 0x6d6573682d646561,     // "mesh-dea": set when an object is destroyed
};

class Connection;

// First member of every request a transport hands out.
struct RequestHeader {
  ObjectTag tag = ObjectTag::kRequest;
  Connection* owner = nullptr;
};

// What a transport keeps for a registration (RDMA: the memory keys per QP). TCP keeps nothing.
struct TransportMemory {
  virtual ~TransportMemory() = default;
};

// A registered memory region (the mhandle NCCL passes back to isend/irecv).
struct MemoryRegion {
  ObjectTag tag = ObjectTag::kMemory;
  void* data = nullptr;
  size_t size = 0;
  int type = 0;
  const void* owner = nullptr;  // the comm it was registered on
  std::unique_ptr<TransportMemory> transport;
};

class Connection {
 public:
  explicit Connection(ObjectTag tag) : tag_(tag) {}
  virtual ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  ObjectTag tag() const { return tag_; }

  // Contract of ncclNet isend/irecv/test (see docs/design.md): never block; *request = nullptr
  // means "retry later"; errors are returned once per failing call with one WARN per comm.
  // `mr`/`mrs` are the registrations NCCL passes (validated by the caller; may be null for
  // zero-byte messages).
  virtual ncclResult_t isend(void* data, size_t size, int tag, MemoryRegion* mr,
                             void** request) = 0;
  virtual ncclResult_t irecv(int n, void** data, size_t* sizes, int* tags, MemoryRegion** mrs,
                             void** request) = 0;
  virtual ncclResult_t test(RequestHeader* request, int* done, int* sizes) = 0;
  // ncclNet iflush: make received GPU data visible to the GPU. *request = nullptr when there
  // is nothing to flush (host memory, TCP).
  virtual ncclResult_t iflush(int /*n*/, void** /*data*/, int* /*sizes*/, MemoryRegion** /*mrs*/,
                              void** request) {
    *request = nullptr;
    return ncclSuccess;
  }
  // Which memory regMr may register on this comm (NCCL_PTR_HOST, NCCL_PTR_CUDA): host memory
  // everywhere; GPU memory only where the transport moves it without the CPU (TCP copies
  // through the CPU, so NCCL only passes GPU memory to devices that advertised it).
  virtual bool accepts_memory(int type) const { return type == NCCL_PTR_HOST; }
  // Called by regMr after the region is filled in; a transport that needs keys attaches them
  // (mr->transport). dmabuf_fd is -1 except for regMrDmaBuf.
  virtual ncclResult_t register_memory(MemoryRegion* /*mr*/, int /*dmabuf_fd*/,
                                       uint64_t /*offset*/) {
    return ncclSuccess;
  }
  // Listener side, before accept() hands the comm to NCCL: true once the peer's side is ready
  // to be written to (RDMA: the connector's QPs are in RTS, its ready byte arrived). Never
  // blocks: false with an empty *why while waiting, false with *why set when the connection
  // failed meanwhile. TCP is ready as soon as its sockets are.
  virtual bool poll_ready(std::string* /*why*/) { return true; }
  // Stops the transport's threads and closes its sockets; never blocks on the peer.
  virtual void close() = 0;
  virtual std::string describe() const = 0;

 private:
  ObjectTag tag_;  // must stay the first data member after the vtable pointer: see plugin.cc
};

}  // namespace mesh
