// SPDX-License-Identifier: Apache-2.0
#include "report.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "context.h"
#include "cpu_pin.h"
#include "gin_put.h"
#include "metrics.h"
#include "sizes.h"

#ifndef MESH_BENCH_VERSION
#define MESH_BENCH_VERSION "dev"
#endif

namespace mesh::bench {
namespace {

using json = nlohmann::json;

json num(double v) {
  return std::isnan(v) ? json(nullptr) : json(v);
}
double get_num(const json& j, const std::string& key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? Measurement::kUnset : it->get<double>();
}

void put_measurement(json& j, const std::string& prefix, const Measurement& m) {
  j[prefix + "_gbps"] = num(m.gbps);
  j[prefix + "_lat_us"] = num(m.lat_us);
  j[prefix + "_algbw"] = num(m.algbw);
  j[prefix + "_time_us"] = num(m.time_us);
  j[prefix + "_cpu_s_per_gb"] = num(m.cpu_s_per_gb);
  j[prefix + "_csw_per_gb"] = num(m.csw_per_gb);
  j[prefix + "_threads"] = num(m.threads);
}

Measurement get_measurement(const json& j, const std::string& prefix) {
  Measurement m;
  m.gbps = get_num(j, prefix + "_gbps");
  m.lat_us = get_num(j, prefix + "_lat_us");
  m.algbw = get_num(j, prefix + "_algbw");
  m.time_us = get_num(j, prefix + "_time_us");
  m.cpu_s_per_gb = get_num(j, prefix + "_cpu_s_per_gb");
  m.csw_per_gb = get_num(j, prefix + "_csw_per_gb");
  m.threads = get_num(j, prefix + "_threads");
  return m;
}

std::vector<std::string> baseline_names(const std::vector<Row>& rows) {
  std::vector<std::string> names;
  for (const auto& r : rows) {
    for (const auto& b : r.baselines) {
      if (std::find(names.begin(), names.end(), b.first) == names.end()) names.push_back(b.first);
    }
  }
  return names;
}

std::string cell(double v, int width, int precision) {
  if (std::isnan(v)) return fmt::format("{:>{}}", "-", width);
  return fmt::format("{:>{}.{}f}", v, width, precision);
}

// Bandwidths span 1e-5 .. 1e2 GB/s over a sweep: small values get more decimals so the 8-byte
// rows still say something, without widening the column.
std::string cell_bw(double v, int width) {
  if (std::isnan(v)) return fmt::format("{:>{}}", "-", width);
  const int decimals = v >= 10.0 ? 2 : (v >= 0.1 ? 3 : 5);
  return fmt::format("{:>{}.{}f}", v, width, decimals);
}

std::string pair_label(const Row& r) {
  if (r.pattern.rfind("ring-", 0) == 0) return "all";
  return fmt::format("{}{}{}", r.src, r.pattern == "pairs-bidir" ? "<->" : "->", r.dst);
}

bool is_ring(const std::vector<Row>& rows) {
  return !rows.empty() && rows.front().pattern.rfind("ring-", 0) == 0;
}

std::string csv_num(double v) {
  return std::isnan(v) ? std::string() : fmt::format("{:.6g}", v);
}

bool gnuplot_in_path() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (!dir.empty() && access((dir + "/gnuplot").c_str(), X_OK) == 0) return true;
  }
  return false;
}

std::string gp_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "''";
    else
      out += c;
  }
  return out + "'";
}

}  // namespace

const Measurement* Row::baseline(const std::string& name) const {
  for (const auto& b : baselines) {
    if (b.first == name) return &b.second;
  }
  return nullptr;
}

json row_to_json(const Row& row) {
  json j;
  j["pattern"] = row.pattern;
  j["src"] = row.src;
  j["dst"] = row.dst;
  j["nranks"] = row.nranks;
  j["bytes"] = row.bytes;
  j["iters"] = row.iters;
  j["window"] = row.window;
  put_measurement(j, "plugin", row.plugin);
  json names = json::array();
  for (const auto& [name, m] : row.baselines) {
    names.push_back(name);
    put_measurement(j, name, m);
    j[name + "_bw_ratio"] = num(ratio(row.plugin.gbps, m.gbps));
    j[name + "_lat_ratio"] = num(ratio(row.plugin.lat_us, m.lat_us));
    j[name + "_cpu_ratio"] = num(ratio(row.plugin.cpu_s_per_gb, m.cpu_s_per_gb));
  }
  j["baselines"] = names;
  j["path"] = row.path;
  if (!row.order.empty()) j["order"] = row.order;
  return j;
}

