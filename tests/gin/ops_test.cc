// SPDX-License-Identifier: Apache-2.0
// The single operations NCCL's proxy issues, two ranks, every exported version: INC/ADD signals
// (size 0 with NULL handles, bundled with data, weak and strong, a VA signal into another
// registered window), iget and iflush (v13+), duplicate regMrSym, and more than 32 requests in
// flight to one peer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>

#include "gin_rank.h"
#include "proxy.h"

namespace gintest {
namespace {

class OpsTest : public ::testing::TestWithParam<int> {};

// Tests `req` until done (or fails the rank after `ms`).
bool wait_done(GinRank& g, void* req, const std::string& what, int ms = 20000) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(ms * time_scale());
  for (;;) {
    int done = 0;
    if (!g.ok(g.api.test(g.comm, req, &done), "test of " + what)) return false;
    if (done) return true;
    if (std::chrono::steady_clock::now() > deadline) return g.env.fail(what + " never completed");
  }
}

bool wait_signal(GinRank& g, const uint64_t* word, uint64_t want, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20 * time_scale());
  while (load_signal(word) < want) {
    if (std::chrono::steady_clock::now() > deadline)
      return g.env.fail(what + ": signal is " + std::to_string(load_signal(word)) + ", want " +
                        std::to_string(want));
  }
  if (load_signal(word) != want)
    return g.env.fail(what + ": signal is " + std::to_string(load_signal(word)) + ", want " +
                      std::to_string(want));
  return true;
}

