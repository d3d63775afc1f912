// SPDX-License-Identifier: Apache-2.0
#include "ring.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "metrics.h"
#include "plugin_ops.h"
#include "sizes.h"
#include "tcp_baseline.h"
#include "wait.h"

namespace mesh::bench {
namespace {

struct RingBuffers {
  float* send = nullptr;  // input
  float* recv = nullptr;  // output
  float* tmp = nullptr;   // incoming reduce-scatter data
  size_t tmp_bytes = 0;
  // --recv-capacity: every plugin receive lands in a slot of its own, slot_bytes large (the
  // plugin may write anywhere in the buffer it is given, as in NCCL's step slots), and is
  // added or copied from there into place, as NCCL's kernel reads its slots. Null: receives land
  // in place, on buffers of the slice's size.
  uint8_t* slots = nullptr;
  size_t slot_bytes = 0;
  float* slot(size_t i) const { return reinterpret_cast<float*>(slots + i * slot_bytes); }
};

// Elements [begin, end) of chunk c when `count` elements are split over n ranks.
size_t chunk_begin(size_t count, int n, int c) {
  return count * static_cast<size_t>(c) / static_cast<size_t>(n);
}

// The ring's neighbours of this rank.
int ring_next(const Context& ctx) {
  return (ctx.rank + 1) % ctx.nranks;
}
int ring_prev(const Context& ctx) {
  return (ctx.rank + ctx.nranks - 1) % ctx.nranks;
}

// The slice a chunk (or a channel's part of one) of `floats` elements is cut into over the
// plugin: --slice-bytes, or with `--slice-bytes nccl` NCCL's slice for that chunk (two per
// chunk). Both ends of a step cut the same chunk, so they agree on every slice.
size_t slice_for(const Options& opt, size_t floats) {
  return opt.nccl_slices ? nccl_slice_floats(floats) : static_cast<size_t>(opt.slice_bytes / 4);
}

void add_into(float* dst, const float* src, size_t count) {
  for (size_t i = 0; i < count; ++i) dst[i] += src[i];
}

// Where a ring step's incoming chunk goes: added into the destination (reduce-scatter), into
// the destination as is (all-gather), or into tmp and dropped (ring-traffic's reduce-scatter:
// the same bytes on the wire, no arithmetic).
enum class Landing { kReduce, kInPlace, kDrop };

// How one ring step moves a chunk: implemented over the plugin and over TCP.
class RingTransport {
 public:
  virtual ~RingTransport() = default;
  virtual const char* name() const = 0;
  // Sends `send_count` floats to the next rank, receives `recv_count` from the previous one
  // into `dst` as `landing` says.
  virtual void step(const float* send, size_t send_count, float* dst, size_t recv_count,
                    Landing landing) = 0;
};

class PluginRing final : public RingTransport {
 public:
  PluginRing(Context& ctx, const Arena& arena, const RingBuffers& buf)
      : ctx_(ctx), arena_(arena), buf_(buf) {
    next_ = ring_next(ctx);
    prev_ = ring_prev(ctx);
    slice_floats_ = static_cast<size_t>(ctx.opt.slice_bytes / 4);
    window_ = std::max(
        1, std::min(ctx.opt.window, static_cast<int>(buf.tmp_bytes / (slice_floats_ * 4))));
  }
  const char* name() const override { return "plugin"; }

