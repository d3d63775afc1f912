// SPDX-License-Identifier: Apache-2.0
#include "pairs.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "gin_put.h"
#include "metrics.h"
#include "proc_usage.h"
#include "wait.h"

namespace mesh::bench {
namespace {

struct PairOrder {
  int src;
  int dst;
};

// Grouped by unordered pair, so i->j and j->i run back to back on the same connections.
std::vector<PairOrder> pair_order(int nranks, bool bidir) {
  std::vector<PairOrder> out;
  for (int a = 0; a < nranks; ++a) {
    for (int b = a + 1; b < nranks; ++b) {
      out.push_back({a, b});
      if (!bidir) out.push_back({b, a});
    }
  }
  return out;
}

// What one rank spent on one transport's run of one size of the current pair.
struct UsageRecord {
  unsigned size_index = 0;
  size_t transport = 0;
  double cpu_s = 0;
  uint64_t switches = 0;
  int threads = 0;
};

nlohmann::json usage_to_json(const std::vector<UsageRecord>& records) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& u : records) {
    out.push_back({u.size_index, u.transport, u.cpu_s, u.switches, u.threads});
  }
  return out;
}

// Rank 0..n-1's records of this pair; the uninvolved ranks send an empty list.
std::vector<UsageRecord> usage_from_json(const std::string& blob) {
  std::vector<UsageRecord> out;
  if (blob.empty()) return out;
  for (const auto& e : nlohmann::json::parse(blob)) {
    out.push_back({e.at(0).get<unsigned>(), e.at(1).get<size_t>(), e.at(2).get<double>(),
                   e.at(3).get<uint64_t>(), e.at(4).get<int>()});
  }
  return out;
}

std::string fmt_gbps(double v) {
  return std::isnan(v) ? "-" : fmt::format("{:.2f} GB/s", v);
}

}  // namespace