Row row_from_json(const json& j) {
  Row row;
  row.pattern = j.at("pattern").get<std::string>();
  row.src = j.at("src").get<int>();
  row.dst = j.at("dst").get<int>();
  row.nranks = j.at("nranks").get<int>();
  row.bytes = j.at("bytes").get<uint64_t>();
  row.iters = j.at("iters").get<int>();
  row.window = j.at("window").get<int>();
  row.plugin = get_measurement(j, "plugin");
  for (const auto& n : j.at("baselines")) {
    const auto name = n.get<std::string>();
    row.baselines.emplace_back(name, get_measurement(j, name));
  }
  row.path = j.value("path", std::string());
  row.order = j.value("order", std::vector<std::string>());
  return row;
}

std::vector<Row> merge_rows(const std::vector<Row>& rows) {
  std::vector<Row> out;
  std::map<uint64_t, size_t> ring_index;  // bytes -> position in out
  auto slower = [](Measurement& into, const Measurement& m, uint64_t bytes, int nranks) {
    if (std::isnan(m.time_us)) return;
    if (std::isnan(into.time_us) || m.time_us > into.time_us) into.time_us = m.time_us;
    into.algbw = gbps(bytes, into.time_us * 1e-6);
    into.gbps = allreduce_busbw(into.algbw, nranks);
  };
  for (const auto& r : rows) {
    if (r.pattern.rfind("ring-", 0) != 0) {
      out.push_back(r);
      continue;
    }
    const auto it = ring_index.find(r.bytes);
    if (it == ring_index.end()) {
      ring_index[r.bytes] = out.size();
      Row first = r;
      first.src = -1;
      out.push_back(first);
      continue;
    }
    Row& into = out[it->second];
    slower(into.plugin, r.plugin, r.bytes, r.nranks);
    for (const auto& [name, m] : r.baselines) {
      for (auto& b : into.baselines) {
        if (b.first == name) slower(b.second, m, r.bytes, r.nranks);
      }
    }
  }
  // Stable order: by pattern position, then pair, then size.
  std::stable_sort(out.begin(), out.end(), [](const Row& a, const Row& b) {
    if (a.pattern != b.pattern) return false;
    const int pa = std::min(a.src, a.dst), pb = std::min(b.src, b.dst);
    const int qa = std::max(a.src, a.dst), qb = std::max(b.src, b.dst);
    if (pa != pb) return pa < pb;
    if (qa != qb) return qa < qb;
    if (a.src != b.src) return a.src < b.src;
    return a.bytes < b.bytes;
  });
  return out;
}

