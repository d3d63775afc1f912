// SPDX-License-Identifier: Apache-2.0
#include "gin_put.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "metrics.h"
#include "nccl/gin_v13.h"
#include "pattern.h"
#include "topology/rdma_sysfs.h"
#include "wait.h"

namespace mesh::bench {
namespace {

// Every rank passes the same id: the GIN greeting refuses peers of another communicator, and
// the bench's ranks form exactly one.
constexpr uint64_t kGinCommId = 0x6d6573682d67696eull;  // "mesh-gin"

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", p[i]);
  return s;
}

void unhex(const std::string& s, uint8_t* p, size_t n) {
  if (s.size() != 2 * n) throw setup_error("gin: a rank's GIN handle has the wrong length");
  for (size_t i = 0; i < n; ++i)
    p[i] = static_cast<uint8_t>(std::stoul(s.substr(2 * i, 2), nullptr, 16));
}

class GinPairTransport final : public PairTransport {
 public:
  GinPairTransport(Context& ctx, bool signal_every_put)
      : ctx_(ctx), signal_every_(signal_every_put), expected_(static_cast<size_t>(ctx.nranks)) {
    gin_ = static_cast<const ncclGin_v13_t*>(dlsym(ctx.net->library(), "ncclGinPlugin_v13"));
    if (gin_ == nullptr) {
      throw setup_error(ctx.net->path() + " exports no ncclGinPlugin_v13: a build without GIN");
    }
    for (uint64_t s : ctx.opt.sizes) {
      region_ = std::max(
          region_, static_cast<uint64_t>(plan_window(s, ctx.opt.window, ctx.opt.buffer_bytes)) * s);
    }
    region_ = whole_pages(region_);
    // Send half, then receive half, at the same offsets on every rank: a put names the target's
    // registration and an offset, so the layout must be symmetric like NCCL's windows.
    mem_ = map(2 * region_);
    signals_ = static_cast<uint64_t*>(map(kPage));
    check(gin_->init(&gctx_, kGinCommId, plugin_logger()), "gin init", -1);
    check(gin_->listen(gctx_, ctx.opt.dev, handle_, &listen_), "gin listen", -1);
    // NCCL allgathers the listen handles through its bootstrap; the bench's rendezvous does it.
    const auto all = ctx.rdv->allgather(hex(handle_, sizeof(handle_)));
    handles_.resize(all.size());
    std::vector<void*> ptrs;
    for (size_t r = 0; r < all.size(); ++r) {
      unhex(all[r], handles_[r].data(), NCCL_GIN_HANDLE_MAXSIZE);
      ptrs.push_back(handles_[r].data());
    }
    check(gin_->connect(gctx_, ptrs.data(), ctx.nranks, ctx.rank, listen_, &coll_), "gin connect",
          -1);
    ncclGinConfig_v13_t cfg{};
    cfg.nSignals = ctx.nranks;
    cfg.nContexts = 1;
    cfg.trafficClass = -1;
    ncclNetDeviceHandle_v11_t* dev_handle = nullptr;
    check(gin_->createContext(coll_, &cfg, &gin_ctx_, &dev_handle), "gin createContext", -1);
    // Collective and in the same order on every rank: registration n is the same id everywhere.
    void* gin_handle = nullptr;
    check(gin_->regMrSym(coll_, mem_, 2 * region_, NCCL_PTR_HOST, 0, &mh_, &gin_handle),
          "gin regMrSym(data)", -1);
    check(gin_->regMrSym(coll_, signals_, kPage, NCCL_PTR_HOST, 0, &sig_mh_, &gin_handle),
          "gin regMrSym(signals)", -1);
  }

  ~GinPairTransport() override {
    // Only memory here: the plugin calls are in finish(), never in an unwinding destructor.
    if (mem_ != nullptr) munmap(mem_, 2 * region_);
    if (signals_ != nullptr) munmap(signals_, kPage);
  }

  const char* name() const override { return signal_every_ ? "gin-put-signal" : "gin-put"; }
  // One direction at a time: the pattern rejects --bidir (options.cc).
  bool available(int /*peer*/) const override { return true; }

