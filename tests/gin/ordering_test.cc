// SPDX-License-Identifier: Apache-2.0
// The ordering rule NCCL's device API documents: a signal visible at the target implies its put
// and every earlier put to that target on the same context are visible. Every rank puts rounds
// of data (sizes from 1 byte to several chunks) to every rank, itself included, on 1 (v11) or 4
// contexts, each round signalled either by a separate size-0 signal with NULL handles or bundled
// with its put (iputSignal); no registration barrier, so early messages meet targets that have
// not registered yet. The receiver spins on every (sender, context) signal while its own proxy
// loop keeps issuing, and whenever a signal moves checks every byte of every round it covers.
#include <gtest/gtest.h>

#include <chrono>
#include <tuple>

#include "gin_rank.h"
#include "proxy.h"

namespace gintest {
namespace {

class OrderingTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

bool ordering_rank(RankEnv& env, int version) {
  GinRank g(env);
  const int ctxs = version == 11 ? 1 : 4;
  if (!g.setup(version, ctxs)) return false;
  constexpr int kRounds = 48;
  const int n = env.nranks();
  const int me = env.rank();
  std::vector<uint64_t> size(kRounds), off(kRounds);
  uint64_t per = 0;
  for (int r = 0; r < kRounds; ++r) {
    size[r] = r % 8 == 3 ? 300000 + static_cast<uint64_t>(r)
                         : (static_cast<uint64_t>(r) * 977) % 20000 + 1;
    off[r] = per;
    per += size[r];
  }
  std::vector<uint8_t> src(per * static_cast<uint64_t>(n)),
      window(per * static_cast<uint64_t>(n), 0);
  std::vector<uint64_t> signals(static_cast<size_t>(n * ctxs), 0);
  for (int t = 0; t < n; ++t)
    for (int r = 0; r < kRounds; ++r)
      for (uint64_t i = 0; i < size[r]; ++i)
        src[static_cast<uint64_t>(t) * per + off[r] + i] =
            pattern(me, t, static_cast<uint64_t>(r), i);
  void *src_mh = nullptr, *win_mh = nullptr, *sig_mh = nullptr;
  if (!g.reg(src.data(), src.size(), &src_mh) || !g.reg(window.data(), window.size(), &win_mh) ||
      !g.reg(signals.data(), signals.size() * 8, &sig_mh, NCCL_NET_MR_FLAG_FORCE_SO))
    return false;

  Proxy proxy(g.api, g.comm, g.target, n, ctxs, 64);
  uint64_t completed = 0;
  uint64_t issued = 0;
  for (int r = 0; r < kRounds; ++r) {
    const int c = r % ctxs;
    for (int t = 0; t < n; ++t) {
      const uint64_t s_off = static_cast<uint64_t>(t) * per + off[r];
      const uint64_t d_off = static_cast<uint64_t>(me) * per + off[r];
      const uint64_t sig = static_cast<uint64_t>(me * ctxs + c) * 8;
      const size_t sz = size[r];
      GinApi* api = &g.api;
      void* target = g.target;
      const uint32_t rank = static_cast<uint32_t>(t);
      if (r % 2 == 0) {
        proxy.enqueue(
            t, c,
            [=](void** req) {
              return api->iput(target, c, s_off, src_mh, sz, d_off, win_mh, rank, req);
            },
            &completed);
        proxy.enqueue(
            t, c,
            [=](void** req) {
              return api->iput_signal(target, c, 0, nullptr, 0, 0, nullptr, rank, sig, sig_mh, 1,
                                      NCCL_GIN_SIGNAL_OP_ADD, true, req);
            },
            &completed);
        issued += 2;
      } else {
        proxy.enqueue(
            t, c,
            [=](void** req) {
              return api->iput_signal(target, c, s_off, src_mh, sz, d_off, win_mh, rank, sig,
                                      sig_mh, 0, NCCL_GIN_SIGNAL_OP_INC, true, req);
            },
            &completed);
        issued += 1;
      }
    }
  }
  // Rounds of each context in order: the k-th signal of (sender, c) covers its first k rounds.
  std::vector<std::vector<int>> rounds_of(static_cast<size_t>(ctxs));
  for (int r = 0; r < kRounds; ++r) rounds_of[static_cast<size_t>(r % ctxs)].push_back(r);
  std::vector<uint64_t> verified(static_cast<size_t>(n * ctxs), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60 * time_scale());
  for (;;) {
    if (!proxy.idle() && !proxy.pass()) return env.fail("proxy: " + proxy.why());
    bool all = true;
    for (int s = 0; s < n; ++s) {
      for (int c = 0; c < ctxs; ++c) {
        const size_t k = static_cast<size_t>(s * ctxs + c);
        const uint64_t v = load_signal(&signals[k]);
        const auto& rounds = rounds_of[static_cast<size_t>(c)];
        if (v > rounds.size())
          return env.fail("signal of rank " + std::to_string(s) + " context " + std::to_string(c) +
                          " is " + std::to_string(v) + ", more than its " +
                          std::to_string(rounds.size()) + " rounds");
        for (; verified[k] < v; ++verified[k]) {
          const int r = rounds[verified[k]];
          const uint8_t* got =
              window.data() + static_cast<uint64_t>(s) * per + off[static_cast<size_t>(r)];
          for (uint64_t i = 0; i < size[static_cast<size_t>(r)]; ++i) {
            if (got[i] != pattern(s, me, static_cast<uint64_t>(r), i))
              return env.fail("signal of rank " + std::to_string(s) + " context " +
                              std::to_string(c) + " = " + std::to_string(v) +
                              " is visible, but byte " + std::to_string(i) + " of its round " +
                              std::to_string(r) + " is not (ordering broken)");
          }
        }
        all &= verified[k] == rounds.size();
      }
    }
    if (all && proxy.idle()) break;
    if (std::chrono::steady_clock::now() > deadline) return env.fail("signals did not all arrive");
  }
  if (completed != issued)
    return env.fail("counters: " + std::to_string(completed) + " of " + std::to_string(issued) +
                    " requests completed");
  if (!env.barrier()) return false;  // every rank's traffic is in before anyone deregisters
  if (!g.dereg(src_mh) || !g.dereg(win_mh) || !g.dereg(sig_mh)) return false;
  return g.teardown();
}

TEST_P(OrderingTest, SignalImpliesEveryEarlierPut) {
  const auto [version, nranks] = GetParam();
  const std::string errors =
      run_ranks(nranks, 120, [&](RankEnv& env) { return ordering_rank(env, version); });
  EXPECT_EQ(errors, "");
}

INSTANTIATE_TEST_SUITE_P(Gin, OrderingTest,
                         ::testing::Combine(::testing::Values(11, 12, 13, 14, 15),
                                            ::testing::Values(2, 3, 4)),
                         [](const auto& p) {
                           return std::string("v") + std::to_string(std::get<0>(p.param)) + "_" +
                                  std::to_string(std::get<1>(p.param)) + "ranks";
                         });

}  // namespace
}  // namespace gintest
