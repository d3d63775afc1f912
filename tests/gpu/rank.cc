// SPDX-License-Identifier: Apache-2.0
#include "rank.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

namespace e2e {

void fatal(const char* fmt, ...) {
  std::fflush(stdout);
  va_list ap;
  va_start(ap, fmt);
  std::fputs("FATAL: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::fflush(stderr);
  // _exit: NCCL's atexit/destructor paths may block on peers that are still waiting for us.
  _exit(3);
}

void checkCuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err != cudaSuccess) {
    fatal("%s:%d: %s: %s (%s)", file, line, what, cudaGetErrorName(err), cudaGetErrorString(err));
  }
}

void checkNccl(ncclResult_t res, ncclComm_t comm, const char* what, const char* file, int line) {
  if (res != ncclSuccess && res != ncclInProgress) {
    fatal("%s:%d: %s: %s (last error: %s)", file, line, what, ncclGetErrorString(res),
          ncclGetLastError(comm));
  }
}

bool cudaDeviceAvailable(std::string& reason) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " +
             cudaGetErrorString(err);
    return false;
  }
  if (count == 0) {
    reason = "cudaGetDeviceCount reports 0 devices";
    return false;
  }
  return true;
}

ncclUniqueId exchangeUniqueId(const RankSetup& setup, int generation) {
  const std::string path = setup.dir + "/uid-" + std::to_string(generation) + ".bin";
  ncclUniqueId id;
  if (setup.rank == 0) {
    // The id embeds the address of a bootstrap root that ncclGetUniqueId starts in this process.
    E2E_NCCL(nullptr, ncclGetUniqueId(&id));
    const std::string tmp = path + ".tmp";
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(id.internal, sizeof id.internal);
      if (!out) fatal("cannot write %s", tmp.c_str());
    }
    // rename() is atomic: a reader sees either no file or the whole id.
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      fatal("rename %s: %s", tmp.c_str(), std::strerror(errno));
    }
    return id;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(id.internal, sizeof id.internal)) return id;
    if (std::chrono::steady_clock::now() > deadline) {
      fatal("rank %d: no unique id at %s after 120 s (did rank 0 start?)", setup.rank,
            path.c_str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Comm createWorldComm(const RankSetup& setup, int generation, const char* name) {
  Comm c;
  c.rank = setup.rank;
  c.nranks = setup.nranks;
  c.name = name;
  const ncclUniqueId id = exchangeUniqueId(setup, generation);
  E2E_NCCL(nullptr, ncclCommInitRank(&c.comm, setup.nranks, id, setup.rank));
  E2E_CUDA(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking));
  return c;
}

void destroyComm(Comm& c) {
  if (c.comm != nullptr) {
    E2E_NCCL(c.comm, ncclCommFinalize(c.comm));
    E2E_NCCL(c.comm, ncclCommDestroy(c.comm));
    c.comm = nullptr;
  }
  if (c.stream != nullptr) {
    E2E_CUDA(cudaStreamDestroy(c.stream));
    c.stream = nullptr;
  }
}

void waitStream(const RankSetup& setup, const Comm& c, const char* what) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(setup.opTimeoutSeconds));
  for (;;) {
    const cudaError_t err = cudaStreamQuery(c.stream);
    if (err == cudaSuccess) return;
    if (err != cudaErrorNotReady) checkCuda(err, what, __FILE__, __LINE__);
    ncclResult_t async = ncclSuccess;
    E2E_NCCL(c.comm, ncclCommGetAsyncError(c.comm, &async));
    if (async != ncclSuccess && async != ncclInProgress) {
      fatal("%s on comm %s: asynchronous NCCL error %s (%s)", what, c.name.c_str(),
            ncclGetErrorString(async), ncclGetLastError(c.comm));
    }
    const auto now = Clock::now();
    if (now > deadline) {
      fatal("%s on comm %s: not complete after %.0f s (hang?)", what, c.name.c_str(),
            setup.opTimeoutSeconds);
    }
    // Spin briefly (small collectives finish in tens of microseconds), then back off so that
    // N ranks polling do not starve the proxy and plugin threads of CPU.
    if (now - start > std::chrono::microseconds(200)) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

ncclDataType_t ncclTypeOf(Elt elt) {
  switch (elt) {
    case Elt::kInt8:
      return ncclInt8;
    case Elt::kInt32:
      return ncclInt32;
    case Elt::kInt64:
      return ncclInt64;
    case Elt::kFloat16:
      return ncclFloat16;
    case Elt::kBfloat16:
      return ncclBfloat16;
    case Elt::kFloat32:
      return ncclFloat32;
    case Elt::kFloat64:
      return ncclFloat64;
  }
  return ncclInt8;
}

ncclRedOp_t ncclOpOf(Op op) {
  switch (op) {
    case Op::kProd:
      return ncclProd;
    case Op::kMax:
      return ncclMax;
    case Op::kMin:
      return ncclMin;
    case Op::kAvg:
      return ncclAvg;
    default:
      return ncclSum;
  }
}

void issueCollective(const Comm& c, Coll coll, Op op, Elt elt, const void* send, void* recv,
                     size_t count, int root) {
  const ncclDataType_t dt = ncclTypeOf(elt);
  const ncclRedOp_t rop = ncclOpOf(op);
  ncclComm_t comm = c.comm;
  cudaStream_t s = c.stream;
  switch (coll) {
    case Coll::kAllReduce:
      E2E_NCCL(comm, ncclAllReduce(send, recv, count, dt, rop, comm, s));
      return;
    case Coll::kBroadcast:
      E2E_NCCL(comm, ncclBroadcast(send, recv, count, dt, root, comm, s));
      return;
    case Coll::kBcast:
      E2E_NCCL(comm, ncclBcast(recv, count, dt, root, comm, s));
      return;
    case Coll::kReduce:
      E2E_NCCL(comm, ncclReduce(send, recv, count, dt, rop, root, comm, s));
      return;
    case Coll::kAllGather:
      E2E_NCCL(comm, ncclAllGather(send, recv, count, dt, comm, s));
      return;
    case Coll::kReduceScatter:
      E2E_NCCL(comm, ncclReduceScatter(send, recv, count, dt, rop, comm, s));
      return;
    case Coll::kAlltoAll:
      E2E_NCCL(comm, ncclAlltoAll(send, recv, count, dt, comm, s));
      return;
    case Coll::kGather:
      E2E_NCCL(comm, ncclGather(send, recv, count, dt, root, comm, s));
      return;
    case Coll::kScatter:
      E2E_NCCL(comm, ncclScatter(send, recv, count, dt, root, comm, s));
      return;
    case Coll::kSendRecvRing: {
      const int next = (c.rank + 1) % c.nranks;
      const int prev = (c.rank + c.nranks - 1) % c.nranks;
      // Both directions must be in one group, or every rank blocks in its send.
      E2E_NCCL(comm, ncclGroupStart());
      E2E_NCCL(comm, ncclSend(send, count, dt, next, comm, s));
      E2E_NCCL(comm, ncclRecv(recv, count, dt, prev, comm, s));
      E2E_NCCL(comm, ncclGroupEnd());
      return;
    }
    case Coll::kSendRecvAllPairs: {
      const size_t block = count * eltBytes(elt);
      E2E_NCCL(comm, ncclGroupStart());
      for (int peer = 0; peer < c.nranks; ++peer) {
        const size_t off = static_cast<size_t>(peer) * block;
        E2E_NCCL(comm, ncclSend(static_cast<const char*>(send) + off, count, dt, peer, comm, s));
        E2E_NCCL(comm, ncclRecv(static_cast<char*>(recv) + off, count, dt, peer, comm, s));
      }
      E2E_NCCL(comm, ncclGroupEnd());
      return;
    }
  }
  fatal("issueCollective: unknown collective %d", static_cast<int>(coll));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

char* DeviceBuffer::reserve(size_t bytes) {
  if (bytes > size_) {
    if (ptr_ != nullptr) E2E_CUDA(cudaFree(ptr_));
    ptr_ = nullptr;
    void* p = nullptr;
    E2E_CUDA(cudaMalloc(&p, bytes));
    ptr_ = static_cast<char*>(p);
    size_ = bytes;
  }
  return ptr_;
}

HostBuffer::~HostBuffer() {
  if (ptr_ != nullptr) cudaFreeHost(ptr_);
}

char* HostBuffer::reserve(size_t bytes) {
  if (bytes > size_) {
    if (ptr_ != nullptr) E2E_CUDA(cudaFreeHost(ptr_));
    ptr_ = nullptr;
    void* p = nullptr;
    E2E_CUDA(cudaMallocHost(&p, bytes));
    ptr_ = static_cast<char*>(p);
    size_ = bytes;
  }
  return ptr_;
}

double agreeMax(const RankSetup& setup, const Comm& c, double value) {
  static DeviceBuffer scratch;
  double* dev = reinterpret_cast<double*>(scratch.reserve(sizeof(double)));
  E2E_CUDA(cudaMemcpyAsync(dev, &value, sizeof value, cudaMemcpyHostToDevice, c.stream));
  E2E_NCCL(c.comm, ncclAllReduce(dev, dev, 1, ncclFloat64, ncclMax, c.comm, c.stream));
  // Wait before the copy back: a copy into pageable memory blocks without any timeout.
  waitStream(setup, c, "agreeMax");
  E2E_CUDA(cudaMemcpy(&value, dev, sizeof value, cudaMemcpyDeviceToHost));
  return value;
}

}  // namespace e2e
