// SPDX-License-Identifier: Apache-2.0
// Comm::connect's second half: which peers go one-sided (one_sided.h). Runs on NCCL's thread
// after every peer greeted and before the engine starts, so the streams are still ours alone.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "gin/comm.h"
#include "plugin/plugin.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/settings.h"

namespace mesh::gin {

bool Comm::exchange(const std::vector<std::vector<uint8_t>>& out,
                    std::vector<std::vector<uint8_t>>* in, int64_t deadline, std::string* failure) {
  struct State {
    void* send = nullptr;
    void* recv = nullptr;
    bool sent = false;
    bool received = false;
  };
  std::vector<State> st(static_cast<size_t>(nranks_));
  for (int j = 0; j < nranks_; ++j) {
    if (j == rank_) continue;
    std::memcpy(peers_[static_cast<size_t>(j)]->send_staging.data(),
                out[static_cast<size_t>(j)].data(), out[static_cast<size_t>(j)].size());
  }
  for (;;) {
    bool all = true;
    bool moved = false;
    for (int j = 0; j < nranks_; ++j) {
      if (j == rank_) continue;
      Peer& p = *peers_[static_cast<size_t>(j)];
      State& s = st[static_cast<size_t>(j)];
      int done = 0;
      int size = 0;
      if (!s.sent && s.send == nullptr &&
          plugin_.isend(p.send_comm, p.send_staging.data(), out[static_cast<size_t>(j)].size(), 0,
                        p.send_mr, &s.send) != ncclSuccess) {
        *failure = "sending the RDMA hello to rank " + std::to_string(j) + " failed";
        return false;
      }
      if (s.send != nullptr) {
        if (plugin_.test(s.send, &done, &size) != ncclSuccess) {
          *failure = "sending the RDMA hello to rank " + std::to_string(j) + " failed";
          return false;
        }
        if (done) s.send = nullptr, s.sent = moved = true;
      }
      if (!s.received && s.recv == nullptr) {
        void* data = p.recv_staging.data();
        size_t cap = kSlotSize;
        int msg_tag = 0;
        if (plugin_.irecv(p.recv_comm, 1, &data, &cap, &msg_tag, &p.recv_mr, &s.recv) !=
            ncclSuccess) {
          *failure = "receiving the RDMA hello of rank " + std::to_string(j) + " failed";
          return false;
        }
      }
      if (s.recv != nullptr) {
        if (plugin_.test(s.recv, &done, &size) != ncclSuccess) {
          *failure = "receiving the RDMA hello of rank " + std::to_string(j) + " failed";
          return false;
        }
        if (done) {
          (*in)[static_cast<size_t>(j)].assign(p.recv_staging.data(), p.recv_staging.data() + size);
          s.recv = nullptr;
          s.received = moved = true;
        }
      }
      all &= s.sent && s.received;
    }
    if (all) return true;
    if (monotonic_ms() > deadline) {
      *failure = "timed out exchanging the RDMA hellos (NCCL_MESH_CONNECT_TIMEOUT_MS=" +
                 std::to_string(settings().connect_timeout_ms) + " ms)";
      return false;
    }
    if (!moved) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

bool Comm::setup_one_sided(int64_t deadline, std::string* failure) {
  const size_t n = static_cast<size_t>(nranks_);
  std::vector<std::vector<uint8_t>> out(n), in(n);
  for (int j = 0; j < nranks_; ++j) {
    if (j == rank_) continue;
    Peer& p = *peers_[static_cast<size_t>(j)];
    rdma::VerbsDevice* dev = nullptr;
    rdma::RailBinding rail;
    if (plugin_.rdma_cable(p.send_comm, &dev, &rail)) {
      std::string why;
      p.rdma = OneSided::create(dev, rail, &why);
      if (!p.rdma)
        MESH_INFO(NCCL_INIT | NCCL_NET,
                  "GIN: rank %d: rank %d stays on the message stream (no one-sided RDMA): %s",
                  rank_, j, why.c_str());
    }
    RdmaHello h;
    h.phase = 1;
    h.offer = p.rdma != nullptr;
    if (h.offer) h.setup = p.rdma->setup();
    out[static_cast<size_t>(j)] = encode_rdma_hello(h);
  }
  // Rank j's hello of `phase`, validated; false with *failure (the whole connect fails: a
  // peer that cannot say this much is not one of ours).
  auto hello_of = [&](int j, uint8_t phase, RdmaHello* h, std::string* why) {
    const auto& msg = in[static_cast<size_t>(j)];
    if (decode_rdma_hello(msg.data(), msg.size(), h, why) && h->phase == phase) return true;
    *failure = "rank " + std::to_string(j) + " sent a bad RDMA hello (phase " +
               std::to_string(phase) + "): " + (why->empty() ? "wrong phase" : *why);
    return false;
  };
  // Exchanges `out`, then calls on(j, peer, its hello) for every peer; false with *failure.
  auto each_hello = [&](uint8_t phase, auto&& on) {
    if (!exchange(out, &in, deadline, failure)) return false;
    for (int j = 0; j < nranks_; ++j) {
      if (j == rank_) continue;
      RdmaHello h;
      std::string why;
      if (!hello_of(j, phase, &h, &why)) return false;
      on(j, *peers_[static_cast<size_t>(j)], h);
    }
    return true;
  };
  const bool offered = each_hello(1, [&](int j, Peer& p, const RdmaHello& h) {
    std::string why;
    if (p.rdma && h.offer && !p.rdma->connect(h.setup, &why)) {
      MESH_INFO(NCCL_INIT | NCCL_NET,
                "GIN: rank %d: rank %d stays on the message stream: connecting the QP failed: %s",
                rank_, j, why.c_str());
      p.rdma.reset();
    }
    if (!h.offer) p.rdma.reset();
    RdmaHello ready;
    ready.phase = 2;
    ready.offer = p.rdma != nullptr;
    out[static_cast<size_t>(j)] = encode_rdma_hello(ready);
  });
  if (!offered) return false;
  // Both QPs are in RTS before either side posts: no request reaches a QP still in INIT.
  return each_hello(2, [&](int j, Peer& p, const RdmaHello& h) {
    if (!h.offer) p.rdma.reset();
    if (!p.rdma) return;
    MESH_INFO(NCCL_INIT | NCCL_NET,
              "GIN: rank %d <-> rank %d one-sided over %s (RDMA WRITE, FETCH_AND_ADD signals, "
              "READ)",
              rank_, j, p.rdma->describe().c_str());
    if (std::find(rdma_devices_.begin(), rdma_devices_.end(), p.rdma->device()) ==
        rdma_devices_.end())
      rdma_devices_.push_back(p.rdma->device());
  });
}

}  // namespace mesh::gin
