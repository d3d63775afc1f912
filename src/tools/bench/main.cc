// SPDX-License-Identifier: Apache-2.0
// nccl-mesh-bench: see --help (options.cc) for what it measures and how to run it.
//
// One binary, three roles: the local launcher (no arguments), a rank it spawned
// (--local-rank), or a multi-host rank (--rank/--rendezvous or a launcher's environment).
#include <fmt/format.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "context.h"
#include "cpu_pin.h"
#include "errors.h"
#include "launch_env.h"
#include "local_launcher.h"
#include "options.h"
#include "pairs.h"
#include "report.h"
#include "ring.h"
#include "routes.h"
#include "stream.h"
#include "wait.h"

namespace mesh::bench {
namespace {

using json = nlohmann::json;

// A rank the local launcher pinned (--local-cpus) runs on its one CPU, or the run stops: a
// comparison that says "pinned" must be.
void check_pinned(const Options& opt) {
  if (opt.local_cpus.empty()) return;
  const int want = cpu_for_rank(opt.local_cpus, opt.local_rank);
  const auto have = allowed_cpus();
  if (have != std::vector<int>{want}) {
    throw setup_error(
        fmt::format("--local-cpus: rank {} should run on CPU {} alone, but may run on CPUs {}",
                    opt.local_rank, want, format_cpu_list(have)));
  }
}

// Fills ctx.rank/nranks/local_mode. Returns false for local mode (this process launches).
bool resolve_role(Context& ctx) {
  const auto& opt = ctx.opt;
  if (opt.local_child()) {
    ctx.rank = opt.local_rank;
    ctx.nranks = opt.nranks;
    ctx.local_mode = true;
    check_pinned(opt);
    return true;
  }
  std::string why;
  const auto env = detect_launcher([](const char* k) { return std::getenv(k); }, &why);
  if (!why.empty()) throw setup_error(why);
  const int rank = opt.rank >= 0 ? opt.rank : (env ? env->rank : -1);
  const int nranks = opt.nranks > 0 ? opt.nranks : (env ? env->size : 0);
  if (rank >= 0 && !opt.local_cpus.empty()) {
    throw setup_error(
        "--local-cpus pins the ranks of local mode only (several hosts: pin with the launcher, "
        "e.g. taskset or mpirun --bind-to)");
  }
  if (rank < 0) {
    if (!opt.rendezvous.empty()) {
      throw setup_error("--rendezvous needs --rank (or a launcher environment such as mpirun's)");
    }
    return false;
  }
  if (opt.rendezvous.empty()) {
    throw setup_error(fmt::format("multi-host mode (rank {}{}) needs --rendezvous IP:PORT", rank,
                                  env && opt.rank < 0 ? " from " + env->source : ""));
  }
  if (nranks < 2) throw setup_error("multi-host mode needs --nranks N (N >= 2)");
  if (rank >= nranks) throw setup_error(fmt::format("rank {} is not below {} ranks", rank, nranks));
  ctx.rank = rank;
  ctx.nranks = nranks;
  return true;
}

int run_rank(Context& ctx) {
  set_my_rank(ctx.rank);
  setup(ctx);

  // The cables' counters around the pattern only: what the measurement itself moved (plus
  // whatever else crossed those cables meanwhile, relayed traffic of other pairs included).
  const CableSampler cables(ctx);
  const auto cables_before = cables.sample();
  std::vector<Row> rows;
  if (ctx.opt.duration > 0) {
    rows = run_stream(ctx);
  } else if (is_ring_pattern(ctx.opt.pattern)) {
    rows = run_ring(ctx);
  } else {
    rows = run_pairs(ctx);
  }
  const auto cables_after = cables.sample();

  // Everything to rank 0; everybody learns the global mismatch count (and exits 2 if any).
  json mine;
  mine["mismatches"] = ctx.mismatches;
  mine["paths"] = ctx.path_lines;
  mine["routes"] = routes_json(ctx);
  mine["cables"] = cables_json(ctx, cables_before, cables_after);
  json jr = json::array();
  for (const auto& r : rows) jr.push_back(row_to_json(r));
  mine["rows"] = jr;
  const auto all = ctx.rdv->allgather(mine.dump());
  RunSummary summary;
  summary.hosts = ctx.hosts;
  std::vector<Row> all_rows;
  std::vector<json> routes, cable_deltas;
  for (const auto& s : all) {
    const auto j = json::parse(s);
    summary.mismatches += j.at("mismatches").get<uint64_t>();
    for (const auto& l : j.at("paths")) summary.path_lines.push_back(l.get<std::string>());
    for (const auto& r : j.at("rows")) all_rows.push_back(row_from_json(r));
    routes.push_back(j.at("routes"));
    cable_deltas.push_back(j.at("cables"));
  }
  summary.routes = pair_routes(routes, ctx.rank_addrs);
  summary.cables = merge_cables(cable_deltas);
  summary.cable_lines = cable_lines(summary.cables);
  if (ctx.rank == 0) {
    const auto merged = merge_rows(all_rows);
    print_report(ctx, summary, merged);
    if (!ctx.opt.json.empty()) write_json(ctx, summary, merged, ctx.opt.json);
    if (!ctx.opt.csv.empty()) write_csv(merged, ctx.opt.csv);
    if (!ctx.opt.plot.empty()) write_plot(ctx, merged, ctx.opt.plot);
  }
  teardown(ctx);
  return summary.mismatches > 0 ? kExitVerify : kExitOk;
}

// After a failure the plugin may still have threads touching comms we never closed: leave
// without running destructors, so the exit code is the one we chose.
[[noreturn]] void die(int code, const std::string& line) {
  fmt::print(stderr, "{}\n", line);
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

}  // namespace
}  // namespace mesh::bench

int main(int argc, char** argv) {
  using namespace mesh::bench;
  // Whole lines: the report goes to stdout while the plugin's threads log to stderr, often into
  // the same file; a fully buffered stdout would be flushed in 4 KiB blocks that a log line can
  // split (a "# route" line cut in two).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options opt;
  if (const auto code = parse_options(argc, argv, opt)) return *code;
  Context ctx;
  ctx.opt = opt;
  try {
    if (!resolve_role(ctx)) return run_local_launcher(argc, argv, opt);
    return run_rank(ctx);
  } catch (const BenchError& e) {
    // Plugin, timeout and abort lines carry their own "ERROR/TIMEOUT/ABORT rank R" prefix.
    const std::string line =
        e.exit_code() == kExitSetup
            ? fmt::format("nccl-mesh-bench{}: {}",
                          my_rank() >= 0 ? fmt::format(" rank {}", my_rank()) : "", e.what())
            : std::string(e.what());
    if (ctx.opt.duration > 0 && ctx.net) {
      // Fault-injection mode: close what is still open, as NCCL's abort does, and report it.
      fmt::print(stderr, "{}\n", line);
      close_and_report(ctx, true);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(e.exit_code());
    }
    die(e.exit_code(), line);
  } catch (const std::exception& e) {
    die(kExitSetup, fmt::format("nccl-mesh-bench rank {}: {}", my_rank(), e.what()));
  }
}