TEST_P(OpsTest, SignalsIncAddSizeZeroWeakAndVa) {
  const int version = GetParam();
  const std::string errors = run_ranks(2, 60, [&](RankEnv& env) {
    GinRank g(env);
    if (!g.setup(version, 1)) return false;
    const int peer = 1 - env.rank();
    alignas(8) uint64_t signals[8] = {};
    alignas(8) uint64_t window[8] = {};  // a user window used for a VA signal
    std::vector<uint8_t> src(64), dst(64, 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(env.rank(), peer, 1, i);
    void *sig_mh, *win_mh, *src_mh, *dst_mh;
    if (!g.reg(signals, sizeof(signals), &sig_mh, NCCL_NET_MR_FLAG_FORCE_SO) ||
        !g.reg(window, sizeof(window), &win_mh) || !g.reg(src.data(), src.size(), &src_mh) ||
        !g.reg(dst.data(), dst.size(), &dst_mh))
      return false;
    const uint32_t p = static_cast<uint32_t>(peer);
    std::vector<void*> reqs;
    void* r = nullptr;
    // `rc` is the call's result: by the time the body runs, the call has set `r`.
    auto issue = [&](ncclResult_t rc, const char* what) {
      reqs.push_back(r);
      return g.ok(rc, what) && (r != nullptr || env.fail(std::string(what) + ": NULL request"));
    };
    for (int i = 0; i < 10; ++i) {  // signal only: size 0, NULL source and destination handles
      if (!issue(g.api.iput_signal(g.target, 0, 0, nullptr, 0, 0, nullptr, p, 0, sig_mh, 0,
                                   NCCL_GIN_SIGNAL_OP_INC, true, &r),
                 "iputSignal INC size 0"))
        return false;
    }
    if (!issue(g.api.iput_signal(g.target, 0, 0, src_mh, 16, 0, dst_mh, p, 0, sig_mh, 1000,
                                 NCCL_GIN_SIGNAL_OP_ADD, true, &r),
               "iputSignal ADD with data") ||
        !issue(g.api.iput_signal(g.target, 0, 0, nullptr, 0, 0, nullptr, p, 0, sig_mh, 5,
                                 NCCL_GIN_SIGNAL_OP_ADD, true, &r),
               "iputSignal ADD size 0") ||
        // INC adds 1 whatever value comes with it.
        !issue(g.api.iput_signal(g.target, 0, 0, nullptr, 0, 0, nullptr, p, 0, sig_mh, 99,
                                 NCCL_GIN_SIGNAL_OP_INC, true, &r),
               "iputSignal INC value 99") ||
        !issue(g.api.iput_signal(g.target, 0, 16, src_mh, 48, 16, dst_mh, p, 8, sig_mh, 7,
                                 NCCL_GIN_SIGNAL_OP_ADD, false, &r),
               "weak iputSignal") ||
        // A VA signal: NCCL passes the window's registration and the word's offset in it.
        !issue(g.api.iput_signal(g.target, 0, 0, nullptr, 0, 0, nullptr, p, 24, win_mh, 42,
                                 NCCL_GIN_SIGNAL_OP_ADD, true, &r),
               "VA signal"))
      return false;
    for (size_t i = 0; i < reqs.size(); ++i)
      if (!wait_done(g, reqs[i], "request " + std::to_string(i))) return false;
    if (!wait_signal(g, &signals[0], 10 + 1000 + 5 + 1, "INC/ADD word") ||
        !wait_signal(g, &signals[1], 7, "weak signal word") ||
        !wait_signal(g, &window[3], 42, "VA signal word"))
      return false;
    for (size_t i = 0; i < dst.size(); ++i)
      if (dst[i] != pattern(peer, env.rank(), 1, i))
        return env.fail("byte " + std::to_string(i) + " of the signalled puts is wrong");
    for (int i : {2, 3, 4, 5, 6, 7})
      if (signals[i] != 0) return env.fail("a signal word nobody signalled changed");
    if (!env.barrier()) return false;
    return g.dereg(sig_mh) && g.dereg(win_mh) && g.dereg(src_mh) && g.dereg(dst_mh) && g.teardown();
  });
  EXPECT_EQ(errors, "");
}

TEST_P(OpsTest, GetAndFlush) {
  const int version = GetParam();
  if (version < 13) GTEST_SKIP() << "ncclGin v" << version << " has no iget/iflush";
  const std::string errors = run_ranks(3, 60, [&](RankEnv& env) {
    GinRank g(env);
    if (!g.setup(version, 2)) return false;
    const int n = env.nranks();
    constexpr size_t kWin = 700000;  // gets of 1 B, 4 KiB and several chunks
    std::vector<uint8_t> win(kWin), local(kWin * static_cast<size_t>(n), 0), out(4096);
    for (size_t i = 0; i < kWin; ++i) win[i] = pattern(env.rank(), 0, 9, i);
    void *win_mh, *local_mh, *out_mh;
    if (!g.reg(win.data(), win.size(), &win_mh) || !g.reg(local.data(), local.size(), &local_mh) ||
        !g.reg(out.data(), out.size(), &out_mh))
      return false;
    if (!env.barrier()) return false;  // windows filled everywhere before anyone reads them
    const size_t sizes[] = {1, 4096, kWin - 4097};
    const size_t offs[] = {0, 1, 4097};
    for (int t = 0; t < n; ++t) {  // itself included
      for (int k = 0; k < 3; ++k) {
        void* req = nullptr;
        if (!g.ok(g.api.iget(g.target, k % 2, offs[k], win_mh, sizes[k],
                             static_cast<uint64_t>(t) * kWin + offs[k], local_mh,
                             static_cast<uint32_t>(t), &req),
                  "iget") ||
            !wait_done(g, req, "iget"))
          return false;
      }
      for (size_t i = 0; i < kWin; ++i)
        if (local[static_cast<size_t>(t) * kWin + i] != pattern(t, 0, 9, i))
          return env.fail("iget from rank " + std::to_string(t) + ": byte " + std::to_string(i) +
                          " wrong");
    }
    // Flush: done only when every earlier put and get to that rank is done.
    const int peer = (env.rank() + 1) % n;
    std::vector<void*> puts;
    for (int i = 0; i < 8; ++i) {
      void* req = nullptr;
      if (!g.ok(g.api.iput(g.target, 1, 0, out_mh, out.size(), 0, out_mh,
                           static_cast<uint32_t>(peer), &req),
                "iput"))
        return false;
      puts.push_back(req);
    }
    void* get_req = nullptr;
    void* flush = nullptr;
    if (!g.ok(g.api.iget(g.target, 1, 0, win_mh, kWin, 0, local_mh, static_cast<uint32_t>(peer),
                         &get_req),
              "iget before flush") ||
        !g.ok(g.api.iflush(g.target, 1, win_mh, static_cast<uint32_t>(peer), &flush), "iflush"))
      return false;
    if (flush != nullptr && !wait_done(g, flush, "iflush")) return false;
    for (void* req : puts) {
      int done = 0;
      if (!g.ok(g.api.test(g.comm, req, &done), "test after flush")) return false;
      if (!done) return env.fail("a put issued before a completed flush is not done");
    }
    int done = 0;
    if (!g.ok(g.api.test(g.comm, get_req, &done), "test of get after flush")) return false;
    if (!done) return env.fail("a get issued before a completed flush is not done");
    if (!env.barrier()) return false;
    return g.dereg(win_mh) && g.dereg(local_mh) && g.dereg(out_mh) && g.teardown();
  });
  EXPECT_EQ(errors, "");
}

TEST_P(OpsTest, DuplicateRegistrationsAreCounted) {
  const int version = GetParam();
  const std::string errors = run_ranks(2, 60, [&](RankEnv& env) {
    GinRank g(env);
    if (!g.setup(version, 1)) return false;
    const uint32_t peer = static_cast<uint32_t>(1 - env.rank());
    alignas(8) uint64_t sig[2] = {};
    std::vector<uint8_t> buf(8192, 0), src(8192);
    for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(env.rank(), 0, 3, i);
    void *sig_mh, *src_mh, *h1, *h2;
    // The same buffer twice: two handles, each deregistered once.
    if (!g.reg(sig, sizeof(sig), &sig_mh) || !g.reg(src.data(), src.size(), &src_mh) ||
        !g.reg(buf.data(), buf.size(), &h1) || !g.reg(buf.data(), buf.size(), &h2))
      return false;
    if (h1 == h2) return env.fail("two registrations returned one handle");
    void* r = nullptr;
    if (!g.ok(g.api.iput_signal(g.target, 0, 0, src_mh, 4096, 0, h1, peer, 0, sig_mh, 1,
                                NCCL_GIN_SIGNAL_OP_INC, true, &r),
              "put through the first") ||
        !wait_done(g, r, "put 1") || !wait_signal(g, &sig[0], 1, "first handle"))
      return false;
    if (!env.barrier() || !g.dereg(h1)) return false;  // collective: both ranks drop the first
    if (!g.ok(g.api.iput_signal(g.target, 0, 4096, src_mh, 4096, 4096, h2, peer, 0, sig_mh, 1,
                                NCCL_GIN_SIGNAL_OP_INC, true, &r),
              "put through the second") ||
        !wait_done(g, r, "put 2") || !wait_signal(g, &sig[0], 2, "second handle"))
      return false;
    for (size_t i = 0; i < buf.size(); ++i)
      if (buf[i] != pattern(1 - env.rank(), 0, 3, i)) return env.fail("duplicate: byte wrong");
    if (!env.barrier() || !g.dereg(h2)) return false;
    if (g.api.dereg(g.comm, h2) == ncclSuccess) return env.fail("a second deregMrSym succeeded");
    return g.dereg(sig_mh) && g.dereg(src_mh) && g.teardown();
  });
  EXPECT_EQ(errors, "");
}

TEST_P(OpsTest, MoreThan32InFlightToOnePeer) {
  const int version = GetParam();
  const std::string errors = run_ranks(2, 60, [&](RankEnv& env) {
    GinRank g(env);
    if (!g.setup(version, 1)) return false;
    const uint32_t peer = static_cast<uint32_t>(1 - env.rank());
    constexpr int kOps = 48;
    constexpr size_t kSize = 20000;
    std::vector<uint8_t> src(kOps * kSize), dst(kOps * kSize, 0);
    for (size_t i = 0; i < src.size(); ++i) src[i] = pattern(env.rank(), 0, 5, i);
    alignas(8) uint64_t sig = 0;
    void *src_mh, *dst_mh, *sig_mh;
    if (!g.reg(src.data(), src.size(), &src_mh) || !g.reg(dst.data(), dst.size(), &dst_mh) ||
        !g.reg(&sig, 8, &sig_mh))
      return false;
    std::vector<void*> reqs;
    for (int i = 0; i < kOps; ++i) {  // none tested until all are issued
      void* r = nullptr;
      const uint64_t o = static_cast<uint64_t>(i) * kSize;
      if (!g.ok(g.api.iput(g.target, 0, o, src_mh, kSize, o, dst_mh, peer, &r), "iput") ||
          r == nullptr)
        return env.fail("iput " + std::to_string(i) + " in flight refused");
      reqs.push_back(r);
    }
    void* r = nullptr;
    if (!g.ok(g.api.iput_signal(g.target, 0, 0, nullptr, 0, 0, nullptr, peer, 0, sig_mh, 1,
                                NCCL_GIN_SIGNAL_OP_INC, true, &r),
              "signal"))
      return false;
    reqs.push_back(r);
    for (int i = kOps; i >= 0; --i)  // tested newest first: completion order is the plugin's
      if (!wait_done(g, reqs[static_cast<size_t>(i)], "request " + std::to_string(i))) return false;
    if (!wait_signal(g, &sig, 1, "after 48 puts")) return false;
    for (size_t i = 0; i < dst.size(); ++i)
      if (dst[i] != pattern(1 - env.rank(), 0, 5, i))
        return env.fail("byte " + std::to_string(i) + " wrong");
    if (!env.barrier()) return false;
    return g.dereg(src_mh) && g.dereg(dst_mh) && g.dereg(sig_mh) && g.teardown();
  });
  EXPECT_EQ(errors, "");
}

INSTANTIATE_TEST_SUITE_P(Gin, OpsTest, ::testing::Values(11, 12, 13, 14, 15),
                         [](const auto& p) { return std::string("v") + std::to_string(p.param); });

}  // namespace
}  // namespace gintest
