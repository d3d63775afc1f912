// SPDX-License-Identifier: Apache-2.0
// Host-only checks of the reference (values.h, reference.h): runs without a GPU, so CI
// exercises the code that decides what "correct" means even where the real test is skipped.
#ifndef NCCL_MESH_TESTS_GPU_SELFTEST_H
#define NCCL_MESH_TESTS_GPU_SELFTEST_H

namespace e2e {

// Returns 0 when every check passes; prints each failure.
int runSelftest();

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_SELFTEST_H