  void step(const float* send, size_t send_count, float* dst, size_t recv_count,
            Landing landing) override {
    const bool reduce = landing == Landing::kReduce;
    const bool to_tmp = landing != Landing::kInPlace;
    // Slices of this step's chunks (at most slice_floats_, the stride of tmp's slots).
    const size_t s_slice = slice_for(ctx_.opt, send_count);
    const size_t r_slice = slice_for(ctx_.opt, recv_count);
    const size_t n_send = piece_count(send_count, s_slice);
    const size_t n_recv = piece_count(recv_count, r_slice);
    size_t s_posted = 0, s_done = 0, r_posted = 0, r_done = 0;
    void* s_req[kMaxWindow] = {};
    void* r_req[kMaxWindow] = {};
    auto s_len = [&](size_t k) { return piece_length(send_count, s_slice, k); };
    auto r_len = [&](size_t k) { return piece_length(recv_count, r_slice, k); };
    // Reduce-scatter slices land in tmp (one slot per window entry) and are added into dst
    // (ring-traffic: dropped); all-gather slices land in place.
    auto recv_ptr = [&](size_t k) {
      if (buf_.slots != nullptr) return buf_.slot(k % static_cast<size_t>(window_));
      return to_tmp ? buf_.tmp + (k % static_cast<size_t>(window_)) * slice_floats_
                    : dst + k * r_slice;
    };
    const auto posted_bytes = [&](size_t floats) {
      return buf_.slots != nullptr ? buf_.slot_bytes : floats * 4;
    };
    const size_t w = static_cast<size_t>(window_);
    Waiter waiter(ctx_.opt.timeout, prev_, [&] {
      return fmt::format(
          "ring step: sent {} of {} slices to rank {}, received {} of {} from "
          "rank {}",
          s_done, n_send, next_, r_done, n_recv, prev_);
    });
    void* send_mh = arena_.send_mh(next_);
    void* recv_mh = arena_.recv_mh(prev_);
    auto& out = ctx_.link(next_);
    auto& in = ctx_.link(prev_);
    while (s_done < n_send || r_done < n_recv) {
      bool moved = false;
      while (r_posted < n_recv && r_posted - r_done < w) {
        void* req = ctx_.net->irecv(in.recv_comm, recv_ptr(r_posted), posted_bytes(r_len(r_posted)),
                                    prev_, recv_mh, prev_);
        if (req == nullptr) break;
        r_req[r_posted % w] = req;
        ++r_posted;
        moved = true;
      }
      while (s_posted < n_send && s_posted - s_done < w) {
        void* req = ctx_.net->isend(out.send_comm, const_cast<float*>(send + s_posted * s_slice),
                                    s_len(s_posted) * 4, ctx_.rank, send_mh, next_);
        if (req == nullptr) break;
        s_req[s_posted % w] = req;
        ++s_posted;
        moved = true;
      }
      while (s_done < s_posted) {
        int size = 0;
        if (!ctx_.net->test(s_req[s_done % w], &size, next_)) break;
        ++s_done;
        moved = true;
      }
      while (r_done < r_posted) {
        int size = 0;
        if (!ctx_.net->test(r_req[r_done % w], &size, prev_)) break;
        const size_t want = r_len(r_done);
        if (static_cast<size_t>(size) != want * 4) {
          ctx_.report_failure(
              fmt::format("plugin ring step: slice {} from rank {} has {} bytes, "
                          "expected {}",
                          r_done, prev_, size, want * 4));
        }
        if (reduce) {
          add_into(dst + r_done * r_slice, recv_ptr(r_done), want);
        } else if (!to_tmp && buf_.slots != nullptr) {
          std::memcpy(dst + r_done * r_slice, recv_ptr(r_done), want * 4);
        }
        ++r_done;
        moved = true;
      }
      moved ? waiter.progressed() : waiter.idle();
    }
  }

 private:
  Context& ctx_;
  const Arena& arena_;
  RingBuffers buf_;
  int next_ = 0;
  int prev_ = 0;
  size_t slice_floats_ = 0;
  int window_ = 1;
};

class TcpRing final : public RingTransport {
 public:
  TcpRing(Context& ctx, const RingBuffers& buf) : ctx_(ctx), buf_(buf) {
    next_ = ring_next(ctx);
    prev_ = ring_prev(ctx);
  }
  const char* name() const override { return "tcp"; }

