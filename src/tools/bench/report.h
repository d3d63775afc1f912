// SPDX-License-Identifier: Apache-2.0
// Results: the rows every rank measures, gathered on rank 0, printed as a table on stdout and
// written as JSON, CSV and a gnuplot PNG on request.
//
// A row holds the plugin's measurement and one per baseline ("tcp" today; an "rdma" baseline
// from ib_write_bw would be one more entry, and the table, JSON, CSV and plot pick it up).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace mesh::bench {

struct Context;

struct Measurement {
  static constexpr double kUnset = std::numeric_limits<double>::quiet_NaN();
  double gbps = kUnset;     // pairs: bandwidth (bidir: both directions together);
                            // ring: busbw; stream: received bytes per second
  double algbw = kUnset;    // ring only
  double time_us = kUnset;  // ring only: one all-reduce
  double lat_us = kUnset;   // pairs only: ping-pong half round trip
  // pairs only: CPU seconds and context switches (voluntary + involuntary) of both ranks
  // together per 1e9 payload bytes over this transport's whole run of the row (warm-up and
  // ping-pong included), and the larger rank's thread count (every thread of the process).
  double cpu_s_per_gb = kUnset;
  double csw_per_gb = kUnset;
  double threads = kUnset;
};

struct Row {
  std::string pattern;  // "pairs", "pairs-bidir", "ring-allreduce", "stream"
  int src = -1;         // sender (bidir: lower rank; ring: the measuring rank before merging)
  int dst = -1;
  int nranks = 0;
  uint64_t bytes = 0;
  int iters = 0;
  int window = 0;
  Measurement plugin;
  std::vector<std::pair<std::string, Measurement>> baselines;
  std::string path;  // which cable the TCP baseline used (pairs)
  // Ring patterns: the transports in the order they were timed at this size ("plugin", "tcp").
  std::vector<std::string> order;

  const Measurement* baseline(const std::string& name) const;
};

nlohmann::json row_to_json(const Row& row);
Row row_from_json(const nlohmann::json& j);

// Ring rows arrive once per rank: keep the slowest rank's time per size and transport and
// recompute algbw/busbw from it. Other rows pass through.
std::vector<Row> merge_rows(const std::vector<Row>& rows);

struct RunSummary {
  std::vector<std::string> path_lines;  // every rank's
  uint64_t mismatches = 0;              // all ranks together
  std::vector<std::string> hosts;
  nlohmann::json routes;                 // routes.h pair_routes(): one entry per ordered pair
  nlohmann::json cables;                 // routes.h merge_cables(): each host's interface once
  std::vector<std::string> cable_lines;  // routes.h cable_lines()
};

// Rank 0: header, table, files.
void print_report(const Context& ctx, const RunSummary& summary, const std::vector<Row>& rows);
void write_json(const Context& ctx, const RunSummary& summary, const std::vector<Row>& rows,
                const std::string& file);
void write_csv(const std::vector<Row>& rows, const std::string& file);
// False (with a message on stderr) when gnuplot is missing or fails.
bool write_plot(const Context& ctx, const std::vector<Row>& rows, const std::string& file);

}  // namespace mesh::bench
