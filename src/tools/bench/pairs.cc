#include "pairs.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "metrics.h"
#include "wait.h"

namespace mesh::bench {
namespace {

constexpr uint64_t kPage = 4096;

uint64_t round_up(uint64_t v, uint64_t to) {
  return (v + to - 1) / to * to;
}

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
  region = round_up(region, kPage);
  Arena arena(ctx, 2 * region + kPage);
  uint8_t* send_slots = arena.data();
  uint8_t* recv_slots = arena.data() + region;
  uint8_t* ctrl = arena.data() + 2 * region;

  std::vector<std::unique_ptr<PairTransport>> transports;
  transports.push_back(make_plugin_pair_transport(ctx));
  if (opt.tcp_baseline) transports.push_back(make_tcp_pair_transport(ctx));

  std::vector<Row> rows;
  ctx.rdv->barrier();
  mark_traffic_start();
  for (const auto& pair : pair_order(ctx.nranks, opt.bidir)) {
    const bool involved = ctx.rank == pair.src || ctx.rank == pair.dst;
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
        row.pattern = opt.bidir ? "pairs-bidir" : "pairs";
        row.src = pair.src;
        row.dst = pair.dst;
        row.nranks = ctx.nranks;
        row.bytes = job.bytes;
        row.iters = job.plan.iters;
        row.window = job.window;
        const auto& l = ctx.link(peer);
        row.path = l.tcp ? fmt::format("{} {} -> {}", l.tcp_ifname, l.tcp_local, l.tcp_remote)
                         : std::string("-");
        for (auto& t : transports) {
          PairResult r;
          if (t->available(peer)) r = t->run(job);
          Measurement m;
          m.gbps = r.gbps;
          m.lat_us = r.lat_us;
          if (std::string(t->name()) == "plugin") {
            row.plugin = m;
          } else {
            row.baselines.emplace_back(t->name(), m);
          }
        }
        if (ctx.rank == pair.src) {
          const double secs =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (secs >= 0.5 || job.bytes >= (1u << 20)) {
            const Measurement* tcp = row.baseline("tcp");
            ctx.progress(fmt::format(
                "  {}{}{} {:>9}: plugin {}, tcp {} ({:.1f} s)", pair.src, opt.bidir ? "<->" : "->",
                pair.dst, format_size(job.bytes), fmt_gbps(row.plugin.gbps),
                fmt_gbps(tcp != nullptr ? tcp->gbps : Measurement::kUnset), secs));
          }
          rows.push_back(std::move(row));
        }
      }
    }
    // The other ranks wait here while this pair runs.
    ctx.rdv->barrier();
  }
  arena.release();
  return rows;
}

}  // namespace mesh::bench
