// SPDX-License-Identifier: Apache-2.0
// GIN all-to-all through the plugin, one process per rank (tests/gpu/gin_alltoall.sh starts
// them): NCCL's device API puts every rank's block to every rank from a kernel (ncclGin::put
// with a signal increment), the kernel waits until all blocks arrived, and the host checks every
// element. With NCCL 2.28.9 and this library as NCCL_NET_PLUGIN, NCCL takes ncclGinPlugin_v11
// from it and its GIN proxy thread turns each put into our iputSignal.
//
// Usage: nccl-mesh-gin-alltoall RANK NRANKS ID_FILE [ELEMENTS [ITERATIONS]]
// Rank 0 writes the NCCL unique id to ID_FILE (atomically, by rename); the others wait for it.
// Exit 0: every element of every iteration was right; 1: a failure (printed); 77: no GPU.
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

#define CHECK_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess) {                                                              \
      std::printf("[FAIL] rank %d: %s: %s\n", g_rank, #call, cudaGetErrorString(e_));    \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)
#define CHECK_NCCL(call)                                                                  \
  do {                                                                                    \
    ncclResult_t r_ = (call);                                                             \
    if (r_ != ncclSuccess) {                                                              \
      std::printf("[FAIL] rank %d: %s: %s (%s)\n", g_rank, #call, ncclGetErrorString(r_), \
                  ncclGetLastError(nullptr));                                             \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

int g_rank = -1;

// The value rank `src` sends to rank `dst` at element `i` of iteration `it`.
__host__ __device__ uint32_t expected(int src, int dst, size_t i, int it) {
  return 0x9e3779b9u * static_cast<uint32_t>(src + 1) ^ static_cast<uint32_t>(dst) << 24 ^
         static_cast<uint32_t>(i) * 2654435761u ^ static_cast<uint32_t>(it) << 16;
}

__global__ void fill(uint32_t* send, int rank, int nranks, size_t elements, int it) {
  const size_t total = elements * static_cast<size_t>(nranks);
  for (size_t k = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<size_t>(gridDim.x) * blockDim.x) {
    send[k] = expected(rank, static_cast<int>(k / elements), k % elements, it);
  }
}

// One block: thread p puts this rank's block for rank p into p's receive window at this rank's
// slot, each put carrying an increment of signal 0; then the block waits for all n increments
// (one from every rank, itself included) and flushes its own puts.
__global__ void gin_alltoall(ncclDevComm comm, ncclWindow_t send, ncclWindow_t recv,
                             size_t bytes, uint64_t* signal_base_out) {
  ncclGin gin{comm, 0};
  const uint64_t base = gin.readSignal(0);
  if (threadIdx.x == 0) *signal_base_out = base;
  __syncthreads();
  for (int p = threadIdx.x; p < comm.nRanks; p += blockDim.x) {
    gin.put(ncclTeamWorld(comm), p, recv, static_cast<size_t>(comm.rank) * bytes, send,
            static_cast<size_t>(p) * bytes, bytes, ncclGin_SignalInc{0});
  }
  gin.waitSignal(ncclCoopCta(), 0, base + static_cast<uint64_t>(comm.nRanks));
  gin.flush(ncclCoopCta());
}

bool read_id(const std::string& path, ncclUniqueId* id) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;
  const bool ok = std::fread(id, sizeof(*id), 1, f) == 1;
  std::fclose(f);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  // Line-buffered: NCCL logs to this stdout, and a rank killed by its timeout must leave every
  // line it wrote (fully buffered, a hung rank's log stopped at 4 KiB mid-line).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s RANK NRANKS ID_FILE [ELEMENTS [ITERATIONS]]\n", argv[0]);
    return 2;
  }
  g_rank = std::atoi(argv[1]);
  const int nranks = std::atoi(argv[2]);
  const std::string id_file = argv[3];
  const size_t elements = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 65536;
  const int iterations = argc > 5 ? std::atoi(argv[5]) : 5;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("SKIP rank %d: no GPU\n", g_rank);
    return 77;
  }
  CHECK_CUDA(cudaSetDevice(g_rank % ndev));

  ncclUniqueId id;
  if (g_rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    const std::string tmp = id_file + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr || std::fwrite(&id, sizeof(id), 1, f) != 1 || std::fclose(f) != 0 ||
        std::rename(tmp.c_str(), id_file.c_str()) != 0) {
      std::printf("[FAIL] rank 0: cannot write %s\n", id_file.c_str());
      return 1;
    }
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!read_id(id_file, &id)) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::printf("[FAIL] rank %d: no unique id in %s\n", g_rank, id_file.c_str());
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, nranks, id, g_rank));

  const size_t bytes = elements * sizeof(uint32_t);
  const size_t total = bytes * static_cast<size_t>(nranks);
  void* send = nullptr;
  void* recv = nullptr;
  CHECK_NCCL(ncclMemAlloc(&send, total));
  CHECK_NCCL(ncclMemAlloc(&recv, total));
  ncclWindow_t send_win, recv_win;
  CHECK_NCCL(ncclCommWindowRegister(comm, send, total, &send_win, NCCL_WIN_COLL_SYMMETRIC));
  CHECK_NCCL(ncclCommWindowRegister(comm, recv, total, &recv_win, NCCL_WIN_COLL_SYMMETRIC));

  ncclDevCommRequirements reqs;
  std::memset(&reqs, 0, sizeof(reqs));
  reqs.ginForceEnable = true;  // NCCL 2.28.9 turns GIN on by itself only across nodes
  reqs.ginContextCount = 1;
  reqs.ginSignalCount = 1;
  ncclDevComm dev_comm;
  CHECK_NCCL(ncclDevCommCreate(comm, &reqs, &dev_comm));

  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  uint64_t* base_dev = nullptr;
  CHECK_CUDA(cudaMalloc(&base_dev, sizeof(uint64_t)));
  float* token = nullptr;  // a tiny all-reduce is the barrier between iterations
  CHECK_CUDA(cudaMalloc(&token, sizeof(float)));
  std::vector<uint32_t> host(elements * static_cast<size_t>(nranks));
  size_t checked = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < iterations; ++it) {
    fill<<<64, 256, 0, stream>>>(static_cast<uint32_t*>(send), g_rank, nranks, elements, it);
    CHECK_CUDA(cudaMemsetAsync(recv, 0, total, stream));
    // Every rank's receive buffer is cleared before anyone puts into it.
    CHECK_NCCL(ncclAllReduce(token, token, 1, ncclFloat, ncclSum, comm, stream));
    gin_alltoall<<<1, 128, 0, stream>>>(dev_comm, send_win, recv_win, bytes, base_dev);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(host.data(), recv, total, cudaMemcpyDeviceToHost));
    for (int src = 0; src < nranks; ++src) {
      for (size_t i = 0; i < elements; ++i) {
        const uint32_t got = host[static_cast<size_t>(src) * elements + i];
        const uint32_t want = expected(src, g_rank, i, it);
        if (got != want) {
          std::printf("[FAIL] rank %d iteration %d: element %zu from rank %d is 0x%08x, want "
                      "0x%08x\n", g_rank, it, i, src, got, want);
          return 1;
        }
      }
    }
    checked += host.size();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[PASS] gin-alltoall rank %d of %d: %d iterations x %zu bytes per peer, %zu "
              "elements checked, %.3f s (%.1f MB/s received per rank)\n",
              g_rank, nranks, iterations, bytes, checked, s,
              static_cast<double>(total) * iterations / s / 1e6);
  CHECK_NCCL(ncclDevCommDestroy(comm, &dev_comm));
  CHECK_NCCL(ncclCommWindowDeregister(comm, send_win));
  CHECK_NCCL(ncclCommWindowDeregister(comm, recv_win));
  CHECK_NCCL(ncclMemFree(send));
  CHECK_NCCL(ncclMemFree(recv));
  CHECK_NCCL(ncclCommDestroy(comm));
  return 0;
}