  void step(const float* send, size_t send_count, float* dst, size_t recv_count,
            Landing landing) override {
    float* into = landing == Landing::kInPlace ? dst : buf_.tmp;
    if (ctx_.opt.tcp_like_socket) {
      tcp_ring_exchange_messages(ctx_, next_, send, send_count * 4,
                                 slice_for(ctx_.opt, send_count) * 4, prev_, into, recv_count * 4,
                                 slice_for(ctx_.opt, recv_count) * 4, scratch_);
    } else {
      tcp_ring_exchange(ctx_, next_, send, send_count * 4, prev_, into, recv_count * 4);
    }
    if (landing == Landing::kReduce) add_into(dst, into, recv_count);
  }

 private:
  Context& ctx_;
  RingBuffers buf_;
  int next_ = 0;
  int prev_ = 0;
  MessageScratch scratch_;  // --tcp-like-socket
};

// One out-of-place all-reduce of `count` floats: buf.send -> buf.recv. Without `arithmetic`
// (ring-traffic) every step moves the same bytes but the host does no work on them: no copy of
// the input into the output, nothing added; the reduce-scatter's incoming chunks land in tmp and
// are dropped, and the all-gather forwards each rank's own input (see traffic_owner()).
void allreduce(Context& ctx, RingTransport& t, const RingBuffers& buf, size_t count,
               bool arithmetic) {
  const int n = ctx.nranks;
  const int r = ctx.rank;
  if (arithmetic) std::memcpy(buf.recv, buf.send, count * sizeof(float));
  // ring-traffic sends its own chunks straight from the input.
  const float* own = arithmetic ? buf.recv : buf.send;
  auto run_step = [&](const float* from, int send_chunk, int recv_chunk, Landing landing) {
    const size_t sb = chunk_begin(count, n, send_chunk);
    const size_t se = chunk_begin(count, n, send_chunk + 1);
    const size_t rb = chunk_begin(count, n, recv_chunk);
    const size_t re = chunk_begin(count, n, recv_chunk + 1);
    // Chunk lengths are the same on every rank, so an empty chunk is skipped on both ends.
    t.step(from + sb, se - sb, buf.recv + rb, re - rb, landing);
  };
  for (int s = 0; s < n - 1; ++s) {  // reduce-scatter: rank r ends with chunk r+1 complete
    run_step(own, ((r - s) % n + n) % n, ((r - s - 1) % n + n) % n,
             arithmetic ? Landing::kReduce : Landing::kDrop);
  }
  for (int s = 0; s < n - 1; ++s) {  // all-gather
    run_step(s == 0 ? own : buf.recv, ((r + 1 - s) % n + n) % n, ((r - s) % n + n) % n,
             Landing::kInPlace);
  }
}

// One all-reduce as a run_ring() transport does it: by steps over a RingTransport, or (the
// plugin in ring-traffic) pipelined across steps and channels.
class RingRun {
 public:
  virtual ~RingRun() = default;
  virtual const char* name() const = 0;
  virtual void allreduce(size_t count) = 0;
};

class SteppedRun final : public RingRun {
 public:
  SteppedRun(Context& ctx, std::unique_ptr<RingTransport> t, const RingBuffers& buf,
             bool arithmetic)
      : ctx_(ctx), t_(std::move(t)), buf_(buf), arithmetic_(arithmetic) {}
  const char* name() const override { return t_->name(); }
  void allreduce(size_t count) override {
    mesh::bench::allreduce(ctx_, *t_, buf_, count, arithmetic_);
  }

 private:
  Context& ctx_;
  std::unique_ptr<RingTransport> t_;
  RingBuffers buf_;
  bool arithmetic_;
};

// ring-traffic over the plugin the way NCCL's ring runs: on each channel (its own send comm to
// the next rank and receive comm from the previous one) the 2(N-1) steps are one stream of
// slices each way, and slice k of step s+1 leaves once slice k of step s has arrived: the chunk
// a step sends is the chunk the step before received (reduced, in the reduce-scatter; in the
// all-gather forwarded as it came). So each channel's window stays full across step
// boundaries. Every chunk is split over the channels, and one loop progresses all of them.
class PipelinedTrafficRun final : public RingRun {
 public:
  PipelinedTrafficRun(Context& ctx, const Arena& arena, const RingBuffers& buf)
      : ctx_(ctx), arena_(arena), buf_(buf) {
    next_ = ring_next(ctx);
    prev_ = ring_prev(ctx);
    slice_floats_ = static_cast<size_t>(ctx.opt.slice_bytes / 4);
    channels_ = ctx.channels();
    // The reduce-scatter's slices land in tmp, one slot per window entry of each channel.
    const size_t slots = buf.tmp_bytes / (slice_floats_ * 4) / static_cast<size_t>(channels_);
    window_ = std::max<size_t>(1, std::min(static_cast<size_t>(ctx.opt.window), slots));
  }
  const char* name() const override { return "plugin"; }