  PairResult run(const PairJob& job) override {
    PairResult r;
    if (ctx_.rank == job.src) {
      r.gbps = send_side(job, job.dst);
    } else {
      recv_side(job, job.src);
    }
    return r;
  }

  // Collective teardown, in NCCL's order: deregister, destroy the context, close the comm
  // (which waits for every peer's goodbye), close the listen, finalize.
  void finish() override {
    check(gin_->deregMrSym(coll_, sig_mh_), "gin deregMrSym", -1);
    check(gin_->deregMrSym(coll_, mh_), "gin deregMrSym", -1);
    check(gin_->destroyContext(gin_ctx_), "gin destroyContext", -1);
    check(gin_->closeColl(coll_), "gin closeColl", -1);
    check(gin_->closeListen(listen_), "gin closeListen", -1);
    check(gin_->finalize(gctx_), "gin finalize", -1);
  }

 private:
  static void* map(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw setup_error(fmt::format("gin: cannot map {} bytes", bytes));
    return p;
  }

  static void check(ncclResult_t rc, const char* call, int peer) {
    if (rc != ncclSuccess) throw plugin_error(call, rc, peer);
  }

  uint64_t signal_from(int peer) const {
    return std::atomic_ref<uint64_t>(signals_[peer]).load(std::memory_order_acquire);
  }

  // NCCL's proxy loop polls ginProgress; an error there (a broken stream) fails the rank.
  void progress(int peer) { check(gin_->ginProgress(gin_ctx_), "gin ginProgress", peer); }

  bool test(void*& request, int peer) {
    int done = 0;
    check(gin_->test(coll_, request, &done), "gin test", peer);
    if (done) request = nullptr;
    return done != 0;
  }

  void signal_only(int peer, void** request) {
    check(gin_->iputSignal(gin_ctx_, 0, 0, nullptr, 0, 0, nullptr, static_cast<uint32_t>(peer),
                           static_cast<uint64_t>(ctx_.rank) * 8, sig_mh_, 1, NCCL_GIN_SIGNAL_OP_ADD,
                           request),
          "gin iputSignal", peer);
  }

  void wait_signal(int peer, uint64_t target, const char* what) {
    Waiter w(ctx_.opt.timeout, peer, [&] {
      return fmt::format("{}: signal from rank {} is {}, waiting for {}", what, peer,
                         signal_from(peer), target);
    });
    while (signal_from(peer) < target) {
      progress(peer);
      w.idle();
    }
  }

  double send_side(const PairJob& job, int peer) {
    double seconds = 0;
    uint8_t* send = static_cast<uint8_t*>(mem_);
    for (const Phase phase : {Phase::kWarmup, Phase::kTimed}) {
      const uint64_t n =
          static_cast<uint64_t>(phase == Phase::kWarmup ? job.plan.warmup : job.plan.iters);
      if (n == 0) continue;
      const uint32_t strm =
          stream_id(Transport::kGin, phase, job.size_index, static_cast<unsigned>(peer));
      const auto window = static_cast<uint64_t>(job.window);
      std::vector<void*> slots(window, nullptr);
      void* last = nullptr;
      uint64_t posted = 0;
      Waiter w(ctx_.opt.timeout, peer, [&] {
        return fmt::format("gin: {} of {} puts posted, the receiver's answer not seen", posted, n);
      });
      const auto t0 = Clock::now();
      while (posted < n) {
        const uint64_t slot = posted % window;
        if (slots[slot] != nullptr && !test(slots[slot], peer)) {
          progress(peer);
          w.idle();
          continue;
        }
        const uint64_t off = slot * job.bytes;
        fill_pattern(send + off, job.bytes, ctx_.rank, message_index(strm, posted));
        void* req = nullptr;
        const auto target = static_cast<uint32_t>(peer);
        if (signal_every_) {
          check(gin_->iputSignal(gin_ctx_, 0, off, mh_, job.bytes, region_ + off, mh_, target,
                                 static_cast<uint64_t>(ctx_.rank) * 8, sig_mh_, 1,
                                 NCCL_GIN_SIGNAL_OP_INC, &req),
                "gin iputSignal", peer);
        } else {
          check(gin_->iput(gin_ctx_, 0, off, mh_, job.bytes, region_ + off, mh_, target, &req),
                "gin iput", peer);
        }
        slots[slot] = req;
        ++posted;
        w.progressed();
      }
      if (!signal_every_) signal_only(peer, &last);
      // The receiver answers with a signal once it has checked the data.
      const uint64_t answer = ++expected_[static_cast<size_t>(peer)];
      wait_signal(peer, answer, "gin: the receiver's answer");
      if (phase == Phase::kTimed) seconds = since(t0);
      // Every put is done by now (delivered, then answered); collect the requests.
      for (void*& s : slots) {
        while (s != nullptr && !test(s, peer)) w.idle();
      }
      while (last != nullptr && !test(last, peer)) w.idle();
    }
    return gbps(job.bytes * static_cast<uint64_t>(job.plan.iters), seconds);
  }

