// SPDX-License-Identifier: Apache-2.0
#include "stream.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <limits>

#include "metrics.h"
#include "plugin_ops.h"
#include "sizes.h"
#include "wait.h"

namespace mesh::bench {
namespace {

constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();

double secs(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

struct PeerStream {
  int peer = -1;
  uint8_t* send_slots = nullptr;
  uint8_t* recv_slots = nullptr;
  uint32_t out_stream = 0;
  uint32_t in_stream = 0;

  // Sending side.
  uint64_t s_posted = 0, s_done = 0, s_filled = 0;
  uint64_t s_end = kNone;  // index of the first zero-byte end marker
  void* s_req[kMaxWindow] = {};
  Clock::time_point s_last;

  // Receiving side.
  uint64_t r_posted = 0, r_done = 0;
  uint64_t r_end = kNone;    // index where the end markers started
  uint64_t r_limit = kNone;  // receives to post in total, known once r_end is
  void* r_req[kMaxWindow] = {};
  Clock::time_point r_last;
  uint64_t r_bytes = 0;
  uint64_t r_msgs = 0;
  Clock::time_point r_last_data;
  uint64_t r_bytes_reported = 0;

  bool send_finished(uint64_t window) const { return s_end != kNone && s_done == s_end + window; }
  bool recv_finished() const { return r_limit != kNone && r_done == r_limit; }
};

}  // namespace

std::vector<Row> run_stream(Context& ctx) {
  const auto& opt = ctx.opt;
  const uint64_t size = opt.sizes.front();
  const int npeers = ctx.nranks - 1;
  const int window =
      plan_window(size, opt.window, opt.buffer_bytes / static_cast<uint64_t>(npeers));
  const uint64_t w = static_cast<uint64_t>(window);
  const uint64_t region = whole_pages(w * size);
  Arena arena(ctx, 2 * region * static_cast<uint64_t>(npeers));

  std::vector<PeerStream> peers;
  for (int p = 0, k = 0; p < ctx.nranks; ++p) {
    if (p == ctx.rank) continue;
    PeerStream ps;
    ps.peer = p;
    ps.send_slots = arena.data() + static_cast<uint64_t>(2 * k) * region;
    ps.recv_slots = arena.data() + static_cast<uint64_t>(2 * k + 1) * region;
    ps.out_stream = stream_id(Transport::kPlugin, Phase::kStream, 0, static_cast<unsigned>(p));
    ps.in_stream =
        stream_id(Transport::kPlugin, Phase::kStream, 0, static_cast<unsigned>(ctx.rank));
    peers.push_back(ps);
    ++k;
  }

  ctx.rdv->barrier();
  if (ctx.rank == 0) {
    ctx.progress(fmt::format("streaming {} messages to and from every rank for {} s (window {})",
                             format_size(size), opt.duration, window));
  }
  mark_traffic_start();
  const auto start = Clock::now();
  const auto stop = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(opt.duration));
  const auto timeout =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt.timeout));
  for (auto& ps : peers) ps.s_last = ps.r_last = ps.r_last_data = start;
  auto next_report = start + std::chrono::seconds(5);
  auto last_report = start;
  Waiter idle(opt.timeout * 4 + 1, -1, [] { return std::string("stream"); });  // yields + peers
  // This mode exists to watch the plugin report faults: a killed peer must surface as a plugin
  // error (exit 3), not be pre-empted by the rendezvous noticing the closed socket first (exit 5).
  // The per-peer --timeout deadlines below still bound every wait.
  const PeerWatchPause pause;
  // A failure closes every comm here, while the buffers its requests point into are still
  // mapped (the arena unmaps as the exception leaves this function): NCCL's abort also closes
  // before it frees. main() prints the failure line after the CLOSE line.
  struct CloseOnFailure {
    Context& ctx;
    int in_flight = std::uncaught_exceptions();
    ~CloseOnFailure() {
      if (std::uncaught_exceptions() <= in_flight) return;
      try {
        close_and_report(ctx, true);
      } catch (...) {  // NOLINT(bugprone-empty-catch): the original failure is what matters
      }
    }
  } close_on_failure{ctx};

  for (;;) {
    bool all_done = true;
    bool moved_any = false;
    const auto now = Clock::now();
    for (auto& ps : peers) {
      auto& link = ctx.link(ps.peer);
      // --- send side ---
      if (ps.s_end == kNone && now >= stop) ps.s_end = ps.s_posted;
      const uint64_t s_total = ps.s_end == kNone ? kNone : ps.s_end + w;
      while (ps.s_posted < s_total && ps.s_posted - ps.s_done < w) {
        const bool data = ps.s_end == kNone || ps.s_posted < ps.s_end;
        uint8_t* slot = ps.send_slots + (ps.s_posted % w) * size;
        if (data && opt.verify && ps.s_filled == ps.s_posted) {
          fill_pattern(slot, size, ctx.rank, message_index(ps.out_stream, ps.s_posted));
          ps.s_filled = ps.s_posted + 1;
        }
        void* req = ctx.net->isend(link.send_comm, slot, data ? size : 0, ctx.rank,
                                   arena.send_mh(ps.peer), ps.peer);
        if (req == nullptr) break;
        ps.s_req[ps.s_posted % w] = req;
        ++ps.s_posted;
        ps.s_last = now;
        moved_any = true;
        if (ps.s_end == kNone && Clock::now() >= stop) break;
      }
      while (ps.s_done < ps.s_posted) {
        int got = 0;
        if (!ctx.net->test(ps.s_req[ps.s_done % w], &got, ps.peer)) break;
        ++ps.s_done;
        ps.s_last = now;
        moved_any = true;
      }
      // --- receive side ---
      while (ps.r_posted < ps.r_limit && ps.r_posted - ps.r_done < w) {
        uint8_t* slot = ps.recv_slots + (ps.r_posted % w) * size;
        void* req =
            ctx.net->irecv(link.recv_comm, slot, size, ps.peer, arena.recv_mh(ps.peer), ps.peer);
        if (req == nullptr) break;
        ps.r_req[ps.r_posted % w] = req;
        ++ps.r_posted;
        moved_any = true;
      }
      while (ps.r_done < ps.r_posted) {
        int got = 0;
        if (!ctx.net->test(ps.r_req[ps.r_done % w], &got, ps.peer)) break;
        const uint8_t* slot = ps.recv_slots + (ps.r_done % w) * size;
        if (got == 0) {
          if (ps.r_end == kNone) {
            ps.r_end = ps.r_done;
            ps.r_limit = ps.r_end + w;
          }
        } else if (ps.r_end != kNone) {
          // Data after the end marker: the stream is out of order.
          ctx.report_failure(
              fmt::format("plugin stream from rank {}: message {} has {} bytes "
                          "after the end marker at message {}",
                          ps.peer, ps.r_done, got, ps.r_end));
        } else {
          if (opt.verify) {
            ctx.verify_message("plugin", slot, static_cast<size_t>(got), size, ps.peer,
                               message_index(ps.in_stream, ps.r_done));
          } else if (static_cast<uint64_t>(got) != size) {
            ctx.report_mismatch("plugin", ps.peer, message_index(ps.in_stream, ps.r_done), size,
                                static_cast<size_t>(got), std::nullopt);
          }
          ps.r_bytes += static_cast<uint64_t>(got);
          ++ps.r_msgs;
          ps.r_last_data = now;
        }
        ++ps.r_done;
        ps.r_last = now;
        moved_any = true;
      }
      // --- stall detection, per peer and direction ---
      const bool s_fin = ps.send_finished(w);
      const bool r_fin = ps.recv_finished();
      if (!s_fin && now - ps.s_last > timeout) {
        throw timeout_error(ps.peer, secs(now - ps.s_last),
                            fmt::format("send completions to rank {}: {} of {} posted messages "
                                        "done",
                                        ps.peer, ps.s_done, ps.s_posted));
      }
      if (!r_fin && now - ps.r_last > timeout) {
        throw timeout_error(ps.peer, secs(now - ps.r_last),
                            fmt::format("messages from rank {}: {} received, {} receives posted",
                                        ps.peer, ps.r_done, ps.r_posted - ps.r_done));
      }
      all_done = all_done && s_fin && r_fin;
    }
    if (all_done) break;
    if (now >= next_report) {
      std::string line = fmt::format("t={:.0f}s", secs(now - start));
      for (auto& ps : peers) {
        line += fmt::format("  from {}: {:.2f} GB/s", ps.peer,
                            gbps(ps.r_bytes - ps.r_bytes_reported, secs(now - last_report)));
        ps.r_bytes_reported = ps.r_bytes;
      }
      ctx.progress(line);
      last_report = now;
      next_report = now + std::chrono::seconds(5);
    }
    moved_any ? idle.progressed() : idle.idle();
  }

  std::vector<Row> rows;
  for (const auto& ps : peers) {
    Row row;
    row.pattern = "stream";
    row.src = ps.peer;
    row.dst = ctx.rank;
    row.nranks = ctx.nranks;
    row.bytes = size;
    row.iters = static_cast<int>(std::min<uint64_t>(ps.r_msgs, INT32_MAX));
    row.window = window;
    row.plugin.gbps = gbps(ps.r_bytes, secs(ps.r_last_data - start));
    rows.push_back(row);
  }
  arena.release();
  return rows;
}

}  // namespace mesh::bench