std::vector<Row> run_pairs(Context& ctx) {
  const auto& opt = ctx.opt;
  // One direction's buffers: the largest window * size any size needs, and two messages for
  // the ping-pong (it alternates receive buffers).
  uint64_t region = 0;
  for (uint64_t s : opt.sizes) {
    region =
        std::max(region, static_cast<uint64_t>(plan_window(s, opt.window, opt.buffer_bytes)) * s);
    if (s <= opt.latency_max_bytes) region = std::max(region, 2 * s);
  }
  region = whole_pages(region);
  Arena arena(ctx, 2 * region + kPage);
  uint8_t* send_slots = arena.data();
  uint8_t* recv_slots = arena.data() + region;
  uint8_t* ctrl = arena.data() + 2 * region;

  // The first transport is the measured one (row.plugin), the others are the baselines; with
  // a GIN pattern the plugin's net path becomes the "net" reference beside TCP.
  const bool gin = is_gin_pattern(opt.pattern);
  std::vector<std::unique_ptr<PairTransport>> transports;
  std::vector<std::string> labels;
  if (gin) {
    transports.push_back(make_gin_pair_transport(ctx, opt.pattern == Pattern::kGinPutSignal));
    labels.push_back("plugin");
  }
  transports.push_back(make_plugin_pair_transport(ctx));
  labels.push_back(gin ? "net" : "plugin");
  if (opt.tcp_baseline) {
    transports.push_back(make_tcp_pair_transport(ctx));
    labels.push_back("tcp");
  }

  std::vector<Row> rows;
  ctx.rdv->barrier();
  mark_traffic_start();
  for (const auto& pair : pair_order(ctx.nranks, opt.bidir)) {
    const bool involved = ctx.rank == pair.src || ctx.rank == pair.dst;
    std::vector<UsageRecord> usage;  // this rank's, for this pair
    const size_t first_row = rows.size();
    if (involved) {
      const int peer = ctx.rank == pair.src ? pair.dst : pair.src;
      if (ctx.rank == pair.src) {
        ctx.progress(fmt::format("pair {}{}{}: {} sizes", pair.src, opt.bidir ? "<->" : "->",
                                 pair.dst, opt.sizes.size()));
      }
      for (size_t si = 0; si < opt.sizes.size(); ++si) {
        const auto t0 = std::chrono::steady_clock::now();
        PairJob job;
        job.src = pair.src;
        job.dst = pair.dst;
        job.bidir = opt.bidir;
        job.bytes = opt.sizes[si];
        job.size_index = static_cast<unsigned>(si);
        job.plan = plan_iterations(job.bytes, opt.iters, opt.warmup, opt.iter_bytes);
        job.window = plan_window(job.bytes, opt.window, opt.buffer_bytes);
        job.latency = job.bytes <= opt.latency_max_bytes;
        job.send_slots = send_slots;
        job.recv_slots = recv_slots;
        job.ctrl_send = ctrl;
        job.ctrl_recv = ctrl + 64;
        job.arena = &arena;

        Row row;
        row.pattern = gin ? opt.pattern_name() : opt.bidir ? "pairs-bidir" : "pairs";
        row.src = pair.src;
        row.dst = pair.dst;
        row.nranks = ctx.nranks;
        row.bytes = job.bytes;
        row.iters = job.plan.iters;
        row.window = job.window;
        const auto& l = ctx.link(peer);
        row.path = l.tcp ? fmt::format("{} {} -> {}", l.tcp_ifname, l.tcp_local, l.tcp_remote)
                         : std::string("-");
        for (size_t ti = 0; ti < transports.size(); ++ti) {
          auto& t = transports[ti];
          PairResult r;
          if (t->available(peer)) {
            const ProcUsage before = sample_usage();
            r = t->run(job);
            const ProcUsage after = sample_usage();
            usage.push_back({job.size_index, ti, after.cpu_s - before.cpu_s,
                             (after.voluntary_switches - before.voluntary_switches) +
                                 (after.involuntary_switches - before.involuntary_switches),
                             count_threads()});
          }
          Measurement m;
          m.gbps = r.gbps;
          m.lat_us = r.lat_us;
          if (labels[ti] == "plugin") {
            row.plugin = m;
          } else {
            row.baselines.emplace_back(labels[ti], m);
          }
        }
        if (ctx.rank == pair.src) {
          const double secs =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (secs >= 0.5 || job.bytes >= (1u << 20)) {
            const Measurement* tcp = row.baseline("tcp");
            ctx.progress(fmt::format("  {}{}{} {:>9}: {} {}, tcp {} ({:.1f} s)", pair.src,
                                     opt.bidir ? "<->" : "->", pair.dst, format_size(job.bytes),
                                     gin ? opt.pattern_name() : "plugin", fmt_gbps(row.plugin.gbps),
                                     fmt_gbps(tcp != nullptr ? tcp->gbps : Measurement::kUnset),
                                     secs));
          }
          rows.push_back(std::move(row));
        }
      }
    }
    // The other ranks wait here while this pair runs; the pair's two ranks bring their CPU
    // samples, which the sender adds up into its rows (both ends pay for every byte).
    const auto all = ctx.rdv->allgather(involved ? usage_to_json(usage).dump() : std::string());
    if (ctx.rank == pair.src) {
      for (size_t ri = first_row; ri < rows.size(); ++ri) {
        Row& row = rows[ri];
        const unsigned si = static_cast<unsigned>(ri - first_row);
        const uint64_t payload = pair_payload_bytes(
            row.bytes, row.iters,
            plan_iterations(row.bytes, opt.iters, opt.warmup, opt.iter_bytes).warmup, opt.bidir,
            row.bytes <= opt.latency_max_bytes);
        for (size_t ti = 0; ti < transports.size(); ++ti) {
          double cpu = 0;
          uint64_t switches = 0;
          int threads = 0;
          int samples = 0;
          for (const int rk : {pair.src, pair.dst}) {
            for (const auto& u : usage_from_json(all[static_cast<size_t>(rk)])) {
              if (u.size_index != si || u.transport != ti) continue;
              cpu += u.cpu_s;
              switches += u.switches;
              threads = std::max(threads, u.threads);
              ++samples;
            }
          }
          if (samples != 2) continue;  // transport not available for this peer
          Measurement* m = nullptr;
          if (labels[ti] == "plugin") m = &row.plugin;
          for (auto& [name, b] : row.baselines) {
            if (name == labels[ti]) m = &b;
          }
          if (m == nullptr) continue;
          m->cpu_s_per_gb = per_gb(cpu, payload);
          m->csw_per_gb = per_gb(static_cast<double>(switches), payload);
          m->threads = threads;
        }
      }
    }
  }
  for (auto& t : transports) t->finish();
  arena.release();
  return rows;
}

}  // namespace mesh::bench
