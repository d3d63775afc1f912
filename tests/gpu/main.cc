// SPDX-License-Identifier: Apache-2.0
// nccl-mesh-gpu-e2e: NCCL itself over the mesh plugin, N ranks as processes on one GPU.
//
// Without --rank this is the launcher: it checks for a GPU (printing "SKIP: no CUDA device
// (reason)" when there is none), then runs one process set per rank count x topology (--emulate)
// x protocol x net (check) or per rank count x topology x net (bench), each rank a copy of this
// binary started with --rank.
// See launcher.h for the environment each rank gets and report.h for what is printed.
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench.h"
#include "collectives.h"
#include "launcher.h"
#include "launcher_selftest.h"
#include "options.h"
#include "rank.h"
#include "report.h"
#include "selftest.h"

namespace {

const char* envOr(const char* key, const char* fallback) {
  const char* v = std::getenv(key);
  return v != nullptr ? v : fallback;
}

int runRank(const e2e::Options& o) {
  e2e::RankSetup setup;
  setup.rank = o.rank;
  setup.nranks = o.nranks;
  setup.device = o.device;
  setup.dir = o.setDir;
  setup.opTimeoutSeconds = o.opTimeout;
  if (setup.nranks < 1 || setup.rank >= setup.nranks || setup.dir.empty()) {
    std::fprintf(stderr, "--rank needs --nranks > rank and --set-dir\n");
    return 2;
  }
  std::string reason;
  if (!e2e::cudaDeviceAvailable(reason)) {
    std::printf("SKIP: no CUDA device (%s)\n", reason.c_str());
    return o.skipExitCode;
  }
  E2E_CUDA(cudaSetDevice(o.device));
  int version = 0;
  E2E_NCCL(nullptr, ncclGetVersion(&version));
  std::printf(
      "e2e rank %d/%d: pid %d, NCCL runtime %d (built against %d), NCCL_HOSTID=%s "
      "NCCL_NET=%s NCCL_PROTO=%s\n",
      o.rank, o.nranks, static_cast<int>(getpid()), version, NCCL_VERSION_CODE,
      envOr("NCCL_HOSTID", "-"), envOr("NCCL_NET", "-"), envOr("NCCL_PROTO", "-"));
  std::fflush(stdout);
  if (o.mode == "bench") {
    e2e::BenchPlan plan;
    plan.sizes = o.benchSizes;
    plan.secondsPerSize = o.benchSecondsPerSize;
    return e2e::runBench(setup, plan) == 0 ? 0 : 1;
  }
  e2e::CheckPlan plan;
  plan.matrixCounts = o.matrixCounts;
  plan.largeBytes = o.largeBytes;
  plan.groupCounts = o.groupCounts;
  return e2e::runCorrectness(setup, plan) == 0 ? 0 : 1;
}

int runLauncher(e2e::Options o) {
  e2e::resolveDefaults(o);
  std::string reason;
  if (!e2e::cudaDeviceAvailable(reason)) {
    std::printf("SKIP: no CUDA device (%s)\n", reason.c_str());
    return o.skipExitCode;
  }

  bool needPlugin = false;
  for (const auto& net : o.nets) needPlugin |= net == "Mesh";
  if (needPlugin) {
    // NCCL resolves a relative NCCL_NET_PLUGIN through the loader path, not the cwd.
    char resolved[PATH_MAX];
    if (realpath(o.plugin.c_str(), resolved) == nullptr) {
      std::printf(
          "ERROR: plugin library %s not found (build the nccl-net-mesh target or pass "
          "--plugin)\n",
          o.plugin.c_str());
      return 2;
    }
    o.plugin = resolved;
  }
  char self[PATH_MAX];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) {
    std::perror("readlink /proc/self/exe");
    return 2;
  }
  self[len] = '\0';
  std::error_code ec;
  std::filesystem::create_directories(o.outDir, ec);
  // Absolute, so the paths in messages and JSON point somewhere wherever they are read.
  o.outDir = std::filesystem::absolute(o.outDir, ec).lexically_normal().string();
  if (o.jsonPath.empty() || o.jsonPath.front() != '/') {
    o.jsonPath = std::filesystem::absolute(o.jsonPath, ec).lexically_normal().string();
  }

  const std::vector<e2e::SetSpec> specs = e2e::planProcessSets(o);
  std::printf("nccl-mesh-gpu-e2e %s: %zu process sets, plugin %s, output in %s\n", o.mode.c_str(),
              specs.size(), needPlugin ? o.plugin.c_str() : "(none)", o.outDir.c_str());
  std::fflush(stdout);

  std::vector<e2e::SetOutcome> outcomes;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& spec : specs) {
    e2e::Options setOptions = o;
    if (o.totalTimeout > 0) {
      // Stay inside the caller's budget: a killed launcher would write no report at all.
      const double left =
          o.totalTimeout -
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (left < 10) {
        e2e::SetOutcome skipped;
        skipped.spec = spec;
        skipped.problems.push_back("not run: --total-timeout reached");
        outcomes.push_back(skipped);
        e2e::printSetLine(outcomes.back());
        continue;
      }
      setOptions.setTimeout = std::min(o.setTimeout, left);
    }
    outcomes.push_back(e2e::runProcessSet(setOptions, spec, self, o.plugin));
    e2e::printSetLine(outcomes.back());
  }
  const int failed =
      o.mode == "check" ? e2e::writeCheckReport(o, outcomes) : e2e::writeBenchReport(o, outcomes);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const e2e::Options o = e2e::parseOptions(argc, argv);
  if (o.mode == "selftest") return e2e::runSelftest();
  if (o.mode == "launcher-selftest") return e2e::runLauncherSelftest();
  if (o.rank >= 0) return runRank(o);
  return runLauncher(o);
}
