// SPDX-License-Identifier: Apache-2.0
#include "options.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>

#ifndef MESH_PLUGIN_DEFAULT_PATH
#define MESH_PLUGIN_DEFAULT_PATH "libnccl-net-mesh.so"
#endif

namespace e2e {
namespace {

constexpr const char* kUsage = R"(usage: nccl-mesh-gpu-e2e [options]
Runs NCCL collectives with N ranks as processes on one GPU, each with its own NCCL_HOSTID so
every byte goes through the network plugin, and checks every result against a host reference.

  --mode check|bench|selftest   correctness suite (default), benchmark, or a host-only
                                selftest of the reference code (no GPU needed)
  --mode launcher-selftest      host-only selftest of the launcher's rank environment, log
                                checks and report arithmetic (no GPU needed)
  --ranks 2,3,4                 rank counts; one process set per count (and protocol/net)
  --protos Simple,LL,LL128      check: NCCL_PROTO per process set ("default": unset)
  --net Mesh|Socket[,..]        Mesh: the plugin; Socket: NCCL's own, no plugin
                                (default: check Mesh, bench Mesh,Socket)
  --emulate none|ring|line[,..] Mesh topology per process set: none = every rank on plain
                                loopback (a full mesh, default); ring / line = rank r gets
                                NCCL_MESH_EMULATE=<shape>:N:r, its own 127.77.x.y/30 cables,
                                so non-neighbours share no subnet (needs the relay);
                                default ranks then 4; ring needs >= 3 ranks, line >= 2
  --tuner auto|ring|off|none    Mesh: NCCL_MESH_TUNER for every rank (default auto); none:
                                NCCL_TUNER_PLUGIN=none (NCCL loads no tuner). Emulated sets
                                must show NCCL loading the Mesh tuner and its decision
  --plugin PATH                 libnccl-net-mesh.so (default: the build's)
  --out DIR                     logs, per-set folders and JSON (default gpu-e2e-out)
  --json FILE                   JSON report (default <out>/<mode>.json)
  --quick                       short size lists (what ctest runs)
  --max-bytes SIZE              cap on buffer sizes (check 256M, bench 512M)
  --counts N,..                 check: element counts of the full matrix
  --large-bytes SIZE,..         check: sizes of the large tier
  --group-counts N,..           check: element counts of the grouped cases
  --sizes SIZE,..               bench: message sizes (nccl-tests convention)
  --seconds-per-size S          bench: time budget of one size's timed loop (default 1)
  --timeout S                   seconds per process set before it is killed (default 300)
  --total-timeout S             seconds for the whole run; later sets get what is left
                                and the report is still written (default: no limit)
  --op-timeout S                seconds one collective may take (default 60)
  --skip-exit-code N            exit status without a GPU (default 0; ctest uses 77)
  --device N                    CUDA device all ranks share (default 0)
SIZE accepts K, M and G suffixes (binary).
)";

[[noreturn]] void usageError(const std::string& msg) {
  std::fprintf(stderr, "nccl-mesh-gpu-e2e: %s\n\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

size_t parseSize(const std::string& s) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str()) usageError("not a size: " + s);
  const std::string_view suffix(end);
  unsigned shift = 0;
  if (suffix == "K" || suffix == "KiB") {
    shift = 10;
  } else if (suffix == "M" || suffix == "MiB") {
    shift = 20;
  } else if (suffix == "G" || suffix == "GiB") {
    shift = 30;
  } else if (!suffix.empty()) {
    usageError("bad size suffix: " + s);
  }
  return static_cast<size_t>(v) << shift;
}

std::vector<size_t> parseSizes(const std::string& s) {
  std::vector<size_t> out;
  for (const auto& item : splitList(s)) out.push_back(parseSize(item));
  return out;
}

double parseNumber(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') usageError("not a number: " + s);
  return v;
}

void capSizes(std::vector<size_t>& v, size_t cap) {
  std::vector<size_t> kept;
  for (size_t s : v) {
    if (s <= cap) kept.push_back(s);
  }
  v = kept;
}

}  // namespace

std::string joinSizes(const std::vector<size_t>& v) {
  std::string s;
  for (size_t x : v) s.append(s.empty() ? "" : ",").append(std::to_string(x));
  return s;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  o.plugin = MESH_PLUGIN_DEFAULT_PATH;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--mode") {
      o.mode = value();
    } else if (arg == "--ranks") {
      for (const auto& r : splitList(value())) o.ranks.push_back(static_cast<int>(parseNumber(r)));
    } else if (arg == "--protos" || arg == "--proto") {
      o.protos = splitList(value());
    } else if (arg == "--net" || arg == "--nets") {
      o.nets = splitList(value());
    } else if (arg == "--emulate") {
      o.emulate = splitList(value());
    } else if (arg == "--tuner") {
      o.tuner = value();
    } else if (arg == "--plugin") {
      o.plugin = value();
    } else if (arg == "--out") {
      o.outDir = value();
    } else if (arg == "--json") {
      o.jsonPath = value();
    } else if (arg == "--quick") {
      o.quick = true;
    } else if (arg == "--max-bytes") {
      o.maxBytes = parseSize(value());
    } else if (arg == "--counts") {
      o.matrixCounts = parseSizes(value());
    } else if (arg == "--large-bytes") {
      o.largeBytes = parseSizes(value());
    } else if (arg == "--group-counts") {
      o.groupCounts = parseSizes(value());
    } else if (arg == "--sizes") {
      o.benchSizes = parseSizes(value());
    } else if (arg == "--seconds-per-size") {
      o.benchSecondsPerSize = parseNumber(value());
    } else if (arg == "--timeout") {
      o.setTimeout = parseNumber(value());
    } else if (arg == "--total-timeout") {
      o.totalTimeout = parseNumber(value());
    } else if (arg == "--op-timeout") {
      o.opTimeout = parseNumber(value());
    } else if (arg == "--skip-exit-code") {
      o.skipExitCode = static_cast<int>(parseNumber(value()));
    } else if (arg == "--device") {
      o.device = static_cast<int>(parseNumber(value()));
    } else if (arg == "--rank") {
      o.rank = static_cast<int>(parseNumber(value()));
    } else if (arg == "--nranks") {
      o.nranks = static_cast<int>(parseNumber(value()));
    } else if (arg == "--set-dir") {
      o.setDir = value();
    } else {
      usageError("unknown argument " + arg);
    }
  }
  if (o.mode != "check" && o.mode != "bench" && o.mode != "selftest" &&
      o.mode != "launcher-selftest") {
    usageError("--mode must be check, bench, selftest or launcher-selftest");
  }
  for (const auto& e : o.emulate) {
    if (e != "none" && e != "ring" && e != "line") usageError("--emulate takes none, ring, line");
  }
  if (o.tuner != "auto" && o.tuner != "ring" && o.tuner != "off" && o.tuner != "none") {
    usageError("--tuner takes auto, ring, off or none");
  }
  for (const auto& net : o.nets) {
    if (net != "Mesh" && net != "Socket") usageError("--net takes Mesh and/or Socket");
  }
  for (const auto& p : o.protos) {
    if (p != "Simple" && p != "LL" && p != "LL128" && p != "default") {
      usageError("--protos takes Simple, LL, LL128 or default");
    }
  }
  // The value ranges in values.h keep every result exact for at most 5 ranks (the check);
  // the benchmark's float sums stay exact far beyond that.
  const int maxRanks = o.mode == "bench" ? 8 : 5;
  for (int r : o.ranks) {
    if (r < 1 || r > maxRanks) usageError("--ranks values must be 1.." + std::to_string(maxRanks));
  }
  return o;
}

