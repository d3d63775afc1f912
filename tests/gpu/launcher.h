// The launcher: starts one process set (N ranks of this same binary, each with its own
// NCCL_HOSTID and the plugin environment), bounds its run time, and judges it from exit codes,
// the ranks' result files and the NCCL log lines that prove which transport carried the data.
#ifndef NCCL_MESH_TESTS_GPU_LAUNCHER_H
#define NCCL_MESH_TESTS_GPU_LAUNCHER_H

#include <cstddef>
#include <string>
#include <vector>

#include "options.h"

namespace e2e {

struct SetSpec {
  std::string name;  // folder name under --out, e.g. "check-Mesh-n2-LL128"
  int nranks = 2;
  std::string net;    // Mesh or Socket
  std::string proto;  // NCCL_PROTO, or "default"
};

struct SetOutcome {
  SetSpec spec;
  std::string dir;
  bool passed = false;
  double seconds = 0;
  std::vector<int> exitCodes;  // per rank; 128+signal when killed
  bool timedOut = false;
  int viaLines = 0;         // "[send|receive] via NET/<net>/..." lines over all ranks
  std::string ncclVersion;  // from "NCCL version ..." in the logs
  size_t cases = 0;         // distinct case labels reported by the ranks
  std::vector<std::string> failedCases;
  std::vector<std::string> problems;  // why the set failed besides wrong results
  std::vector<std::string> warnings;  // NCCL WARN lines (informative)
};

// Runs one process set to completion (or its timeout) and collects the outcome.
// `selfExe` is the path of this binary; `plugin` the absolute path of the plugin.
SetOutcome runProcessSet(const Options& o, const SetSpec& spec, const std::string& selfExe,
                         const std::string& plugin);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_LAUNCHER_H
