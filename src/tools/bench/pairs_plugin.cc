// SPDX-License-Identifier: Apache-2.0
// The pairs pattern over the plugin: windowed bandwidth, bidirectional bandwidth, ping-pong.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <optional>

#include "metrics.h"
#include "pairs.h"
#include "plugin_ops.h"
#include "wait.h"

namespace mesh::bench {
namespace {

class PluginPairTransport final : public PairTransport {
 public:
  explicit PluginPairTransport(Context& ctx) : ctx_(ctx) {}
  const char* name() const override { return "plugin"; }
  bool available(int /*peer*/) const override { return true; }

  PairResult run(const PairJob& job) override {
    const bool is_src = ctx_.rank == job.src;
    const int peer = is_src ? job.dst : job.src;
    PairResult r;
    if (job.bidir) {
      r.gbps = bidir(job, peer);
    } else if (is_src) {
      r.gbps = send_side(job, peer);
    } else {
      recv_side(job, peer);
    }
    if (job.latency) {
      if (is_src) {
        r.lat_us = ping(job, peer);
      } else {
        pong(job, peer);
      }
    }
    if (!is_src) r = PairResult{};
    return r;
  }

 private:
  uint32_t stream(Phase phase, const PairJob& job, int receiver) const {
    return stream_id(Transport::kPlugin, phase, job.size_index, static_cast<unsigned>(receiver));
  }

  // The receiver's acknowledgement carries the message count; anything else is a mismatch.
  void check_ack(const PairJob& job, int peer, uint64_t expected, uint32_t strm) {
    uint64_t got = 0;
    std::memcpy(&got, job.ctrl_recv, 8);
    if (got != expected) {
      ctx_.report_failure(
          fmt::format("plugin acknowledgement from rank {} (stream 0x{:08x}) says {} "
                      "messages, expected {}",
                      peer, strm, got, expected));
    }
  }

  // Sender: clock from the first post to the receiver's acknowledgement of the last message.
  double send_side(const PairJob& job, int peer) {
    double seconds = 0;
    for (const Phase phase : {Phase::kWarmup, Phase::kTimed}) {
      const uint64_t n =
          static_cast<uint64_t>(phase == Phase::kWarmup ? job.plan.warmup : job.plan.iters);
      if (n == 0) continue;
      const uint32_t strm = stream(phase, job, peer);
      SingleOp ack(ctx_, SingleOp::kRecv, peer, job.arena->recv_mh(peer), job.ctrl_recv, 8);
      SendStream s(ctx_, peer, job.arena->send_mh(peer), job.send_slots, job.bytes, job.window, n,
                   strm);
      Waiter w(ctx_.opt.timeout, peer,
               [&] { return s.done() ? "the acknowledgement: " + ack.state() : s.state(); });
      const auto t0 = Clock::now();
      while (!(s.done() && ack.done())) {
        bool moved = ack.poll();
        moved = s.poll() || moved;
        moved ? w.progressed() : w.idle();
      }
      if (phase == Phase::kTimed) seconds = since(t0);
      check_ack(job, peer, n, strm);
    }
    return gbps(job.bytes * static_cast<uint64_t>(job.plan.iters), seconds);
  }

  void recv_side(const PairJob& job, int peer) {
    for (const Phase phase : {Phase::kWarmup, Phase::kTimed}) {
      const uint64_t n =
          static_cast<uint64_t>(phase == Phase::kWarmup ? job.plan.warmup : job.plan.iters);
      if (n == 0) continue;
      RecvStream r(ctx_, peer, job.arena->recv_mh(peer), job.recv_slots, job.bytes, job.window, n,
                   stream(phase, job, ctx_.rank));
      Waiter w(ctx_.opt.timeout, peer, [&] { return r.state(); });
      while (!r.done()) r.poll() ? w.progressed() : w.idle();
      std::memcpy(job.ctrl_send, &n, 8);
      SingleOp ack(ctx_, SingleOp::kSend, peer, job.arena->send_mh(peer), job.ctrl_send, 8);
      Waiter wa(ctx_.opt.timeout, peer,
                [&] { return "sending the acknowledgement: " + ack.state(); });
      while (!ack.done()) ack.poll() ? wa.progressed() : wa.idle();
    }
  }

  // Both ranks send and receive at once; each acknowledges once it has everything. The clock
  // (on both ranks) stops when all own sends, receives and the peer's acknowledgement are done.
  // Data and acknowledgement share one connection per direction and the plugin matches in
  // posting order, so the acknowledgement's send and receive are posted only after all data.
  double bidir(const PairJob& job, int peer) {
    double seconds = 0;
    for (const Phase phase : {Phase::kWarmup, Phase::kTimed}) {
      const uint64_t n =
          static_cast<uint64_t>(phase == Phase::kWarmup ? job.plan.warmup : job.plan.iters);
      if (n == 0) continue;
      std::optional<SingleOp> ack_in;
      std::optional<SingleOp> ack_out;
      SendStream s(ctx_, peer, job.arena->send_mh(peer), job.send_slots, job.bytes, job.window, n,
                   stream(phase, job, peer));
      RecvStream r(ctx_, peer, job.arena->recv_mh(peer), job.recv_slots, job.bytes, job.window, n,
                   stream(phase, job, ctx_.rank));
      Waiter w(ctx_.opt.timeout, peer, [&] {
        if (!s.done()) return s.state();
        if (!r.done()) return r.state();
        if (ack_out && !ack_out->done()) return "sending the acknowledgement: " + ack_out->state();
        return "the acknowledgement: " + (ack_in ? ack_in->state() : std::string("not posted"));
      });
      const auto t0 = Clock::now();
      for (;;) {
        bool moved = s.poll();
        moved = r.poll() || moved;
        // The acknowledgement follows this rank's own data on the same send comm: post it only
        // once every data send is done, since the plugin may answer "retry later" to isend.
        if (r.done() && s.done() && !ack_out) {
          std::memcpy(job.ctrl_send, &n, 8);
          ack_out.emplace(ctx_, SingleOp::kSend, peer, job.arena->send_mh(peer), job.ctrl_send, 8);
          ack_in.emplace(ctx_, SingleOp::kRecv, peer, job.arena->recv_mh(peer), job.ctrl_recv, 8);
          moved = true;
        }
        if (ack_in) moved = ack_in->poll() || moved;
        if (ack_out) moved = ack_out->poll() || moved;
        if (s.done() && r.done() && ack_out->done() && ack_in->done()) break;
        moved ? w.progressed() : w.idle();
      }
      if (phase == Phase::kTimed) seconds = since(t0);
      check_ack(job, peer, n, stream(phase, job, peer));
    }
    return gbps(2 * job.bytes * static_cast<uint64_t>(job.plan.iters), seconds);
  }

