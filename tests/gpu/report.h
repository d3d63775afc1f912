// SPDX-License-Identifier: Apache-2.0
// What the launcher prints and writes: per-set verdicts, the benchmark table with the
// plugin/Socket ratio, the performance targets, and the JSON versions of both.
#ifndef NCCL_MESH_TESTS_GPU_REPORT_H
#define NCCL_MESH_TESTS_GPU_REPORT_H

#include <cstddef>
#include <string>
#include <vector>

#include "launcher.h"

namespace e2e {

// nccl-tests' bus bandwidth factors: all_reduce 2(n-1)/n; all_gather, reduce_scatter and
// alltoall (n-1)/n. busbw = algbw * factor is comparable across rank counts.
double busBwFactor(const std::string& coll, int nranks);

struct BenchRow {
  std::string coll;
  size_t bytes = 0;
  size_t count = 0;
  int iters = 0;
  double timeUs = 0;
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  bool ok = false;
};
std::vector<BenchRow> readBenchRows(const std::string& tsvPath);

// Mean busbw of `coll` in `num` over that in `den`, over the sizes >= `minBytes` that both have
// with a verified result (the mean of each side over the same sizes; ratio 0 and sizes 0 when
// there is none).
struct BusBwRatio {
  double ratio = 0;
  int sizes = 0;
};
BusBwRatio largeMessageBusBwRatio(const std::vector<BenchRow>& num,
                                  const std::vector<BenchRow>& den, const std::string& coll,
                                  size_t minBytes);

// Issue 18's target: all_reduce busbw at >= 64 MiB on an emulated ring with the tuner at least
// this fraction of the full mesh's, same rank count, same run.
inline constexpr double kEmulatedVsFullTarget = 0.9;
inline constexpr size_t kLargeMessageBytes = 64u << 20;

// One line per set: "[PASS] name: ..." / "[FAIL] name: ..." with the reasons.
void printSetLine(const SetOutcome& s);

// Writes the check report (JSON) and returns the number of failed sets.
int writeCheckReport(const Options& o, const std::vector<SetOutcome>& sets);

// Prints the benchmark tables (plugin vs Socket side by side, with ratios; each emulated ring or
// line vs the full mesh when both ran) and the targets, writes the JSON, and returns the number of
// failed sets (targets are reported, not failed: run-to-run spread on the shared GPU machine is up
// to +-40%).
int writeBenchReport(const Options& o, const std::vector<SetOutcome>& sets);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_REPORT_H
