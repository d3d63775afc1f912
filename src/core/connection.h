// What the ABI layer sees of a send or receive comm, whatever the transport. Every opaque
// pointer handed to NCCL starts with an ObjectTag so a wrong or stale pointer is reported
// instead of being used (NCCL passes our own pointers back, but a mix-up must not corrupt memory).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "abi/nccl_net_abi.h"

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

// A registered memory region (host memory for TCP).
struct MemoryRegion {
  ObjectTag tag = ObjectTag::kMemory;
  void* data = nullptr;
  size_t size = 0;
  int type = 0;
  const void* owner = nullptr;  // the comm it was registered on
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
  virtual ncclResult_t isend(void* data, size_t size, int tag, void** request) = 0;
  virtual ncclResult_t irecv(int n, void** data, size_t* sizes, int* tags, void** request) = 0;
  virtual ncclResult_t test(RequestHeader* request, int* done, int* sizes) = 0;
  // Stops the transport's threads and closes its sockets; never blocks on the peer.
  virtual void close() = 0;
  virtual std::string describe() const = 0;

 private:
  ObjectTag tag_;  // must stay the first data member after the vtable pointer: see plugin.cc
};

}  // namespace mesh