  // Initiator: each round trip is timed on its own so filling and checking the data stay out
  // of the latency.
  double ping(const PairJob& job, int peer) {
    const int warm = job.plan.warmup;
    const int total = warm + job.plan.iters;
    const uint32_t ping_stream = stream(Phase::kPing, job, peer);
    const uint32_t pong_stream = stream(Phase::kPong, job, ctx_.rank);
    double timed = 0;
    for (int i = 0; i < total; ++i) {
      if (ctx_.opt.verify) {
        fill_pattern(job.send_slots, job.bytes, ctx_.rank, message_index(ping_stream, i));
      }
      SingleOp rx(ctx_, SingleOp::kRecv, peer, job.arena->recv_mh(peer), job.recv_slots, job.bytes);
      rx.poll();  // the reply's receive is posted before the ping leaves
      SingleOp tx(ctx_, SingleOp::kSend, peer, job.arena->send_mh(peer), job.send_slots, job.bytes);
      Waiter w(ctx_.opt.timeout, peer, [&, i] {
        return fmt::format("ping-pong round {}: {}", i, tx.done() ? rx.state() : tx.state());
      });
      const auto t0 = Clock::now();
      while (!(tx.done() && rx.done())) {
        bool moved = tx.poll();
        moved = rx.poll() || moved;
        moved ? w.progressed() : w.idle();
      }
      const double dt = since(t0);
      if (i >= warm) timed += dt;
      if (ctx_.opt.verify) {
        ctx_.verify_message("plugin", job.recv_slots, static_cast<size_t>(rx.size()), job.bytes,
                            peer, message_index(pong_stream, i));
      }
    }
    return half_rtt_us(timed, job.plan.iters);
  }

  // Responder: the next ping's receive is posted before the reply goes out, and the ping is
  // checked while the reply is in flight. Pings alternate between two receive buffers.
  void pong(const PairJob& job, int peer) {
    const int total = job.plan.warmup + job.plan.iters;
    const uint32_t ping_stream = stream(Phase::kPing, job, ctx_.rank);
    const uint32_t pong_stream = stream(Phase::kPong, job, peer);
    auto slot = [&](int i) { return job.recv_slots + static_cast<size_t>(i % 2) * job.bytes; };
    if (ctx_.opt.verify) {
      fill_pattern(job.send_slots, job.bytes, ctx_.rank, message_index(pong_stream, 0));
    }
    std::optional<SingleOp> rx;
    rx.emplace(ctx_, SingleOp::kRecv, peer, job.arena->recv_mh(peer), slot(0), job.bytes);
    rx->poll();
    for (int i = 0; i < total; ++i) {
      Waiter w(ctx_.opt.timeout, peer,
               [&, i] { return fmt::format("ping {}: {}", i, rx->state()); });
      while (!rx->done()) rx->poll() ? w.progressed() : w.idle();
      const int got = rx->size();
      SingleOp tx(ctx_, SingleOp::kSend, peer, job.arena->send_mh(peer), job.send_slots, job.bytes);
      tx.poll();
      if (i + 1 < total) {
        rx.emplace(ctx_, SingleOp::kRecv, peer, job.arena->recv_mh(peer), slot(i + 1), job.bytes);
        rx->poll();
      }
      if (ctx_.opt.verify) {
        ctx_.verify_message("plugin", slot(i), static_cast<size_t>(got), job.bytes, peer,
                            message_index(ping_stream, static_cast<uint64_t>(i)));
      }
      Waiter wt(ctx_.opt.timeout, peer,
                [&, i] { return fmt::format("pong {}: {}", i, tx.state()); });
      while (!tx.done()) {
        bool moved = tx.poll();
        if (i + 1 < total) moved = rx->poll() || moved;
        moved ? wt.progressed() : wt.idle();
      }
      if (ctx_.opt.verify && i + 1 < total) {
        fill_pattern(job.send_slots, job.bytes, ctx_.rank,
                     message_index(pong_stream, static_cast<uint64_t>(i + 1)));
      }
    }
  }

  Context& ctx_;
};

}  // namespace

std::unique_ptr<PairTransport> make_plugin_pair_transport(Context& ctx) {
  return std::make_unique<PluginPairTransport>(ctx);
}

}  // namespace mesh::bench
