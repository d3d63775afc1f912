// SPDX-License-Identifier: Apache-2.0
// GPU memory over TCP without a GPU: the plugin loads the fake driver (fake_cuda.cc) through
// NCCL_MESH_TEST_GIN_CUDA_LIBRARY, advertises NCCL_PTR_CUDA, and registrations of type
// NCCL_PTR_CUDA are written and read only through the driver's copies (counted). Signals in GPU
// memory: a resettable one is read, added to and written back; a never-reset one
// (NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET) keeps a host shadow, so a value the GPU never wrote is
// overwritten by the running total. Without a driver, GIN advertises host memory only and
// refuses CUDA registrations.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "gin_rank.h"

namespace gintest {
namespace {

class CudaPathTest : public ::testing::TestWithParam<int> {};

struct Counts {
  long htod = 0, dtoh = 0, retained = 0, errors = 0;
};
Counts counts() {
  Counts c;
  void* lib = dlopen(MESH_FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
  auto* fn =
      lib != nullptr
          ? reinterpret_cast<void (*)(long*, long*, long*, long*)>(dlsym(lib, "fake_cuda_counts"))
          : nullptr;
  if (fn != nullptr) fn(&c.htod, &c.dtoh, &c.retained, &c.errors);
  return c;
}

bool wait_value(RankEnv& env, const uint64_t* word, uint64_t want, const char* what) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20 * time_scale());
  while (load_signal(word) != want) {
    if (std::chrono::steady_clock::now() > deadline)
      return env.fail(std::string(what) + ": " + std::to_string(load_signal(word)) + ", want " +
                      std::to_string(want));
  }
  return true;
}

bool done(GinRank& g, void* req) {
  int d = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20 * time_scale());
  while (!d) {
    if (!g.ok(g.api.test(g.comm, req, &d), "test")) return false;
    if (std::chrono::steady_clock::now() > deadline) return g.env.fail("request never done");
  }
  return true;
}

