// SPDX-License-Identifier: Apache-2.0
// The correctness suite one rank runs: every collective of the NCCL API in every dtype and
// reduction op, in-place and out-of-place, alone and grouped, from 0 elements to hundreds of MiB,
// on the world communicator, on split communicators, and on a re-created one.
#ifndef NCCL_MESH_TESTS_GPU_COLLECTIVES_H
#define NCCL_MESH_TESTS_GPU_COLLECTIVES_H

#include <cstddef>
#include <vector>

#include "rank.h"

namespace e2e {

struct CheckPlan {
  std::vector<size_t> matrixCounts;  // element counts for the full collective x dtype x op matrix
  std::vector<size_t> largeBytes;    // buffer sizes for the large tier (a few collectives each)
  std::vector<size_t> groupCounts;   // element counts for the grouped-call cases
};

// Runs the suite; every case's verdict goes to <dir>/results-rank<r>.txt as "<label> PASS|FAIL"
// (labels are identical on all ranks, so the launcher can merge them). Returns the number of
// failed cases on this rank.
int runCorrectness(const RankSetup& setup, const CheckPlan& plan);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_COLLECTIVES_H
