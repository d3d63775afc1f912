// SPDX-License-Identifier: Apache-2.0
// The benchmark one rank runs: nccl-tests-style bus bandwidth and time of all_reduce,
// all_gather, reduce_scatter and alltoall (float32) over a range of sizes.
#ifndef NCCL_MESH_TESTS_GPU_BENCH_H
#define NCCL_MESH_TESTS_GPU_BENCH_H

#include <cstddef>
#include <string>
#include <vector>

#include "rank.h"

namespace e2e {

struct BenchPlan {
  std::vector<size_t> sizes;    // nccl-tests "size" in bytes (see busBwFactor in report.h)
  double secondsPerSize = 1.0;  // timed-loop budget per size; bounds iterations at big sizes
};

// Rank 0 writes one line per (collective, size) to <dir>/bench.tsv:
//   coll bytes count iters time_us algbw_GBps busbw_GBps ok
// Times are the maximum over ranks. Returns the number of result checks that failed.
int runBench(const RankSetup& setup, const BenchPlan& plan);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_BENCH_H