  void recv_side(const PairJob& job, int peer) {
    const uint8_t* recv = static_cast<const uint8_t*>(mem_) + region_;
    for (const Phase phase : {Phase::kWarmup, Phase::kTimed}) {
      const uint64_t n =
          static_cast<uint64_t>(phase == Phase::kWarmup ? job.plan.warmup : job.plan.iters);
      if (n == 0) continue;
      const uint32_t strm =
          stream_id(Transport::kGin, phase, job.size_index, static_cast<unsigned>(ctx_.rank));
      uint64_t& expected = expected_[static_cast<size_t>(peer)];
      expected += signal_every_ ? n : 1;
      wait_signal(peer, expected, "gin: the sender's signal");
      // A visible signal implies every earlier put to this rank is visible: the last `window`
      // messages must be in their slots, whole.
      const auto window = static_cast<uint64_t>(job.window);
      for (uint64_t k = n > window ? n - window : 0; k < n; ++k) {
        ctx_.verify_message(name(), recv + (k % window) * job.bytes, job.bytes, job.bytes, peer,
                            message_index(strm, k));
      }
      void* answer = nullptr;
      signal_only(peer, &answer);
      Waiter w(ctx_.opt.timeout, peer, [] { return std::string("gin: sending the answer"); });
      while (!test(answer, peer)) w.idle();
    }
  }

  Context& ctx_;
  const bool signal_every_;
  const ncclGin_v13_t* gin_ = nullptr;
  void* gctx_ = nullptr;
  void* listen_ = nullptr;
  void* coll_ = nullptr;
  void* gin_ctx_ = nullptr;
  void* mh_ = nullptr;
  void* sig_mh_ = nullptr;
  uint8_t handle_[NCCL_GIN_HANDLE_MAXSIZE] = {};
  std::vector<std::array<uint8_t, NCCL_GIN_HANDLE_MAXSIZE>> handles_;
  uint64_t region_ = 0;
  void* mem_ = nullptr;
  uint64_t* signals_ = nullptr;
  // Per peer: the signal total this rank has waited for so far (data signals and answers from
  // that peer alike; both ends count the same way, so the totals agree).
  std::vector<uint64_t> expected_;
};

}  // namespace

std::unique_ptr<PairTransport> make_gin_pair_transport(Context& ctx, bool signal_every_put) {
  return std::make_unique<GinPairTransport>(ctx, signal_every_put);
}

std::string rdma_reference_note() {
  const auto ports = topology::discover_rdma_ports();
  if (ports.empty()) return "no RDMA device: no ib_write_bw reference";
  std::string devs;
  for (const auto& p : ports) {
    if (devs.find(p.device) == std::string::npos) devs += (devs.empty() ? "" : ", ") + p.device;
  }
  // Not measured (yet): running perftest between the ranks is left to the user.
  return "RDMA device(s) " + devs +
         ": ib_write_bw reference not run by the bench; measure it with ib_write_bw -d <dev> "
         "between the same hosts";
}

}  // namespace mesh::bench