  void allreduce(size_t count) override {
    // The slice plan depends on the size only: made once per size, outside the timed loop's
    // work; each all-reduce starts its counters afresh.
    if (count != planned_count_) {
      chans_.assign(static_cast<size_t>(channels_), Channel{});
      for (int c = 0; c < channels_; ++c) plan(chans_[static_cast<size_t>(c)], c, count);
      planned_count_ = count;
    }
    for (Channel& ch : chans_) ch.s_posted = ch.s_done = ch.r_posted = ch.r_done = 0;
    Waiter waiter(ctx_.opt.timeout, prev_, [&] {
      std::string s = "pipelined ring traffic:";
      for (size_t c = 0; c < chans_.size(); ++c)
        s += fmt::format(
            " channel {} sent {} of {} slices to rank {}, received {} of {} from "
            "rank {};",
            c, chans_[c].s_done, chans_[c].sends.size(), next_, chans_[c].r_done,
            chans_[c].recvs.size(), prev_);
      return s;
    });
    for (;;) {
      bool moved = false, pending = false;
      for (Channel& ch : chans_) {
        moved |= progress(ch);
        pending |= ch.s_done < ch.sends.size() || ch.r_done < ch.recvs.size();
      }
      if (!pending) return;
      moved ? waiter.progressed() : waiter.idle();
    }
  }

 private:
  struct Slice {
    float* ptr;
    size_t floats;
    size_t after;       // a send leaves once this many receives are done (0: at once)
    bool keep = false;  // receive: its data is kept (the all-gather), not dropped
  };
  struct Channel {
    int index = 0;
    std::vector<Slice> sends, recvs;
    size_t s_posted = 0, s_done = 0, r_posted = 0, r_done = 0;
    std::vector<void*> s_req, r_req;
  };

  // Channel c's part of chunk `chunk`: [begin, end) of the buffer's floats.
  std::pair<size_t, size_t> part(size_t count, int chunk, int c) const {
    const size_t b = chunk_begin(count, ctx_.nranks, chunk);
    const size_t e = chunk_begin(count, ctx_.nranks, chunk + 1);
    const auto ch = static_cast<size_t>(channels_);
    return {b + (e - b) * static_cast<size_t>(c) / ch,
            b + (e - b) * static_cast<size_t>(c + 1) / ch};
  }

