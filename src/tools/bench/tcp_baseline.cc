// SPDX-License-Identifier: Apache-2.0
#include "tcp_baseline.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "metrics.h"
#include "pairs.h"
#include "sizes.h"
#include "socket_io.h"
#include "wait.h"

namespace mesh::bench {
namespace {

class TcpPairTransport final : public PairTransport {
 public:
  explicit TcpPairTransport(Context& ctx) : ctx_(ctx) {}
  const char* name() const override { return "tcp"; }
  bool available(int peer) const override { return ctx_.has_tcp(peer); }

  PairResult run(const PairJob& job) override {
    const bool is_src = ctx_.rank == job.src;
    const int peer = is_src ? job.dst : job.src;
    const int fd = ctx_.link(peer).tcp.get();
    PairResult r;
    if (job.bidir) {
      r.gbps = bidir(job, peer, fd);
    } else if (is_src) {
      r.gbps = send_side(job, peer, fd);
    } else {
      recv_side(job, peer, fd);
    }
    if (job.latency) {
      if (is_src) {
        r.lat_us = ping(job, peer, fd);
      } else {
        pong(job, peer, fd);
      }
    }
    if (!is_src) r = PairResult{};
    return r;
  }

 private:
  uint32_t stream(Phase phase, const PairJob& job, int receiver) const {
    return stream_id(Transport::kTcp, phase, job.size_index, static_cast<unsigned>(receiver));
  }

  uint8_t* slot(uint8_t* base, const PairJob& job, uint64_t i) const {
    return base + (i % static_cast<uint64_t>(job.window)) * job.bytes;
  }

  void check_ack(const PairJob& job, int peer, uint64_t expected, uint32_t strm) {
    uint64_t got = 0;
    std::memcpy(&got, job.ctrl_recv, 8);
    if (got != expected) {
      ctx_.report_failure(
          fmt::format("tcp acknowledgement from rank {} (stream 0x{:08x}) says {} "
                      "messages, expected {}",
                      peer, strm, got, expected));
    }
  }

  double send_side(const PairJob& job, int peer, int fd) {
    double seconds = 0;
    for (const Phase phase : {Phase::kWarmup, Phase::kTimed}) {
      const uint64_t n =
          static_cast<uint64_t>(phase == Phase::kWarmup ? job.plan.warmup : job.plan.iters);
      if (n == 0) continue;
      const uint32_t strm = stream(phase, job, peer);
      uint64_t i = 0;
      Waiter w(ctx_.opt.timeout, peer, [&] {
        return fmt::format("TCP send of message {} of {} ({} B) to rank {}", i, n, job.bytes, peer);
      });
      const auto t0 = Clock::now();
      for (; i < n; ++i) {
        uint8_t* buf = slot(job.send_slots, job, i);
        if (ctx_.opt.verify) fill_pattern(buf, job.bytes, ctx_.rank, message_index(strm, i));
        send_all(fd, buf, job.bytes, w);
      }
      recv_all(fd, job.ctrl_recv, 8, w);
      if (phase == Phase::kTimed) seconds = since(t0);
      check_ack(job, peer, n, strm);
    }
    return gbps(job.bytes * static_cast<uint64_t>(job.plan.iters), seconds);
  }

  void recv_side(const PairJob& job, int peer, int fd) {
    for (const Phase phase : {Phase::kWarmup, Phase::kTimed}) {
      const uint64_t n =
          static_cast<uint64_t>(phase == Phase::kWarmup ? job.plan.warmup : job.plan.iters);
      if (n == 0) continue;
      const uint32_t strm = stream(phase, job, ctx_.rank);
      uint64_t i = 0;
      Waiter w(ctx_.opt.timeout, peer, [&] {
        return fmt::format("TCP receive of message {} of {} ({} B) from rank {}", i, n, job.bytes,
                           peer);
      });
      for (; i < n; ++i) {
        uint8_t* buf = slot(job.recv_slots, job, i);
        recv_all(fd, buf, job.bytes, w);
        if (ctx_.opt.verify) {
          ctx_.verify_message("tcp", buf, job.bytes, job.bytes, peer, message_index(strm, i));
        }
      }
      std::memcpy(job.ctrl_send, &n, 8);
      send_all(fd, job.ctrl_send, 8, w);
    }
  }

