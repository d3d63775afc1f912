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

template <typename F>
F fake_fn(const char* name) {
  void* lib = dlopen(MESH_FAKE_CUDA_PATH, RTLD_NOW | RTLD_NOLOAD);
  return lib != nullptr ? reinterpret_cast<F>(dlsym(lib, name)) : nullptr;
}

struct Streams {
  long live = -1, queued = -1;
};
Streams streams() {
  Streams s;
  if (auto* fn = fake_fn<void (*)(long*, long*)>("fake_cuda_streams")) fn(&s.live, &s.queued);
  return s;
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
    if (streams().live != 1) return env.fail("not one copy stream for the one GPU context");
    if (!g.dereg(src_mh) || !g.dereg(dst_mh) || !g.dereg(reset_mh) || !g.dereg(never_mh))
      return false;
    if (counts().retained != 0) return env.fail("contexts still retained after deregistration");
    if (streams().live != 0) return env.fail("the copy stream outlived the last registration");
    return g.teardown();
  });
  unsetenv("NCCL_MESH_TEST_GIN_CUDA_LIBRARY");
  EXPECT_EQ(errors, "");
}

// NCCL's GIN kernel keeps running while it waits for the signals the plugin writes, and the
// data it put is read by the plugin while it runs. A real driver orders a copy on the legacy
// default stream (the synchronous cuMemcpyHtoD/DtoH) after that kernel: the copy waits for the
// kernel, the kernel for the copy. On an H200 with NCCL 2.28.9 every rank of the GIN all-to-all
// hung so. The stand-in models that order (fake_cuda.cc): here each rank "runs a kernel" while
// its put goes out and its peer's put and signal come in, and no copy may wait for it.
TEST_P(CudaPathTest, CopiesDoNotWaitForARunningKernel) {
  const int version = GetParam();
  setenv("NCCL_MESH_TEST_GIN_CUDA_LIBRARY", MESH_FAKE_CUDA_PATH, 1);
  const std::string errors = run_ranks(2, 90, [&](RankEnv& env) {
    GinRank g(env);
    if (!g.setup(version, 1)) return false;
    const uint32_t peer = static_cast<uint32_t>(1 - env.rank());
    constexpr size_t kSize = 300000;  // two messages
    std::vector<uint8_t> src(kSize), dst(kSize, 0);
    for (size_t i = 0; i < kSize; ++i) src[i] = pattern(env.rank(), 0, 12, i);
    alignas(8) uint64_t signal[1] = {};
    void *src_mh, *dst_mh, *sig_mh;
    if (!g.ok(g.api.reg(g.comm, src.data(), kSize, NCCL_PTR_CUDA, 0, &src_mh), "reg src") ||
        !g.ok(g.api.reg(g.comm, dst.data(), kSize, NCCL_PTR_CUDA, 0, &dst_mh), "reg dst") ||
        !g.ok(g.api.reg(g.comm, signal, 8, NCCL_PTR_CUDA,
                        NCCL_NET_MR_FLAG_FORCE_SO | NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET, &sig_mh),
              "reg signal"))
      return false;
    auto* begin = fake_fn<void (*)()>("fake_cuda_kernel_begin");
    auto* end = fake_fn<void (*)()>("fake_cuda_kernel_end");
    if (begin == nullptr || end == nullptr) return env.fail("the stand-in driver has no kernels");
    begin();
    bool ok = env.barrier();
    void* r = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    // The kernel's put, then its wait for the peer's signal (as NCCL's proxy and kernel do).
    ok = ok &&
         g.ok(g.api.iput_signal(g.target, 0, 0, src_mh, kSize, 0, dst_mh, peer, 0, sig_mh, 1,
                                NCCL_GIN_SIGNAL_OP_INC, true, &r),
              "iputSignal") &&
         done(g, r) && wait_value(env, signal, 1, "signal while the kernel runs");
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    end();
    if (!ok) return false;
    const Streams s = streams();
    if (s.queued != 0)
      return env.fail(std::to_string(s.queued) + " copies waited for the running kernel (" +
                      std::to_string(waited) + " s): the legacy default stream");
    for (size_t i = 0; i < kSize; ++i)
      if (dst[i] != pattern(1 - env.rank(), 0, 12, i)) return env.fail("put: byte wrong");
    if (counts().errors != 0) return env.fail("the driver saw a call a real one would refuse");
    if (!env.barrier()) return false;
    if (!g.dereg(src_mh) || !g.dereg(dst_mh) || !g.dereg(sig_mh)) return false;
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
