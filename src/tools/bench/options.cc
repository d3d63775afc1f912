// SPDX-License-Identifier: Apache-2.0
#include "options.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <map>

#include "cpu_pin.h"
#include "pattern.h"
#include "sizes.h"

#ifndef MESH_BENCH_VERSION
#define MESH_BENCH_VERSION "dev"
#endif

namespace mesh::bench {
namespace {

constexpr const char* kDescription =
    "nccl-mesh-bench: point-to-point and ring all-reduce benchmark for the nccl-mesh NCCL net "
    "plugin, driven through the plugin's own ncclNet_v11 API (dlopen, like NCCL), with a plain "
    "TCP baseline over the same cable in the same run.";

constexpr const char* kFooter = R"(MODES
  Local (no --rank, no launcher environment): spawns --nranks ranks (default 2) of this binary
  on this host over loopback, with NCCL_MESH_IFNAME=lo; all traffic stays in 127.0.0.0/8.
  Running it with no arguments prints the default table (8 B .. 64 MiB, every ordered pair).

  Multi-host: one process per host with --rank R --nranks N --rendezvous IP:PORT. Rank 0 listens
  on IP:PORT, the others connect (retrying until --timeout). Under mpirun/srun, --rank/--nranks
  come from OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE or SLURM_PROCID/SLURM_NTASKS; the
  rendezvous is still required, e.g.
    mpirun -np 3 --host a,b,c nccl-mesh-bench --rendezvous 10.0.0.1:29555
  Each rank prints the interface and peer address its TCP baseline uses for every peer.

PATTERNS
  pairs           For every ordered pair (i->j), one pair at a time (the other ranks wait at a
                  barrier): bandwidth with a window of in-flight messages, and the ping-pong half
                  round trip for sizes up to --latency-max-bytes. --bidir runs i<->j in both
                  directions at once and reports the aggregate bandwidth.
  ring-allreduce  float32 sum over all ranks: ring reduce-scatter + all-gather over the plugin,
                  result checked; reports time, algbw and busbw = algbw * 2(N-1)/N. Ring
                  patterns time the plugin, then the plain-TCP ring, at each size (--tcp-first:
                  the other way round); the second runs slower on a small machine, so a
                  comparison that matters takes both orders.
  ring-traffic    The traffic of a ring all-reduce, every rank sending to its successor while
                  receiving from its predecessor, N at once, but no reduction on the CPU: the
                  ceiling of NCCL's ring all-reduce over this transport on this host (NCCL
                  reduces on the GPU, so its ring moves exactly this traffic). Pipelined as
                  NCCL's ring is: a --slice-bytes slice of step s+1 leaves as soon as the same
                  slice of step s has arrived (no stop between the 2(N-1) steps), and with
                  --channels C every chunk is split over C connections per neighbour, all
                  progressed by one thread (NCCL's channels and proxy thread). The TCP ring of
                  the same run goes step by step. The result is checked (each chunk must hold
                  its owner's input). Compare NCCL's all_reduce busbw with this pattern's busbw
                  at the same size, rank count and channels.
  gin-put         The pairs pattern over the plugin's GIN table (ncclGinPlugin_v13 of the same
                  library, as NCCL's GIN proxy drives it: collective connect of all ranks,
                  symmetric registrations, iput, test): the sender puts --iters messages into
                  the receiver's registration (--window in flight), then a signal-only
                  iputSignal; the receiver waits for the signal, checks the last --window
                  messages and answers with a signal. The plugin's own net path (isend/irecv,
                  column "net") and plain TCP run in the same run, size by size, as references;
                  ratios are GIN / reference. No --bidir. An ib_write_bw reference is not run:
                  the report says whether an RDMA device exists.
  gin-put-signal  The same with every put an iputSignal (INC): the receiver waits for the
                  signal to count every message.
  --duration S    Streams messages of one size (--sizes, default 1M) between every ordered pair
                  at once for S seconds (fault-injection runs; plugin only, no TCP
                  baseline). A plugin error prints
                  "ERROR rank R peer P: <call> returned <code> (<name>) after <seconds> s".
                  After a failure the rank closes every comm and finalizes, as NCCL's abort
                  does, and prints "CLOSE rank R: ..." with the time that took and the open
                  file descriptors and threads before init and after the close (a clean end
                  prints the same line); a wait for another rank's connection gives way to the
                  plugin's own error in this mode.

FAULT TESTS
  --connect-delay S  Wait S seconds between the handle exchange and the first connect()/accept(),
                  printing "PHASE rank R: handles exchanged" before and "PHASE rank R:
                  connecting" after, so a test can kill or stop a peer in between.

MEASUREMENT
  GB/s = 1e9 bytes/s. Bandwidth: the sender posts --iters messages keeping --window in flight;
  the clock stops when the receiver's acknowledgement of the last one arrives. Big messages get
  fewer iterations (about --iter-bytes per size, at least 4) and a smaller window (buffers of
  one direction fit in --buffer-bytes). With --verify (default) every received byte is checked
  against a pattern of (sender rank, message index, offset), for the plugin and the TCP baseline
  alike, inside the timed loops; use --no-verify for raw peak numbers. The TCP baseline is one
  plain TCP socket per pair (TCP_NODELAY, blocking send()/recv() of whole messages; both
  directions at once use poll()), bound to the local address the plugin's own topology code
  picks for that peer. Ratios are plugin/TCP: above 1 the plugin moves more bytes per second
  (bandwidth) or takes longer (latency).

EXIT CODES
  0 ok, 1 usage or setup error, 2 data verification failed, 3 a plugin call returned an error,
  4 a wait ran past --timeout (the message says what it waited for), 5 another rank failed.

ENVIRONMENT
  NCCL_MESH_IFNAME  interface filter, read by the plugin and by the TCP baseline's path choice
                    (forced to "lo" in local mode)
  NCCL_DEBUG        WARN (default), INFO or TRACE: which plugin log lines are shown
)";

