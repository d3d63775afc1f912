// SPDX-License-Identifier: Apache-2.0
// Host-only checks of the launcher (--mode launcher-selftest, ctest gpu_e2e_launcher_selftest):
// the per-rank environment, checked against the plugin's own emulation and interface selection
// (src/topology), the process-set plan, the rank-log checks on synthetic logs, and the
// ring-vs-full-mesh busbw ratio. Runs without a GPU, so CI covers what decides a GPU verdict.
#ifndef NCCL_MESH_TESTS_GPU_LAUNCHER_SELFTEST_H
#define NCCL_MESH_TESTS_GPU_LAUNCHER_SELFTEST_H

namespace e2e {

// Returns 0 when every check passes; prints each failure.
int runLauncherSelftest();

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_LAUNCHER_SELFTEST_H
