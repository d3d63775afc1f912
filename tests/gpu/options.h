// SPDX-License-Identifier: Apache-2.0
// Command line of nccl-mesh-gpu-e2e. One binary has three roles: the launcher (default; spawns
// process sets and reports), a rank (internal: --rank, started by the launcher), and a selftest
// of the host-side reference that needs no GPU.
#ifndef NCCL_MESH_TESTS_GPU_OPTIONS_H
#define NCCL_MESH_TESTS_GPU_OPTIONS_H

#include <cstddef>
#include <string>
#include <vector>

namespace e2e {

struct Options {
  std::string mode = "check";        // check | bench | selftest | launcher-selftest
  std::vector<int> ranks;            // launcher: rank counts, one process set each
  std::vector<std::string> protos;   // check: NCCL_PROTO values ("default" leaves it unset)
  std::vector<std::string> nets;     // Mesh (the plugin) and/or Socket (NCCL's, no plugin)
  std::vector<std::string> emulate;  // Mesh topologies: none (full mesh), ring, line
  std::string tuner = "auto";        // Mesh: auto | ring | off (NCCL_MESH_TUNER) | none
  std::string plugin;                // path of libnccl-net-mesh.so
  std::string outDir = "gpu-e2e-out";
  bool quick = false;                // short size lists (the ctest)
  size_t maxBytes = 0;               // cap on any buffer; 0: the mode's default
  std::vector<size_t> matrixCounts;  // check plan (defaults filled by resolveDefaults)
  std::vector<size_t> largeBytes;
  std::vector<size_t> groupCounts;
  std::vector<size_t> benchSizes;  // bench plan
  double benchSecondsPerSize = 1.0;
  double setTimeout = 300;  // seconds for one process set before its ranks are killed
  double totalTimeout = 0;  // seconds for the whole launcher run (0: no limit); later sets
                            // are cut short or not started, and the report is still written
  double opTimeout = 60;    // seconds one collective may take before a rank reports a hang
  int skipExitCode = 0;     // exit status when there is no GPU (ctest uses 77)
  int device = 0;
  std::string jsonPath;  // launcher: where the JSON report goes (default <out>/<mode>.json)

  // Rank role (set by the launcher only).
  int rank = -1;
  int nranks = 0;
  std::string setDir;
};

// Parses argv; on a usage error prints the message and usage, and exits 2.
Options parseOptions(int argc, char** argv);
// Fills every list left empty with the mode's defaults (after --quick / --max-bytes). With an
// emulated shape in --emulate and no --ranks, the rank count is 4. Exits 2 (usage) on rank
// counts an emulated shape cannot have (ring: >= 3, line: >= 2) and on Socket with only
// emulated shapes (Socket runs only on the full mesh).
void resolveDefaults(Options& o);
// The arguments that make a rank run exactly the plan in `o`.
std::vector<std::string> rankArguments(const Options& o, int rank, int nranks,
                                       const std::string& setDir);
std::string joinSizes(const std::vector<size_t>& v);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_OPTIONS_H