struct SizeCheck {
  std::string operator()(const std::string& text) const {
    std::string why;
    return parse_size(text, &why) ? std::string() : why;
  }
};

uint64_t resolve_size(const std::string& text) {
  return *parse_size(text);
}

}  // namespace

const char* Options::pattern_name() const {
  switch (pattern) {
    case Pattern::kPairs:
      return "pairs";
    case Pattern::kRingAllreduce:
      return "ring-allreduce";
    case Pattern::kRingTraffic:
      return "ring-traffic";
    case Pattern::kGinPut:
      return "gin-put";
    case Pattern::kGinPutSignal:
      return "gin-put-signal";
  }
  return "?";
}

std::optional<int> parse_options(int argc, char** argv, Options& opt) {
  CLI::App app(kDescription, "nccl-mesh-bench");
  app.footer(kFooter);
  app.get_formatter()->column_width(34);
  const CLI::Validator size_check(SizeCheck{}, "SIZE");

  app.add_option("--plugin", opt.plugin,
                 "Plugin library (default: libnccl-net-mesh.so of the install or build tree)");
  app.add_option("--dev", opt.dev, "Plugin device (NCCL net device index) to use")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  app.add_option("--nranks", opt.nranks,
                 "Local mode: ranks to spawn (default 2). Multi-host: number of ranks")
      ->check(CLI::Range(2, kMaxAllreduceRanks));
  app.add_option("--rank", opt.rank, "Multi-host: this process's rank")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rendezvous", opt.rendezvous,
                 "Multi-host: IP:PORT that rank 0 listens on and the others connect to");

  const std::map<std::string, Pattern> patterns{{"pairs", Pattern::kPairs},
                                                {"ring-allreduce", Pattern::kRingAllreduce},
                                                {"ring-traffic", Pattern::kRingTraffic},
                                                {"gin-put", Pattern::kGinPut},
                                                {"gin-put-signal", Pattern::kGinPutSignal}};
  app.add_option("--pattern", opt.pattern,
                 "pairs | ring-allreduce | ring-traffic | gin-put | gin-put-signal")
      ->transform(CLI::CheckedTransformer(patterns))
      ->default_str("pairs");
  app.add_flag("--bidir", opt.bidir, "pairs: both directions of a pair at once");

  app.add_option("--min-bytes", opt.min_bytes_text, "Smallest message of the sweep")
      ->capture_default_str()
      ->check(size_check);
  app.add_option("--max-bytes", opt.max_bytes_text, "Largest message of the sweep (up to 1G)")
      ->capture_default_str()
      ->check(size_check);
  app.add_option("--sizes", opt.sizes_text,
                 "Explicit comma-separated sizes instead of the sweep, e.g. 8,64K,1M,1G");
  app.add_option("--iters", opt.iters, "Timed messages (or all-reduces) per size")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup", opt.warmup, "Untimed messages before them")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--iter-bytes", opt.iter_bytes_text,
                 "Reduce --iters for big sizes so one size moves about this much")
      ->capture_default_str()
      ->check(size_check);
  app.add_option("--window", opt.window, "Messages in flight per direction (plugin limit 32)")
      ->capture_default_str()
      ->check(CLI::Range(1, 32));
  app.add_option("--buffer-bytes", opt.buffer_bytes_text,
                 "Buffer memory per direction; caps the window for big messages")
      ->capture_default_str()
      ->check(size_check);
  app.add_option("--latency-max-bytes", opt.latency_max_text,
                 "Ping-pong latency is measured for sizes up to this")
      ->capture_default_str()
      ->check(size_check);
  app.add_option("--slice-bytes", opt.slice_text,
                 "ring patterns: pipeline slice of a ring step over the plugin; nccl: two per "
                 "chunk as NCCL's Simple protocol cuts them (half the chunk, 32K-1M)")
      ->capture_default_str()
      ->check(size_check | CLI::IsMember({"nccl"}));
  app.add_option(
         "--recv-capacity", opt.recv_capacity_text,
         "ring patterns: post each plugin receive with a buffer of at least this size, "
         "as NCCL posts its whole step slot (1M for Simple by default); 0: the slice's own size")
      ->capture_default_str()
      ->check(size_check);
  app.add_option("--channels", opt.channels,
                 "ring-traffic: connections per ring neighbour, each with its share of every "
                 "chunk (NCCL's channels)")
      ->capture_default_str()
      ->check(CLI::Range(1, 8));
  app.add_flag("--verify,!--no-verify", opt.verify,
               "Check every received byte (default on); a mismatch exits with code 2");
  app.add_flag("!--no-tcp-baseline", opt.tcp_baseline, "Skip the plain TCP comparison");
  app.add_flag("--tcp-spin", opt.tcp_spin,
               "ring patterns: the plain-TCP ring polls without blocking and yields when idle, "
               "as NCCL's proxy thread drives its transports (default: it blocks in poll())");
  app.add_flag("--tcp-like-socket", opt.tcp_like_socket,
               "ring patterns: the plain-TCP ring sends each step in the plugin's slices, each "
               "one its 4-byte size in a send() of its own and then its bytes, one at a time, "
               "polling: NCCL's Socket transport with its defaults (no helper threads)");
  app.add_flag("--tcp-only", opt.tcp_only,
               "ring patterns: time only the plain-TCP ring, not the plugin's (one transport per "
               "run, for a profile or a syscall count; --no-tcp-baseline is the other half)");
  app.add_flag("--tcp-first", opt.tcp_first,
               "ring patterns: time the plain-TCP ring before the plugin's at each size (default: "
               "the plugin first; the second one runs slower on a small machine, so compare both "
               "orders)");
  app.add_option("--local-cpus", opt.local_cpus_text,
                 "Local mode: pin rank r to the r-th CPU of this comma-separated list (modulo its "
                 "length), e.g. 0,1,1. With more ranks than cores the scheduler moves a rank that "
                 "blocks (the plain-TCP ring) to an idle core but not one that polls (the "
                 "plugin's, as NCCL's proxy drives it); a fixed placement is the same for both");
  app.add_option("--duration", opt.duration,
                 "Seconds of continuous streaming of one size instead of a sweep")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--connect-delay", opt.connect_delay,
                 "Fault tests: seconds between the handle exchange and connect()")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", opt.timeout,
                 "Seconds any wait may go without progress before the rank gives up")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  app.add_option("--json", opt.json, "Write every measured row as JSON to FILE");
  app.add_option("--csv", opt.csv, "Write every measured row as CSV to FILE");
  app.add_option("--plot", opt.plot,
                 "Draw bandwidth vs message size (plugin and TCP) into FILE.png with gnuplot");
  app.add_flag("-q,--quiet", opt.quiet, "No progress lines on stderr");
  app.set_version_flag("--version", std::string("nccl-mesh-bench ") + MESH_BENCH_VERSION);

  // Set by the local launcher for the ranks it spawns; not for people.
  app.add_option("--local-rank", opt.local_rank)->group("");
  app.add_option("--local-port", opt.local_port)->group("");
  app.add_option("--local-listen-fd", opt.local_listen_fd)->group("");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  auto fail = [](const std::string& msg) {
    fmt::print(stderr, "nccl-mesh-bench: {}\nRun with --help for more information.\n", msg);
    return 1;
  };

  opt.iter_bytes = resolve_size(opt.iter_bytes_text);
  opt.buffer_bytes = resolve_size(opt.buffer_bytes_text);
  opt.latency_max_bytes = resolve_size(opt.latency_max_text);
  opt.nccl_slices = opt.slice_text == "nccl";
  opt.slice_bytes = opt.nccl_slices ? kNcclMaxSliceBytes : resolve_size(opt.slice_text);
  opt.recv_capacity = resolve_size(opt.recv_capacity_text);
  if (opt.slice_bytes < 4) return fail("--slice-bytes must be at least 4");
  if (opt.buffer_bytes == 0) return fail("--buffer-bytes must be positive");

  if (!opt.sizes_text.empty()) {
    std::string why;
    auto list = parse_size_list(opt.sizes_text, &why);
    if (!list) return fail("--sizes: " + why);
    opt.sizes = std::move(*list);
  } else if (opt.duration > 0) {
    opt.sizes = {1u << 20};
  } else {
    const uint64_t lo = resolve_size(opt.min_bytes_text);
    const uint64_t hi = resolve_size(opt.max_bytes_text);
    if (lo == 0) return fail("--min-bytes must be at least 1");
    if (lo > hi) return fail("--min-bytes is larger than --max-bytes");
    opt.sizes = power_of_two_sweep(lo, hi);
  }
  if (opt.sizes.empty()) return fail("no message sizes to run");
  if (opt.sizes.size() > 256) return fail("at most 256 sizes");
  for (uint64_t s : opt.sizes) {
    if (s > kMaxMessageBytes) {
      return fail(fmt::format("size {} is above the 1 GiB a single isend may carry", s));
    }
    if (s == 0) return fail("message sizes must be at least 1 byte");
  }
  if (opt.channels > 1 && opt.pattern != Pattern::kRingTraffic)
    return fail("--channels works with --pattern ring-traffic only");
  if (opt.duration > 0) {
    if (opt.sizes.size() != 1) return fail("--duration streams one size: give one --sizes value");
    if (opt.pattern != Pattern::kPairs) return fail("--duration works with --pattern pairs only");
    opt.tcp_baseline = false;  // a fault-injection load: the plugin only
  }
  if (is_gin_pattern(opt.pattern) && opt.bidir) {
    return fail(
        fmt::format("{} measures one direction at a time: drop --bidir", opt.pattern_name()));
  }
  if (opt.tcp_only && (!is_ring_pattern(opt.pattern) || !opt.tcp_baseline)) {
    return fail("--tcp-only times the plain-TCP ring of a ring pattern: drop --no-tcp-baseline");
  }
  if (opt.tcp_first && (!is_ring_pattern(opt.pattern) || !opt.tcp_baseline || opt.tcp_only)) {
    return fail(
        "--tcp-first orders the plugin's and the plain-TCP ring's runs of a ring pattern: "
        "it needs both (drop --no-tcp-baseline and --tcp-only)");
  }
  if (is_ring_pattern(opt.pattern)) {
    std::vector<uint64_t> kept;
    for (uint64_t s : opt.sizes) {
      if (s >= 4) kept.push_back(s / 4 * 4);
    }
    if (kept.empty()) {
      return fail(
          fmt::format("{} needs sizes of at least 4 bytes (one float)", opt.pattern_name()));
    }
    opt.sizes = std::move(kept);
  }
  const bool multi_host = opt.rank >= 0 || !opt.rendezvous.empty();
  if (opt.local_child() && multi_host) return fail("--local-rank is for the local launcher only");
  if (!opt.local_cpus_text.empty()) {  // local mode only: main.cc resolve_role
    std::string why;
    auto cpus = parse_cpu_list(opt.local_cpus_text, &why);
    if (!cpus) return fail("--local-cpus: " + why);
    opt.local_cpus = std::move(*cpus);
  }
  if (opt.rank >= 0 && opt.nranks > 0 && opt.rank >= opt.nranks) {
    return fail("--rank must be smaller than --nranks");
  }
  return std::nullopt;
}

}  // namespace mesh::bench