void print_report(const Context& ctx, const RunSummary& summary, const std::vector<Row>& rows) {
  const auto& opt = ctx.opt;
  std::string hosts;
  std::map<std::string, int> per_host;
  for (const auto& h : summary.hosts) ++per_host[h];
  for (const auto& [h, n] : per_host)
    hosts += fmt::format("{}{} x{}", hosts.empty() ? "" : ", ", h, n);
  fmt::print("# nccl-mesh-bench {}: plugin {} ({})\n", MESH_BENCH_VERSION, ctx.net->name(),
             ctx.net->path());
  fmt::print("# device {} of {}: {}, {} Mbps, latency {} us, maxRecvs {}\n", opt.dev, ctx.ndev,
             ctx.dev_name, ctx.props.speed, ctx.props.latency, ctx.props.maxRecvs);
  std::string pinned;
  for (int r = 0; r < ctx.nranks && !opt.local_cpus.empty(); ++r) {
    pinned += fmt::format("{}{}", r == 0 ? ", ranks pinned to CPUs " : ",",
                          cpu_for_rank(opt.local_cpus, r));
  }
  fmt::print("# {} ranks on {}{}\n", ctx.nranks, hosts,
             ctx.local_mode ? fmt::format(" (local mode, NCCL_MESH_IFNAME=lo{})", pinned) : "");
  const bool ring = is_ring(rows);
  const bool stream = !rows.empty() && rows.front().pattern == "stream";
  // Ring patterns time the plugin and the TCP ring one after the other at each size; the second
  // runs slower on a small machine (options.h tcp_first), so the order is part of the result.
  const std::string order =
      ring && rows.front().order.size() == 2
          ? fmt::format(", timed at each size: {} first", rows.front().order.front())
          : std::string();
  fmt::print("# pattern {}{}, window {}, verify {}{}, GB/s = 1e9 bytes/s\n",
             stream ? "stream" : opt.pattern_name(),
             opt.bidir && !ring && !stream ? " --bidir" : "", opt.window, opt.verify ? "on" : "off",
             order);
  for (const auto& l : summary.path_lines) fmt::print("# {}\n", l);
  for (const auto& r : summary.routes) fmt::print("# route {}\n", r.at("text").get<std::string>());
  if (!summary.cable_lines.empty()) {
    fmt::print(
        "# cables: what each rank's mesh interfaces carried during the measurement (the "
        "interface's counters: relayed traffic included)\n");
  }
  for (const auto& l : summary.cable_lines) fmt::print("# {}\n", l);
  const auto names = baseline_names(rows);
  // What the first column measured: the plugin's net path, or its GIN table for gin-put*.
  const bool gin = is_gin_pattern(opt.pattern);
  const std::string me = gin ? opt.pattern_name() : "plugin";
  if (gin) {
    fmt::print(
        "# {}: ncclGinPlugin_v13 of the same library; references in the same run: net = the "
        "plugin's isend/irecv, tcp = one plain TCP socket; ratio = {} / reference\n",
        me, me);
    fmt::print("# {}\n", rdma_reference_note());
  }
  if (!names.empty() && ring) {
    fmt::print("# ratio = plugin busbw / {} busbw: above 1 = plugin faster\n", names.front());
  } else if (!names.empty() && !stream) {
    fmt::print(
        "# ratio = {} / {}: bandwidth above 1 = {} faster; latency above 1 = {} "
        "slower\n",
        me, names.front(), me, me);
    fmt::print(
        "# cpu s/GB, csw/GB: CPU seconds and context switches of both ranks per 1e9 payload bytes "
        "(the whole row: warm-up, timed, ping-pong); threads: per rank (the larger); cpu rat = "
        "{} / {}\n",
        me, names.front());
  }
  if (stream) {
    fmt::print("#{:>7} {:>10} {:>10} {:>12}\n", "pair", "size", "messages", "plugin GB/s");
    for (const auto& r : rows) {
      fmt::print("{:>8} {:>10} {:>10} {}\n", pair_label(r), format_size(r.bytes), r.iters,
                 cell_bw(r.plugin.gbps, 12));
    }
  } else if (ring) {
    std::string head = fmt::format("#{:>9} {:>11} {:>6} {:>10} {:>10} {:>10}", "size", "count",
                                   "iters", "plugin us", "algbw GB/s", "busbw GB/s");
    for (const auto& n : names) {
      head += fmt::format(" {:>10} {:>10} {:>9}", n + " us", n + " busbw", "ratio");
    }
    fmt::print("{}\n", head);
    for (const auto& r : rows) {
      std::string line = fmt::format("{:>10} {:>11} {:>6} {} {} {}", format_size(r.bytes),
                                     r.bytes / 4, r.iters, cell(r.plugin.time_us, 10, 1),
                                     cell_bw(r.plugin.algbw, 10), cell_bw(r.plugin.gbps, 10));
      for (const auto& n : names) {
        const Measurement* m = r.baseline(n);
        const Measurement b = m != nullptr ? *m : Measurement{};
        line += fmt::format(" {} {} {}", cell(b.time_us, 10, 1), cell_bw(b.gbps, 10),
                            cell(ratio(r.plugin.gbps, b.gbps), 9, 2));
      }
      fmt::print("{}\n", line);
    }
  } else {
    // The first columns are as wide as their label ("gin-put-signal GB/s" is wider than 12).
    const int bw_w = std::max(12, static_cast<int>(me.size()) + 5);
    const int us_w = std::max(10, static_cast<int>(me.size()) + 3);
    std::string head = fmt::format("#{:>7} {:>10} {:>6} {:>4} {:>{}}", "pair", "size", "iters",
                                   "win", me + " GB/s", bw_w);
    for (const auto& n : names) head += fmt::format(" {:>10} {:>8}", n + " GB/s", "bw ratio");
    head += fmt::format(" {:>{}}", me + " us", us_w);
    for (const auto& n : names) head += fmt::format(" {:>9} {:>9}", n + " us", "lat ratio");
    head += fmt::format(" {:>8} {:>7} {:>7}", "cpu s/GB", "csw/GB", "threads");
    for (const auto& n : names)
      head += fmt::format(" {:>7} {:>7} {:>7}", n + " cpu", n + " csw", "cpu rat");
    fmt::print("{}\n", head);
    for (const auto& r : rows) {
      std::string line =
          fmt::format("{:>8} {:>10} {:>6} {:>4} {}", pair_label(r), format_size(r.bytes), r.iters,
                      r.window, cell_bw(r.plugin.gbps, bw_w));
      for (const auto& n : names) {
        const Measurement* m = r.baseline(n);
        const Measurement b = m != nullptr ? *m : Measurement{};
        line +=
            fmt::format(" {} {}", cell_bw(b.gbps, 10), cell(ratio(r.plugin.gbps, b.gbps), 8, 2));
      }
      line.append(" ").append(cell(r.plugin.lat_us, us_w, 2));
      for (const auto& n : names) {
        const Measurement* m = r.baseline(n);
        const Measurement b = m != nullptr ? *m : Measurement{};
        line += fmt::format(" {} {}", cell(b.lat_us, 9, 2),
                            cell(ratio(r.plugin.lat_us, b.lat_us), 9, 2));
      }
      line += fmt::format(" {} {} {}", cell(r.plugin.cpu_s_per_gb, 8, 3),
                          cell(r.plugin.csw_per_gb, 7, 0), cell(r.plugin.threads, 7, 0));
      for (const auto& n : names) {
        const Measurement* m = r.baseline(n);
        const Measurement b = m != nullptr ? *m : Measurement{};
        line += fmt::format(" {} {} {}", cell(b.cpu_s_per_gb, 7, 3), cell(b.csw_per_gb, 7, 0),
                            cell(ratio(r.plugin.cpu_s_per_gb, b.cpu_s_per_gb), 7, 2));
      }
      fmt::print("{}\n", line);
    }
  }
  if (summary.mismatches > 0) {
    fmt::print("# DATA VERIFICATION FAILED: {} mismatching messages (see VERIFY lines on stderr)\n",
               summary.mismatches);
  } else if (opt.verify) {
    fmt::print("# data verified: every received byte matched\n");
  }
  std::fflush(stdout);
}

