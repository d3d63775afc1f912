// SPDX-License-Identifier: Apache-2.0
// deregMrSym while the engine still moves bytes of the registration: once it returns, the plugin
// must never touch that memory again (NCCL frees it right after). Rank 1 igets a large host
// region from rank 0; rank 0 deregisters and unmaps it while the reply is still streaming
// (kMaxChunk per message). Rank 0 must not crash, deregMrSym succeeds, and rank 1's get ends
// (done or failed) within a bounded time.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "gin/wire.h"
#include "gin_rank.h"

namespace gintest {
namespace {

// 1024 chunks: the reply takes far longer than the 5 ms before rank 0 deregisters.
constexpr size_t kRegionBytes = 1024 * mesh::gin::kMaxChunk;  // 256 MiB

TEST(GinDeregister, DeregisterWhileAGetReplyStreamsNeitherCrashesNorHangs) {
  const std::string errors = run_ranks(2, 60, [&](RankEnv& env) {
    GinRank g(env);
    if (!g.setup(13, 1)) return false;
    void* mem =
        mmap(nullptr, kRegionBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return env.fail("mmap");
    std::memset(mem, env.rank() + 1, kRegionBytes);
    void* mh = nullptr;
    if (!g.reg(mem, kRegionBytes, &mh)) return false;
    void* req = nullptr;
    if (env.rank() == 1 &&
        !g.ok(g.api.iget(g.target, 0, 0, mh, kRegionBytes, 0, mh, 0, &req), "iget from rank 0"))
      return false;
    if (!env.barrier()) return false;  // the get request is queued
    if (env.rank() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (!g.dereg(mh)) return false;
      // NCCL frees the buffer once deregMrSym returned: any later engine access faults.
      if (munmap(mem, kRegionBytes) != 0) return env.fail("munmap");
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      int done = 0;
      ncclResult_t rc = ncclSuccess;
      while (!done) {
        rc = g.api.test(g.comm, req, &done);
        if (!done &&
            std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10 * time_scale()))
          return env.fail("the get neither completed nor failed within 10 s");
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      std::printf(
          "rank 1: the get %s after %.0f ms\n", rc == ncclSuccess ? "completed" : "failed",
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      if (!g.dereg(mh)) return false;
      munmap(mem, kRegionBytes);
    }
    // No barrier before closing: rank 0 closing is how rank 1 learns its stream failed.
    return g.api.release_target(g.comm, g.target) == ncclSuccess &&
           g.api.close_coll(g.comm) == ncclSuccess && g.api.finalize(g.ctx) == ncclSuccess;
  });
  EXPECT_EQ(errors, "");
}

}  // namespace
}  // namespace gintest