  // The same chunks as allreduce() without arithmetic, cut into slices, with each send's
  // dependency on the receive of the same slice one step earlier.
  void plan(Channel& ch, int c, size_t count) {
    const int n = ctx_.nranks;
    const int r = ctx_.rank;
    ch.index = c;
    float* tmp = buf_.tmp + static_cast<size_t>(c) * window_ * slice_floats_;
    size_t prev_recv_start = 0;  // index of the previous step's first receive
    for (int s = 0; s < 2 * (n - 1); ++s) {
      const bool rs = s < n - 1;
      const int t = s - (n - 1);
      const int send_chunk = rs ? ((r - s) % n + n) % n : ((r + 1 - t) % n + n) % n;
      const int recv_chunk = rs ? ((r - s - 1) % n + n) % n : ((r - t) % n + n) % n;
      // ring-traffic sends its own input in the reduce-scatter and in the all-gather's first
      // step, and forwards what arrived (in place in recv) after that.
      const float* from = (rs || t == 0) ? buf_.send : buf_.recv;
      const auto [sb, se] = part(count, send_chunk, c);
      const auto [rb, re] = part(count, recv_chunk, c);
      // The chunk a step sends is the one the step before received, so slice k of both is
      // the same part of it (the same slice size) and the dependency holds slice by slice.
      const size_t s_slice = slice_for(ctx_.opt, se - sb);
      const size_t r_slice = slice_for(ctx_.opt, re - rb);
      for (size_t k = 0; sb + k * s_slice < se; ++k) {
        const size_t at = sb + k * s_slice;
        ch.sends.push_back({const_cast<float*>(from) + at, std::min(s_slice, se - at),
                            s == 0 ? 0 : prev_recv_start + k + 1});
      }
      prev_recv_start = ch.recvs.size();
      for (size_t k = 0; rb + k * r_slice < re; ++k) {
        const size_t at = rb + k * r_slice;
        // Reduce-scatter slices are dropped into the channel's window slots (slice_floats_
        // apart: the largest slice).
        float* into = rs ? tmp + (ch.recvs.size() % window_) * slice_floats_ : buf_.recv + at;
        ch.recvs.push_back({into, std::min(r_slice, re - at), 0, !rs});
      }
    }
    ch.s_req.assign(window_, nullptr);
    ch.r_req.assign(window_, nullptr);
  }

  bool progress(Channel& ch) {
    bool moved = false;
    PeerLink& out = ctx_.link(next_, ch.index);
    PeerLink& in = ctx_.link(prev_, ch.index);
    while (ch.r_posted < ch.recvs.size() && ch.r_posted - ch.r_done < window_) {
      const Slice& sl = ch.recvs[ch.r_posted];
      const bool slotted = buf_.slots != nullptr;
      void* req = ctx_.net->irecv(in.recv_comm, slotted ? slot(ch, ch.r_posted) : sl.ptr,
                                  slotted ? buf_.slot_bytes : sl.floats * 4, prev_,
                                  arena_.recv_mh(prev_, ch.index), prev_);
      if (req == nullptr) break;
      ch.r_req[ch.r_posted % window_] = req;
      ++ch.r_posted;
      moved = true;
    }
    while (ch.s_posted < ch.sends.size() && ch.s_posted - ch.s_done < window_ &&
           ch.sends[ch.s_posted].after <= ch.r_done) {
      const Slice& sl = ch.sends[ch.s_posted];
      void* req = ctx_.net->isend(out.send_comm, sl.ptr, sl.floats * 4, ctx_.rank,
                                  arena_.send_mh(next_, ch.index), next_);
      if (req == nullptr) break;
      ch.s_req[ch.s_posted % window_] = req;
      ++ch.s_posted;
      moved = true;
    }
    while (ch.s_done < ch.s_posted) {
      int size = 0;
      if (!ctx_.net->test(ch.s_req[ch.s_done % window_], &size, next_)) break;
      ++ch.s_done;
      moved = true;
    }
    while (ch.r_done < ch.r_posted) {
      int size = 0;
      if (!ctx_.net->test(ch.r_req[ch.r_done % window_], &size, prev_)) break;
      const size_t want = ch.recvs[ch.r_done].floats * 4;
      if (static_cast<size_t>(size) != want) {
        ctx_.report_failure(fmt::format(
            "pipelined ring traffic, channel {}: slice {} from rank {} has {} bytes, expected {}",
            ch.index, ch.r_done, prev_, size, want));
      }
      const Slice& sl = ch.recvs[ch.r_done];
      if (buf_.slots != nullptr && sl.keep) std::memcpy(sl.ptr, slot(ch, ch.r_done), want);
      ++ch.r_done;
      moved = true;
    }
    return moved;
  }

  // --recv-capacity: receive k of channel ch lands in the channel's slot k mod window.
  float* slot(const Channel& ch, size_t k) const {
    return buf_.slot(static_cast<size_t>(ch.index) * window_ + k % window_);
  }