void write_json(const Context& ctx, const RunSummary& summary, const std::vector<Row>& rows,
                const std::string& file) {
  const auto& opt = ctx.opt;
  json j;
  j["tool"] = "nccl-mesh-bench";
  j["version"] = MESH_BENCH_VERSION;
  j["plugin"] = {{"path", ctx.net->path()},
                 {"name", ctx.net->name()},
                 {"ndev", ctx.ndev},
                 {"dev", opt.dev},
                 {"dev_name", ctx.dev_name},
                 {"speed_mbps", ctx.props.speed},
                 {"latency_us", ctx.props.latency},
                 {"max_recvs", ctx.props.maxRecvs}};
  j["nranks"] = ctx.nranks;
  j["hosts"] = summary.hosts;
  j["local_mode"] = ctx.local_mode;
  j["pattern"] = rows.empty() ? opt.pattern_name() : rows.front().pattern;
  j["verify"] = opt.verify;
  j["window"] = opt.window;
  j["iters"] = opt.iters;
  j["warmup"] = opt.warmup;
  j["duration_s"] = opt.duration;
  j["mismatches"] = summary.mismatches;
  j["paths"] = summary.path_lines;
  j["routes"] = summary.routes;
  j["cables"] = summary.cables;
  json out_rows = json::array();
  for (const auto& r : rows) out_rows.push_back(row_to_json(r));
  j["rows"] = out_rows;
  std::ofstream f(file);
  if (!f) throw setup_error("cannot write " + file);
  f << j.dump(2) << "\n";
}

