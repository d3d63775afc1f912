// SPDX-License-Identifier: Apache-2.0
#include "bench.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels.h"
#include "reference.h"
#include "report.h"

namespace e2e {
namespace {

struct BenchColl {
  const char* name;  // nccl-tests' name, used in the report and JSON
  Coll coll;
  Op op;
};
constexpr BenchColl kBenchColls[] = {
    {"all_reduce", Coll::kAllReduce, Op::kSum},
    {"all_gather", Coll::kAllGather, Op::kNone},
    {"reduce_scatter", Coll::kReduceScatter, Op::kSum},
    {"alltoall", Coll::kAlltoAll, Op::kNone},
};

// Elapsed milliseconds of `iters` back-to-back launches, measured with CUDA events on the
// stream: the host never waits between launches, as in nccl-tests.
double timeIterations(const RankSetup& setup, const Comm& c, const BenchColl& bc, const void* send,
                      void* recv, size_t count, int iters, cudaEvent_t start, cudaEvent_t stop) {
  E2E_CUDA(cudaEventRecord(start, c.stream));
  for (int i = 0; i < iters; ++i) {
    issueCollective(c, bc.coll, bc.op, Elt::kFloat32, send, recv, count, 0);
  }
  E2E_CUDA(cudaEventRecord(stop, c.stream));
  waitStream(setup, c, bc.name);
  float ms = 0;
  E2E_CUDA(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

}  // namespace

int runBench(const RankSetup& setup, const BenchPlan& plan) {
  Comm world = createWorldComm(setup, 0, "world");
  const int n = world.nranks;
  std::FILE* out = nullptr;
  if (setup.rank == 0) {
    const std::string path = setup.dir + "/bench.tsv";
    out = std::fopen(path.c_str(), "w");
    if (out == nullptr) fatal("cannot create %s", path.c_str());
  }
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  E2E_CUDA(cudaEventCreate(&start));
  E2E_CUDA(cudaEventCreate(&stop));
  int failures = 0;
  {
    DeviceBuffer send;
    DeviceBuffer recv;
    HostBuffer host;
    for (const BenchColl& bc : kBenchColls) {
      for (size_t size : plan.sizes) {
        // nccl-tests' convention: `size` is the whole buffer (all_reduce: the vector; the others:
        // n blocks), rounded down to a whole number of blocks.
        const size_t blocks = bc.coll == Coll::kAllReduce ? 1 : static_cast<size_t>(n);
        const size_t count = size / sizeof(float) / blocks;
        if (count == 0) continue;
        const size_t bytes = count * blocks * sizeof(float);
        const size_t sendCount = sendElems(bc.coll, count, n);
        const size_t recvCount = recvElems(bc.coll, count, n);
        char* s = send.reserve(sendCount * sizeof(float));
        char* r = recv.reserve(recvCount * sizeof(float));
        const uint32_t seed = static_cast<uint32_t>(size) ^ static_cast<uint32_t>(bc.coll) << 28;
        E2E_CUDA(launchFill(s, Elt::kFloat32, sendCount, valueKindFor(bc.op), seed, world.rank, n,
                            0, world.stream));

        // Warm-up (connections are set up lazily on first use), then one timed probe from
        // which all ranks agree on an iteration count that fits the time budget.
        const int warmups = size >= (16u << 20) ? 1 : 3;
        timeIterations(setup, world, bc, s, r, count, warmups, start, stop);
        const double probeMs =
            agreeMax(setup, world, timeIterations(setup, world, bc, s, r, count, 1, start, stop));
        const int maxIters = size <= (1u << 20) ? 50 : size <= (16u << 20) ? 20 : 5;
        int iters = maxIters;
        if (probeMs > 0) {
          iters = static_cast<int>(
              std::clamp(plan.secondsPerSize * 1e3 / probeMs, 2.0, static_cast<double>(maxIters)));
        }
        const double ms =
            agreeMax(setup, world,
                     timeIterations(setup, world, bc, s, r, count, iters, start, stop)) /
            iters;

        // Every iteration recomputes the output from unchanged inputs: check the last one.
        char* h = host.reserve(recvCount * sizeof(float));
        E2E_CUDA(cudaMemcpy(h, r, recvCount * sizeof(float), cudaMemcpyDeviceToHost));
        Expectation e;
        e.coll = bc.coll;
        e.op = bc.op;
        e.seed = seed;
        e.rank = world.rank;
        e.nranks = n;
        e.count = count;
        const CompareResult check =
            compareOutput(e, Elt::kFloat32, h, recvCount, std::max<size_t>(1, recvCount >> 18));
        const bool ok = check.mismatches == 0;
        if (!ok) {
          ++failures;
          std::printf("FAIL bench %s %zu bytes: %zu of %zu sampled elements wrong\n%s", bc.name,
                      bytes, check.mismatches, check.checked, check.detail.c_str());
        }

        const double algbw = static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
        const double busbw = algbw * busBwFactor(bc.name, n);
        if (out != nullptr) {
          std::fprintf(out, "%s\t%zu\t%zu\t%d\t%.3f\t%.4f\t%.4f\t%d\n", bc.name, bytes, count,
                       iters, ms * 1e3, algbw, busbw, ok ? 1 : 0);
          std::fflush(out);
          std::printf(
              "e2e bench %-14s %12zu B %4d iters %11.2f us  algbw %8.3f  busbw %8.3f GB/s%s\n",
              bc.name, bytes, iters, ms * 1e3, algbw, busbw, ok ? "" : "  WRONG");
          std::fflush(stdout);
        }
      }
    }
  }
  E2E_CUDA(cudaEventDestroy(start));
  E2E_CUDA(cudaEventDestroy(stop));
  if (out != nullptr) std::fclose(out);
  destroyComm(world);
  return failures;
}

}  // namespace e2e