  // Both directions stream independently through one poll() loop: message k+1 goes out while
  // message k is still arriving, as far as the socket buffers allow.
  double bidir(const PairJob& job, int peer, int fd) {
    double seconds = 0;
    for (const Phase phase : {Phase::kWarmup, Phase::kTimed}) {
      const uint64_t n =
          static_cast<uint64_t>(phase == Phase::kWarmup ? job.plan.warmup : job.plan.iters);
      if (n == 0) continue;
      const uint32_t out_strm = stream(phase, job, peer);
      const uint32_t in_strm = stream(phase, job, ctx_.rank);
      uint64_t si = 0, ri = 0;  // message being sent / received
      size_t soff = 0, roff = 0;
      Waiter w(ctx_.opt.timeout, peer, [&] {
        return fmt::format("TCP both ways with rank {}: sent {} of {}, received {} of {}", peer, si,
                           n, ri, n);
      });
      const auto t0 = Clock::now();
      if (ctx_.opt.verify) {
        fill_pattern(slot(job.send_slots, job, 0), job.bytes, ctx_.rank,
                     message_index(out_strm, 0));
      }
      while (si < n || ri < n) {
        pollfd p{fd, static_cast<short>((si < n ? POLLOUT : 0) | (ri < n ? POLLIN : 0)), 0};
        if (poll(&p, 1, 100) < 0 && errno != EINTR) throw setup_error("poll failed");
        bool moved = false;
        if (si < n) {
          const uint8_t* buf = slot(job.send_slots, job, si);
          const ssize_t k = ::send(fd, buf + soff, job.bytes - soff, MSG_NOSIGNAL | MSG_DONTWAIT);
          if (k > 0) {
            soff += static_cast<size_t>(k);
            moved = true;
            if (soff == job.bytes) {
              soff = 0;
              if (++si < n && ctx_.opt.verify) {
                fill_pattern(slot(job.send_slots, job, si), job.bytes, ctx_.rank,
                             message_index(out_strm, si));
              }
            }
          } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
            throw BenchError(kExitPeerFailed, fmt::format("rank {}: TCP send to rank {}: {}",
                                                          ctx_.rank, peer, std::strerror(errno)));
          }
        }
        if (ri < n) {
          uint8_t* buf = slot(job.recv_slots, job, ri);
          const ssize_t k = ::recv(fd, buf + roff, job.bytes - roff, MSG_DONTWAIT);
          if (k > 0) {
            roff += static_cast<size_t>(k);
            moved = true;
            if (roff == job.bytes) {
              roff = 0;
              if (ctx_.opt.verify) {
                ctx_.verify_message("tcp", buf, job.bytes, job.bytes, peer,
                                    message_index(in_strm, ri));
              }
              ++ri;
            }
          } else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
            throw BenchError(kExitPeerFailed,
                             fmt::format("rank {}: TCP receive from rank {}: {}", ctx_.rank, peer,
                                         k == 0 ? "connection closed" : std::strerror(errno)));
          }
        }
        moved ? w.progressed() : w.idle();
      }
      std::memcpy(job.ctrl_send, &n, 8);
      exchange(fd, job.ctrl_send, 8, fd, job.ctrl_recv, 8, w);
      if (phase == Phase::kTimed) seconds = since(t0);
      check_ack(job, peer, n, out_strm);
    }
    return gbps(2 * job.bytes * static_cast<uint64_t>(job.plan.iters), seconds);
  }

  double ping(const PairJob& job, int peer, int fd) {
    const int warm = job.plan.warmup;
    const int total = warm + job.plan.iters;
    const uint32_t ping_stream = stream(Phase::kPing, job, peer);
    const uint32_t pong_stream = stream(Phase::kPong, job, ctx_.rank);
    double timed = 0;
    int i = 0;
    Waiter w(ctx_.opt.timeout, peer,
             [&] { return fmt::format("TCP ping-pong round {} with rank {}", i, peer); });
    for (; i < total; ++i) {
      if (ctx_.opt.verify) {
        fill_pattern(job.send_slots, job.bytes, ctx_.rank, message_index(ping_stream, i));
      }
      const auto t0 = Clock::now();
      send_all(fd, job.send_slots, job.bytes, w);
      recv_all(fd, job.recv_slots, job.bytes, w);
      const double dt = since(t0);
      if (i >= warm) timed += dt;
      if (ctx_.opt.verify) {
        ctx_.verify_message("tcp", job.recv_slots, job.bytes, job.bytes, peer,
                            message_index(pong_stream, i));
      }
    }
    return half_rtt_us(timed, job.plan.iters);
  }

