// SPDX-License-Identifier: Apache-2.0
// One rank's plumbing: CUDA/NCCL error handling, the ncclUniqueId rendezvous, communicator
// creation, bounded waits, device/host buffers, and the mapping of the test's collectives onto
// the NCCL API. Shared by the correctness suite and the benchmark.
#ifndef NCCL_MESH_TESTS_GPU_RANK_H
#define NCCL_MESH_TESTS_GPU_RANK_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <string>

#include "reference.h"

namespace e2e {

// Process-wide settings of this rank, from the launcher's command line.
struct RankSetup {
  int rank = 0;
  int nranks = 1;
  int device = 0;
  std::string dir;               // the process set's folder: rendezvous files and results
  double opTimeoutSeconds = 60;  // longest wait for one collective before declaring a hang
};

// A communicator with the stream it runs on and this rank's place in it.
struct Comm {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int nranks = 1;
  cudaStream_t stream = nullptr;
  std::string name;  // for messages: "world", "split-nocolor", ...
};

// Prints "FATAL: ..." and ends the process: an NCCL or CUDA error leaves the peers blocked, and
// the launcher ends them once one rank has exited with an error.
[[noreturn]] void fatal(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void checkCuda(cudaError_t err, const char* what, const char* file, int line);
void checkNccl(ncclResult_t res, ncclComm_t comm, const char* what, const char* file, int line);
#define E2E_CUDA(call) ::e2e::checkCuda((call), #call, __FILE__, __LINE__)
#define E2E_NCCL(comm, call) ::e2e::checkNccl((call), (comm), #call, __FILE__, __LINE__)

// Whether a usable CUDA device exists; fills `reason` when not.
bool cudaDeviceAvailable(std::string& reason);

// Rank 0 creates the id of communicator `generation` and publishes it as a file in setup.dir
// (written whole, then renamed); the others wait for that file.
ncclUniqueId exchangeUniqueId(const RankSetup& setup, int generation);
// ncclCommInitRank over a freshly exchanged id, with a new stream.
Comm createWorldComm(const RankSetup& setup, int generation, const char* name);
// ncclCommFinalize + ncclCommDestroy (the orderly path that flushes outstanding work).
void destroyComm(Comm& c);

// Waits for all work on c.stream, polling NCCL's async error state, and fails after the
// timeout with `what` in the message instead of hanging until the launcher's deadline.
void waitStream(const RankSetup& setup, const Comm& c, const char* what);

ncclDataType_t ncclTypeOf(Elt elt);
ncclRedOp_t ncclOpOf(Op op);

// Issues one collective (point-to-point patterns grouped as one call) on c.stream.
// `root` is ignored where the collective has none.
void issueCollective(const Comm& c, Coll coll, Op op, Elt elt, const void* send, void* recv,
                     size_t count, int root);

// Grow-only device allocation: reused across cases to keep cudaMalloc out of the loop.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  char* reserve(size_t bytes);  // contents are lost when it grows
  char* data() const { return ptr_; }

 private:
  char* ptr_ = nullptr;
  size_t size_ = 0;
};

// Grow-only pinned host allocation, so device-to-host copies of large outputs run at full speed.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer();
  char* reserve(size_t bytes);
  char* data() const { return ptr_; }

 private:
  char* ptr_ = nullptr;
  size_t size_ = 0;
};

// The maximum of `value` over all ranks of c (an ncclMax all-reduce of one double): lets every
// rank take the same decision (e.g. an iteration count) from locally measured times.
double agreeMax(const RankSetup& setup, const Comm& c, double value);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_RANK_H
