// SPDX-License-Identifier: Apache-2.0
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
  // Mesh only: "none" (every rank sees plain loopback: a full mesh), or "ring" / "line": rank r
  // gets NCCL_MESH_EMULATE=<shape>:<nranks>:<r>, so ranks without a shared emulated cable have
  // no common subnet (src/topology/emulated_mesh.h).
  std::string emulate = "none";
  // Mesh only: the tuner NCCL loads from the plugin's library: auto | ring | off
  // (NCCL_MESH_TUNER), or none (NCCL_TUNER_PLUGIN=none: NCCL loads no tuner).
  std::string tuner = "auto";
};

// "Mesh", "Socket", or "Mesh-ring" / "Mesh-line" for an emulated set: what the benchmark
// report keys its rows by.
std::string variantName(const SetSpec& spec);

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
  // Tuner and relay evidence (Mesh sets; required of emulated sets, informative otherwise).
  int tunerLoadedRanks = 0;                 // ranks whose log has "TUNER/Plugin: Using Mesh"
  std::vector<std::string> tunerDecisions;  // distinct decisions of the plugin's tuner line
  int relayedLines = 0;                     // "connect to ...: relayed" lines over all ranks
  // A connection between ranks without a common subnet failed ("no common subnet" WARN): why,
  // in words (no relay in this build, relaying off, ...); empty when it did not happen.
  std::string unreachablePeer;
};

// The process sets of a launcher run (after resolveDefaults), in run order: per rank count, per
// topology of --emulate, then per protocol and net (check) or per net (bench). Socket runs only
// on the full mesh. Names: check-<net>-n<N>-<proto>, bench-<net>-n<N>; emulated sets put the
// shape before the rank count: check-Mesh-ring-n4-LL128, bench-Mesh-ring-n4.
std::vector<SetSpec> planProcessSets(const Options& o);

// Runs one process set to completion (or its timeout) and collects the outcome.
// `selfExe` is the path of this binary; `plugin` the absolute path of the plugin.
SetOutcome runProcessSet(const Options& o, const SetSpec& spec, const std::string& selfExe,
                         const std::string& plugin);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_LAUNCHER_H