  Context& ctx_;
  const Arena& arena_;
  RingBuffers buf_;
  int next_ = 0;
  int prev_ = 0;
  size_t slice_floats_ = 0;
  int channels_ = 1;
  size_t window_ = 1;
  std::vector<Channel> chans_;
  size_t planned_count_ = SIZE_MAX;
};

// ring-traffic: whose input chunk c holds at the end. The all-gather's first step sends the
// chunk a rank completed in the reduce-scatter (rank r: chunk r+1), which without arithmetic is
// its own input; everyone then forwards what it received, so chunk c is rank c-1's input. A
// rank's own chunk r+1 never travels to it and is not written (no host copy), so not checked.
int traffic_owner(int chunk, int nranks) {
  return (chunk + nranks - 1) % nranks;
}

void check_result(Context& ctx, const char* transport, const RingBuffers& buf, size_t count,
                  uint64_t round, bool arithmetic) {
  if (arithmetic) {
    const auto bad = check_allreduce(buf.recv, count, ctx.nranks, round);
    if (!bad) return;
    ctx.report_failure(fmt::format("{} ring all-reduce of {} floats: element {} is {}, expected {}",
                                   transport, count, *bad, buf.recv[*bad],
                                   allreduce_expected(ctx.nranks, *bad, round)));
    return;
  }
  for (int c = 0; c < ctx.nranks; ++c) {
    const int owner = traffic_owner(c, ctx.nranks);
    if (owner == ctx.rank) continue;
    for (size_t i = chunk_begin(count, ctx.nranks, c); i < chunk_begin(count, ctx.nranks, c + 1);
         ++i) {
      const float want = allreduce_input(owner, i, round);
      if (buf.recv[i] != want) {
        ctx.report_failure(
            fmt::format("{} ring traffic of {} floats: element {} (chunk {}) is {}, expected rank "
                        "{}'s input {}",
                        transport, count, i, c, buf.recv[i], owner, want));
        return;
      }
    }
  }
}

}  // namespace

std::vector<Row> run_ring(Context& ctx) {
  const auto& opt = ctx.opt;
  const bool arithmetic = opt.pattern == Pattern::kRingAllreduce;
  const uint64_t max_bytes = *std::max_element(opt.sizes.begin(), opt.sizes.end());
  const uint64_t chunk_max = (max_bytes / 4 + static_cast<uint64_t>(ctx.nranks) - 1) /
                             static_cast<uint64_t>(ctx.nranks) * 4;
  const uint64_t io_bytes = whole_pages(max_bytes);
  // tmp: a stepped reduce-scatter's incoming chunk, or each channel's window of slices.
  const uint64_t window_bytes = std::min(static_cast<uint64_t>(opt.window) * opt.slice_bytes,
                                         std::max(opt.buffer_bytes, opt.slice_bytes));
  const uint64_t tmp_bytes =
      whole_pages(std::max(chunk_max, window_bytes * static_cast<uint64_t>(opt.channels)));
  // --recv-capacity: a slot per window entry of each channel (a run's window is at most
  // opt.window), each at least a slice, on cache lines.
  const uint64_t slot_bytes =
      opt.recv_capacity == 0 ? 0 : (std::max(opt.recv_capacity, opt.slice_bytes) + 63) / 64 * 64;
  const uint64_t slots_bytes = whole_pages(slot_bytes * static_cast<uint64_t>(opt.window) *
                                           static_cast<uint64_t>(opt.channels));
  Arena arena(ctx, 2 * io_bytes + tmp_bytes + slots_bytes);
  RingBuffers buf;
  buf.send = reinterpret_cast<float*>(arena.data());
  buf.recv = reinterpret_cast<float*>(arena.data() + io_bytes);
  buf.tmp = reinterpret_cast<float*>(arena.data() + 2 * io_bytes);
  buf.tmp_bytes = tmp_bytes;
  if (slot_bytes != 0) {
    buf.slots = arena.data() + 2 * io_bytes + tmp_bytes;
    buf.slot_bytes = slot_bytes;
  }

  std::vector<std::unique_ptr<RingRun>> transports;
  if (arithmetic) {
    transports.push_back(std::make_unique<SteppedRun>(
        ctx, std::make_unique<PluginRing>(ctx, arena, buf), buf, arithmetic));
  } else {
    transports.push_back(std::make_unique<PipelinedTrafficRun>(ctx, arena, buf));
  }
  if (opt.tcp_baseline) {
    // TCP runs only if every rank has its sockets to both ring neighbours.
    const int next = ring_next(ctx);
    const int prev = ring_prev(ctx);
    const bool mine = ctx.has_tcp(next) && ctx.has_tcp(prev);
    const auto all = ctx.rdv->allgather(mine ? "1" : "0");
    if (std::all_of(all.begin(), all.end(), [](const std::string& s) { return s == "1"; })) {
      transports.push_back(
          std::make_unique<SteppedRun>(ctx, std::make_unique<TcpRing>(ctx, buf), buf, arithmetic));
    } else if (ctx.rank == 0) {
      fmt::print(stderr,
                 "{}: a rank has no TCP path to its ring neighbours; TCP "
                 "baseline skipped\n",
                 opt.pattern_name());
    }
  }

  // The transport timed second at a size runs slower on a small machine (options.h tcp_first).
  if (opt.tcp_first && transports.size() == 2) std::swap(transports[0], transports[1]);
  std::vector<Row> rows;
  ctx.rdv->barrier();
  mark_traffic_start();
  uint64_t round = 0;
  for (size_t si = 0; si < opt.sizes.size(); ++si) {
    const uint64_t bytes = opt.sizes[si];
    const size_t count = static_cast<size_t>(bytes / 4);
    const IterPlan plan = plan_iterations(bytes, opt.iters, opt.warmup, opt.iter_bytes);
    Row row;
    row.pattern = opt.pattern_name();
    row.src = ctx.rank;
    row.nranks = ctx.nranks;
    row.bytes = bytes;
    row.iters = plan.iters;
    row.window = opt.window;
    const auto size_start = Clock::now();
    for (auto& t : transports) {
      if (opt.tcp_only && std::string(t->name()) == "plugin") continue;  // its connections stay up
      row.order.emplace_back(t->name());
      // Warm-up: fresh input each time, every result checked.
      for (int i = 0; i < plan.warmup; ++i) {
        ++round;
        if (opt.verify || i == 0) fill_allreduce_input(buf.send, count, ctx.rank, round);
        if (opt.verify) std::memset(buf.tmp, 0xff, buf.tmp_bytes);  // NaN: stale data shows
        t->allreduce(count);
        if (opt.verify) check_result(ctx, t->name(), buf, count, round, arithmetic);
      }
      ++round;
      fill_allreduce_input(buf.send, count, ctx.rank, round);
      std::memset(buf.tmp, 0xff, buf.tmp_bytes);
      ctx.rdv->barrier();  // start the timed loop together
      const auto t0 = Clock::now();
      for (int i = 0; i < plan.iters; ++i) t->allreduce(count);
      const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
      if (opt.verify) check_result(ctx, t->name(), buf, count, round, arithmetic);
      Measurement m;
      m.time_us = secs / plan.iters * 1e6;
      m.algbw = gbps(bytes, secs / plan.iters);
      m.gbps = allreduce_busbw(m.algbw, ctx.nranks);
      if (std::string(t->name()) == "plugin") {
        row.plugin = m;
      } else {
        row.baselines.emplace_back(t->name(), m);
      }
    }
    const double secs = std::chrono::duration<double>(Clock::now() - size_start).count();
    if (ctx.rank == 0 && (secs >= 0.5 || bytes >= (1u << 20))) {
      const Measurement* tcp = row.baseline("tcp");
      ctx.progress(fmt::format(
          "  {} {:>9}: plugin busbw {:.2f} GB/s{} ({:.1f} s)",
          arithmetic ? "all-reduce" : "ring traffic", format_size(bytes), row.plugin.gbps,
          tcp ? fmt::format(", tcp {:.2f} GB/s", tcp->gbps) : std::string(), secs));
    }
    rows.push_back(std::move(row));
  }
  arena.release();
  return rows;
}

}  // namespace mesh::bench