  void pong(const PairJob& job, int peer, int fd) {
    const int total = job.plan.warmup + job.plan.iters;
    const uint32_t ping_stream = stream(Phase::kPing, job, ctx_.rank);
    const uint32_t pong_stream = stream(Phase::kPong, job, peer);
    int i = 0;
    Waiter w(ctx_.opt.timeout, peer,
             [&] { return fmt::format("TCP ping-pong round {} with rank {}", i, peer); });
    if (ctx_.opt.verify)
      fill_pattern(job.send_slots, job.bytes, ctx_.rank, message_index(pong_stream, 0));
    for (; i < total; ++i) {
      recv_all(fd, job.recv_slots, job.bytes, w);
      send_all(fd, job.send_slots, job.bytes, w);
      if (ctx_.opt.verify) {
        ctx_.verify_message("tcp", job.recv_slots, job.bytes, job.bytes, peer,
                            message_index(ping_stream, i));
        if (i + 1 < total) {
          fill_pattern(job.send_slots, job.bytes, ctx_.rank, message_index(pong_stream, i + 1));
        }
      }
    }
  }

  Context& ctx_;
};

}  // namespace

std::unique_ptr<PairTransport> make_tcp_pair_transport(Context& ctx) {
  return std::make_unique<TcpPairTransport>(ctx);
}

void tcp_ring_exchange(Context& ctx, int next, const void* send, size_t send_len, int prev,
                       void* recv, size_t recv_len) {
  Waiter w(ctx.opt.timeout, prev, [&] {
    return fmt::format("TCP ring step: {} B to rank {}, {} B from rank {}", send_len, next,
                       recv_len, prev);
  });
  exchange(ctx.link(next).tcp.get(), send, send_len, ctx.link(prev).tcp.get(), recv, recv_len, w,
           ctx.opt.tcp_spin);
}

// NCCL's Socket transport (src/transport/net_socket.cc) outside AWS and GCP starts no helper
// threads (NCCL_SOCKET_NTHREADS 0): the proxy thread moves every byte of a connection on its one
// socket, and only in test(), which NCCL's proxy calls for a connection's oldest request alone.
// A message is its size (an int) in a send() of its own (with the bytes of a message of at most
// NCCL_SOCKET_INLINE, 128), then its bytes; the receiver reads exactly the size, then the bytes.
void tcp_ring_exchange_messages(Context& ctx, int next, const void* send, size_t send_len,
                                size_t send_slice, int prev, void* recv, size_t recv_len,
                                size_t recv_slice, MessageScratch& scratch) {
  constexpr size_t kSizeBytes = 4;
  constexpr size_t kInline = 128;
  constexpr size_t kStage = kSizeBytes + kInline;
  const size_t n_send = piece_count(send_len, send_slice);
  const size_t n_recv = piece_count(recv_len, recv_slice);
  // A stage per sent message (its size and inline bytes), then each received size.
  scratch.bytes.resize(n_send * kStage + n_recv * kSizeBytes);
  uint8_t* stage = scratch.bytes.data();
  uint8_t* sizes_in = stage + n_send * kStage;
  std::vector<Segment>& outs = scratch.outs;
  std::vector<Segment>& ins = scratch.ins;
  outs.clear();
  ins.clear();
  const auto* sp = static_cast<const uint8_t*>(send);
  for (size_t k = 0; k < n_send; ++k) {
    const size_t len = piece_length(send_len, send_slice, k);
    uint8_t* st = stage + k * kStage;
    const auto size = static_cast<int32_t>(len);
    std::memcpy(st, &size, kSizeBytes);
    if (len <= kInline) {
      std::memcpy(st + kSizeBytes, sp + k * send_slice, len);
      outs.push_back({st, kSizeBytes + len});
    } else {
      outs.push_back({st, kSizeBytes});
      outs.push_back({const_cast<uint8_t*>(sp) + k * send_slice, len});
    }
  }
  auto* rp = static_cast<uint8_t*>(recv);
  for (size_t k = 0; k < n_recv; ++k) {
    const size_t len = piece_length(recv_len, recv_slice, k);
    ins.push_back({sizes_in + k * kSizeBytes, kSizeBytes});
    ins.push_back({rp + k * recv_slice, len});
  }
  Waiter w(ctx.opt.timeout, prev, [&] {
    return fmt::format("TCP ring step in messages: {} B to rank {}, {} B from rank {}", send_len,
                       next, recv_len, prev);
  });
  exchange_segments(ctx.link(next).tcp.get(), outs.data(), outs.size(), ctx.link(prev).tcp.get(),
                    ins.data(), ins.size(), w, /*spin=*/true);
  for (size_t k = 0; k < n_recv; ++k) {
    int32_t size = 0;
    std::memcpy(&size, sizes_in + k * kSizeBytes, kSizeBytes);
    const size_t want = piece_length(recv_len, recv_slice, k);
    if (size < 0 || static_cast<size_t>(size) != want) {
      throw BenchError(kExitPeerFailed,
                       fmt::format("rank {}: TCP ring message {} from rank {} says {} bytes, "
                                   "expected {}",
                                   ctx.rank, k, prev, size, want));
    }
  }
}

}  // namespace mesh::bench