void write_csv(const std::vector<Row>& rows, const std::string& file) {
  std::ofstream f(file);
  if (!f) throw setup_error("cannot write " + file);
  const auto names = baseline_names(rows);
  f << "pattern,src,dst,nranks,bytes,iters,window,plugin_gbps,plugin_lat_us,plugin_algbw,"
       "plugin_time_us";
  for (const auto& n : names) {
    f << "," << n << "_gbps," << n << "_lat_us," << n << "_algbw," << n << "_time_us," << n
      << "_bw_ratio," << n << "_lat_ratio";
  }
  f << ",path\n";
  for (const auto& r : rows) {
    f << r.pattern << "," << r.src << "," << r.dst << "," << r.nranks << "," << r.bytes << ","
      << r.iters << "," << r.window << "," << csv_num(r.plugin.gbps) << ","
      << csv_num(r.plugin.lat_us) << "," << csv_num(r.plugin.algbw) << ","
      << csv_num(r.plugin.time_us);
    for (const auto& n : names) {
      const Measurement* m = r.baseline(n);
      const Measurement b = m != nullptr ? *m : Measurement{};
      f << "," << csv_num(b.gbps) << "," << csv_num(b.lat_us) << "," << csv_num(b.algbw) << ","
        << csv_num(b.time_us) << "," << csv_num(ratio(r.plugin.gbps, b.gbps)) << ","
        << csv_num(ratio(r.plugin.lat_us, b.lat_us));
    }
    f << ",\"" << r.path << "\"\n";
  }
}

bool write_plot(const Context& ctx, const std::vector<Row>& rows, const std::string& file) {
  if (!gnuplot_in_path()) {
    fmt::print(stderr,
               "--plot {}: gnuplot is not installed (Debian: apt-get install gnuplot-nox); "
               "no plot written\n",
               file);
    return false;
  }
  if (rows.empty() || rows.front().pattern == "stream") {
    fmt::print(stderr, "--plot {}: nothing to plot for a --duration run\n", file);
    return false;
  }
  const bool ring = is_ring(rows);
  // One series per (pair, transport); data inline as gnuplot datablocks.
  std::map<std::string, std::string> series;  // title -> "x y\n..."
  std::vector<std::string> order;
  auto add = [&](const std::string& title, uint64_t x, double y) {
    if (std::isnan(y)) return;
    if (series.find(title) == series.end()) order.push_back(title);
    series[title] += fmt::format("{} {:.6g}\n", x, y);
  };
  for (const auto& r : rows) {
    const std::string label = ring ? std::string("all-reduce busbw") : pair_label(r);
    add(label + " plugin", r.bytes, r.plugin.gbps);
    for (const auto& [name, m] : r.baselines) add(label + " " + name, r.bytes, m.gbps);
  }
  std::string script;
  script +=
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 1100,650 "
      "} else { set terminal png size 1100,650 }\n";
  script += "set output " + gp_quote(file) + "\n";
  script += fmt::format("set title {}\n",
                        gp_quote(fmt::format("nccl-mesh-bench: {} over {} ({} ranks)",
                                             ring ? "ring all-reduce" : "point-to-point",
                                             ctx.net->name(), ctx.nranks)));
  script += "set logscale x 2\nset format x '%.0b %BB'\nset xlabel 'message size (bytes)'\n";
  script += fmt::format("set ylabel {}\n", gp_quote(ring ? "busbw GB/s" : "GB/s (1e9 B/s)"));
  script += "set grid\nset key left top\nset yrange [0:*]\n";
  for (size_t i = 0; i < order.size(); ++i) {
    script += fmt::format("$d{} << EOD\n{}EOD\n", i, series[order[i]]);
  }
  script += "plot ";
  for (size_t i = 0; i < order.size(); ++i) {
    const bool plugin =
        order[i].size() >= 6 && order[i].compare(order[i].size() - 6, 6, "plugin") == 0;
    script += fmt::format("{}$d{} using 1:2 with linespoints dt {} title {}", i == 0 ? "" : ", ", i,
                          plugin ? 1 : 2, gp_quote(order[i]));
  }
  script += "\n";
  FILE* gp = popen("gnuplot", "w");
  if (gp == nullptr) {
    fmt::print(stderr, "--plot {}: cannot start gnuplot\n", file);
    return false;
  }
  std::fwrite(script.data(), 1, script.size(), gp);
  const int status = pclose(gp);
  if (status != 0) {
    fmt::print(stderr, "--plot {}: gnuplot failed (status {})\n", file, status);
    return false;
  }
  return true;
}

}  // namespace mesh::bench