TEST_P(CudaPathTest, GpuMemoryOnlyThroughTheDriver) {
  const int version = GetParam();
  setenv("NCCL_MESH_TEST_GIN_CUDA_LIBRARY", MESH_FAKE_CUDA_PATH, 1);
  const std::string errors = run_ranks(2, 60, [&](RankEnv& env) {
    GinRank g(env);
    if (!g.setup(version, 1)) return false;
    int type = 0, ptr = 0;
    std::string name;
    if (!g.ok(g.api.properties(0, &type, &ptr, &name), "getProperties")) return false;
    if ((ptr & NCCL_PTR_CUDA) == 0) return env.fail("NCCL_PTR_CUDA not advertised with a driver");
    const uint32_t peer = static_cast<uint32_t>(1 - env.rank());
    constexpr size_t kSize = 600000;  // three messages
    std::vector<uint8_t> src(kSize), dst(kSize, 0);
    for (size_t i = 0; i < kSize; ++i) src[i] = pattern(env.rank(), 0, 11, i);
    alignas(8) uint64_t sig_reset[1] = {};
    alignas(8) uint64_t sig_never[1] = {};
    void *src_mh, *dst_mh, *reset_mh, *never_mh;
    auto reg_cuda = [&](void* p, size_t n, uint64_t flags, void** mh) {
      return g.ok(g.api.reg(g.comm, p, n, NCCL_PTR_CUDA, flags, mh), "regMrSym CUDA");
    };
    if (!reg_cuda(src.data(), kSize, 0, &src_mh) || !reg_cuda(dst.data(), kSize, 0, &dst_mh) ||
        !reg_cuda(sig_reset, 8, NCCL_NET_MR_FLAG_FORCE_SO, &reset_mh) ||
        !reg_cuda(sig_never, 8, NCCL_NET_MR_FLAG_FORCE_SO | NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET,
                  &never_mh))
      return false;
    const Counts before = counts();
    if (before.retained != 4)
      return env.fail("4 CUDA registrations retained " + std::to_string(before.retained) +
                      " contexts");
    if (!env.barrier()) return false;
    void* r = nullptr;
    for (void* sig : {reset_mh, never_mh}) {
      if (!g.ok(g.api.iput_signal(g.target, 0, 0, src_mh, kSize, 0, dst_mh, peer, 0, sig, 5,
                                  NCCL_GIN_SIGNAL_OP_ADD, true, &r),
                "iputSignal") ||
          !done(g, r))
        return false;
    }
    if (!wait_value(env, sig_reset, 5, "resettable signal") ||
        !wait_value(env, sig_never, 5, "never-reset signal"))
      return false;
    for (size_t i = 0; i < kSize; ++i)
      if (dst[i] != pattern(1 - env.rank(), 0, 11, i)) return env.fail("GPU put: byte wrong");
    // "The GPU" resets both words; the next ADD lands on 0 for the resettable one and on the
    // shadowed total for the never-reset one.
    if (!env.barrier()) return false;
    __atomic_store_n(sig_reset, 0, __ATOMIC_RELEASE);
    __atomic_store_n(sig_never, 0, __ATOMIC_RELEASE);
    if (!env.barrier()) return false;
    for (void* sig : {reset_mh, never_mh}) {
      if (!g.ok(g.api.iput_signal(g.target, 0, 0, nullptr, 0, 0, nullptr, peer, 0, sig, 2,
                                  NCCL_GIN_SIGNAL_OP_ADD, true, &r),
                "signal only") ||
          !done(g, r))
        return false;
    }
    if (!wait_value(env, sig_reset, 2, "resettable signal after a reset") ||
        !wait_value(env, sig_never, 7, "never-reset signal (host shadow)"))
      return false;
    if (version >= 13) {  // a get reads the peer's GPU memory through the driver
      std::fill(dst.begin(), dst.end(), 0);
      if (!g.ok(g.api.iget(g.target, 0, 0, src_mh, kSize, 0, dst_mh, peer, &r), "iget") ||
          !done(g, r))
        return false;
      for (size_t i = 0; i < kSize; ++i)
        if (dst[i] != pattern(1 - env.rank(), 0, 11, i)) return env.fail("GPU get: byte wrong");
    }
    if (!env.barrier()) return false;
    const Counts after = counts();
    // Sent: 2 puts x 3 chunks read (DtoH); received: 2 x 3 chunks + the signals written (HtoD).
    if (after.dtoh - before.dtoh < 6 || after.htod - before.htod < 6 + 4)
      return env.fail("driver copies: " + std::to_string(after.dtoh - before.dtoh) + " DtoH, " +
                      std::to_string(after.htod - before.htod) + " HtoD");
    if (after.errors != 0) return env.fail("the driver saw a call a real one would refuse");
    if (!g.dereg(src_mh) || !g.dereg(dst_mh) || !g.dereg(reset_mh) || !g.dereg(never_mh))
      return false;
    if (counts().retained != 0) return env.fail("contexts still retained after deregistration");
    return g.teardown();
  });
  unsetenv("NCCL_MESH_TEST_GIN_CUDA_LIBRARY");
  EXPECT_EQ(errors, "");
}

TEST_P(CudaPathTest, HostMemoryOnlyWithoutADriver) {
  const int version = GetParam();
  setenv("NCCL_MESH_TEST_GIN_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  const std::string errors = run_ranks(1, 30, [&](RankEnv& env) {
    GinRank g(env);
    if (!g.setup(version, 1)) return false;
    int type = 0, ptr = 0;
    std::string name;
    if (!g.ok(g.api.properties(0, &type, &ptr, &name), "getProperties")) return false;
    if (ptr != NCCL_PTR_HOST)
      return env.fail("ptrSupport " + std::to_string(ptr) + " without a driver");
    uint64_t word = 0;
    void* mh = nullptr;
    if (g.api.reg(g.comm, &word, 8, NCCL_PTR_CUDA, 0, &mh) == ncclSuccess)
      return env.fail("a CUDA registration without a driver succeeded");
    return g.teardown();
  });
  unsetenv("NCCL_MESH_TEST_GIN_CUDA_LIBRARY");
  EXPECT_EQ(errors, "");
}

INSTANTIATE_TEST_SUITE_P(Gin, CudaPathTest, ::testing::Values(11, 12, 13, 14, 15),
                         [](const auto& p) { return std::string("v") + std::to_string(p.param); });

}  // namespace
}  // namespace gintest
