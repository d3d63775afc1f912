// SPDX-License-Identifier: Apache-2.0
// Command line of nccl-mesh-bench (CLI11). Everything the tool does is documented in --help.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mesh::bench {

enum class Pattern { kPairs, kRingAllreduce, kRingTraffic, kGinPut, kGinPutSignal };

// The ring patterns share their code (ring.cc): ring-traffic is ring-allreduce without the
// arithmetic.
inline bool is_ring_pattern(Pattern p) {
  return p == Pattern::kRingAllreduce || p == Pattern::kRingTraffic;
}

// The GIN patterns (gin_put.h) are the pairs pattern measured over the plugin's GIN table, with
// the plugin's net path and TCP as the references.
inline bool is_gin_pattern(Pattern p) {
  return p == Pattern::kGinPut || p == Pattern::kGinPutSignal;
}

struct Options {
  // The plugin.
  std::string plugin;
  int dev = 0;

  // Who runs. Local mode (no --rank, no launcher environment) spawns `nranks` ranks itself.
  int nranks = 0;  // 0: not given (local mode: 2; multi-host: from the launcher environment)
  int rank = -1;
  std::string rendezvous;

  // What is measured.
  Pattern pattern = Pattern::kPairs;
  bool bidir = false;
  std::string min_bytes_text = "8";
  std::string max_bytes_text = "64M";
  std::string sizes_text;
  int iters = 100;
  int warmup = 10;
  std::string iter_bytes_text = "256M";
  int window = 8;
  std::string buffer_bytes_text = "256M";
  std::string latency_max_text = "64K";
  // Ring patterns: the slice a ring step's chunk is cut into over the plugin; "nccl": as NCCL's
  // Simple protocol cuts it (sizes.h nccl_slice_floats: two per chunk), so that the plugin moves
  // NCCL's messages, twice as many as with 512 KiB slices at 341 KiB-1 MiB chunks.
  std::string slice_text = "512K";
  // Ring patterns: each plugin receive is posted with a buffer of at least this many bytes, as
  // NCCL's proxy posts its whole step slot whatever the message (Simple: NCCL_BUFFSIZE / 8 x 2,
  // 1 MiB by default); "0": the slice's own size.
  std::string recv_capacity_text = "0";
  int channels = 1;  // ring-traffic: connections per ring neighbour (NCCL's channels)
  bool verify = true;
  bool tcp_baseline = true;
  // The plain-TCP ring polls its sockets without blocking and yields when idle, as NCCL's proxy
  // thread drives every transport, Socket included (a diagnostic; by default it blocks in poll()).
  bool tcp_spin = false;
  // Ring patterns: the plain-TCP ring moves each step in the plugin's slices, framed and polled
  // as NCCL's Socket transport does with its defaults (tcp_baseline.h
  // tcp_ring_exchange_messages): the baseline of the GPU bench's Mesh / Socket lines, on a host
  // without NCCL (a diagnostic; implies polling, as --tcp-spin).
  bool tcp_like_socket = false;
  // Ring patterns: time only the plain-TCP ring, so that a profile or a syscall count of the run
  // sees one transport (a diagnostic; --no-tcp-baseline is the other half).
  bool tcp_only = false;
  // Ring patterns: time the plain-TCP ring before the plugin's at each size (default: the plugin
  // first). Whichever transport runs second at a size runs slower on a small machine (2 cores, 3
  // ranks, 1 MiB all-reduce: the plugin up to 19%, the TCP ring up to 9%, measurements.md twentieth
  // pass), so a comparison that matters takes both orders (bench-interleaved.py
  // --alternate-order).
  bool tcp_first = false;
  // Local mode: rank r runs on CPU local_cpus[r % size] (cpu_pin.h; empty: where the scheduler
  // puts it). Parsed from --local-cpus.
  std::string local_cpus_text;
  std::vector<int> local_cpus;
  double duration = 0;
  double timeout = 60;
  double connect_delay = 0;  // fault tests: seconds between the handle exchange and connect()

  // Output.
  std::string json;
  std::string csv;
  std::string plot;
  bool quiet = false;

  // Plumbing from the local launcher to the ranks it spawns (hidden options).
  int local_rank = -1;
  int local_port = 0;
  int local_listen_fd = -1;

  // Resolved by parse_options().
  std::vector<uint64_t> sizes;
  uint64_t iter_bytes = 0;
  uint64_t buffer_bytes = 0;
  uint64_t latency_max_bytes = 0;
  uint64_t slice_bytes = 0;  // --slice-bytes nccl: the largest slice (kNcclMaxSliceBytes)
  bool nccl_slices = false;  // --slice-bytes nccl
  uint64_t recv_capacity = 0;

  bool local_child() const { return local_rank >= 0; }
  const char* pattern_name() const;
};

// Parses and validates. Returns an exit code when the program should stop now (--help: 0, a
// usage error: 1 after printing it), nullopt to go on.
std::optional<int> parse_options(int argc, char** argv, Options& opt);

}  // namespace mesh::bench