void resolveDefaults(Options& o) {
  if (o.emulate.empty()) o.emulate = {"none"};
  const bool anyEmulated =
      std::any_of(o.emulate.begin(), o.emulate.end(), [](const auto& e) { return e != "none"; });
  const bool fullMesh = std::find(o.emulate.begin(), o.emulate.end(), "none") != o.emulate.end();
  if (o.ranks.empty()) o.ranks = anyEmulated ? std::vector<int>{4} : std::vector<int>{2, 3, 4};
  for (const auto& e : o.emulate) {
    const int least = e == "ring" ? 3 : e == "line" ? 2 : 1;
    for (int r : o.ranks) {
      if (r < least) {
        usageError("--emulate " + e + " needs --ranks of at least " + std::to_string(least));
      }
    }
  }
  if (o.protos.empty()) o.protos = {"Simple", "LL", "LL128"};
  if (o.nets.empty()) {
    o.nets = o.mode == "bench" && fullMesh ? std::vector<std::string>{"Mesh", "Socket"}
                                           : std::vector<std::string>{"Mesh"};
  }
  if (!fullMesh && std::find(o.nets.begin(), o.nets.end(), "Socket") != o.nets.end()) {
    usageError("--net Socket runs only on the full mesh: add none to --emulate");
  }
  if (o.maxBytes == 0) o.maxBytes = o.mode == "bench" ? (512u << 20) : (256u << 20);
  if (o.matrixCounts.empty()) {
    // 0 and 1 element, a sub-line size, then sizes crossing LL/LL128 lines, Simple's chunks and
    // several pipeline steps (up to 8 MiB buffers for float64 alltoall at 4 ranks).
    o.matrixCounts = o.quick ? std::vector<size_t>{0, 1, 1025}
                             : std::vector<size_t>{0, 1, 3, 1025, 65537, 262147};
  }
  if (o.largeBytes.empty() && !o.quick) o.largeBytes = {16u << 20, 256u << 20};
  capSizes(o.largeBytes, o.maxBytes);
  if (o.groupCounts.empty()) {
    o.groupCounts = o.quick ? std::vector<size_t>{1025} : std::vector<size_t>{1025, 65537};
  }
  if (o.benchSizes.empty()) {
    o.benchSizes = {1u << 10, 4u << 10,  16u << 10, 64u << 10,  256u << 10, 1u << 20,
                    4u << 20, 16u << 20, 64u << 20, 128u << 20, 256u << 20, 512u << 20};
    if (o.quick) o.benchSizes = {1u << 10, 64u << 10, 1u << 20, 16u << 20};
  }
  capSizes(o.benchSizes, o.maxBytes);
  if (o.jsonPath.empty()) o.jsonPath = o.outDir + "/" + o.mode + ".json";
}

std::vector<std::string> rankArguments(const Options& o, int rank, int nranks,
                                       const std::string& setDir) {
  std::vector<std::string> a = {"--mode",       o.mode,
                                "--rank",       std::to_string(rank),
                                "--nranks",     std::to_string(nranks),
                                "--set-dir",    setDir,
                                "--device",     std::to_string(o.device),
                                "--op-timeout", std::to_string(o.opTimeout)};
  // Empty lists are meaningful here (no large tier), so pass them as an empty-list marker.
  auto add = [&](const char* flag, const std::vector<size_t>& v) {
    a.push_back(flag);
    a.push_back(v.empty() ? "," : joinSizes(v));
  };
  if (o.mode == "check") {
    add("--counts", o.matrixCounts);
    add("--large-bytes", o.largeBytes);
    add("--group-counts", o.groupCounts);
  } else {
    add("--sizes", o.benchSizes);
    a.push_back("--seconds-per-size");
    a.push_back(std::to_string(o.benchSecondsPerSize));
  }
  return a;
}

}  // namespace e2e
