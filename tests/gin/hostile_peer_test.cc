// SPDX-License-Identifier: Apache-2.0
// A peer that speaks the GIN wire format wrongly. Rank 1 is not a GIN rank but a forged one: it
// joins rank 0's collective connect through the plain net plugin API (ncclNetPlugin_v11 of the
// same library: connect to rank 0's handle, accept rank 0's connection, greet correctly) and then
// sends one crafted message. Rank 0 must refuse it without writing a byte outside its
// registration: the stream with rank 1 fails (one WARN), queryLastError reports it, a put to
// rank 1 fails, and the registration is intact.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "gin/wire.h"
#include "gin_rank.h"

namespace gintest {
namespace {

constexpr size_t kRegion = 4096;

struct Case {
  const char* name;
  // Fills the bytes to send after the greeting; returns the message size.
  std::function<size_t(uint8_t* msg)> craft;
};

size_t put_msg(uint8_t* msg, uint32_t reg, uint64_t offset, uint64_t length, uint64_t seq) {
  mesh::gin::Header h;
  h.kind = mesh::gin::Kind::kPut;
  h.flags = mesh::gin::kFlagLast;
  h.reg = reg;
  h.offset = offset;
  h.length = length;
  h.seq = seq;
  mesh::gin::encode_header(h, msg);
  std::memset(msg + mesh::gin::kHeaderSize, 0xee, length);
  return mesh::gin::kHeaderSize + length;
}

const Case kCases[] = {
    {"put_past_the_end", [](uint8_t* m) { return put_msg(m, 1, kRegion - 8, 16, 0); }},
    {"put_offset_wraps", [](uint8_t* m) { return put_msg(m, 1, ~0ULL - 7, 16, 0); }},
    {"registration_zero_with_data", [](uint8_t* m) { return put_msg(m, 0, 0, 16, 0); }},
    {"out_of_sequence", [](uint8_t* m) { return put_msg(m, 1, 0, 16, 5); }},
    {"bad_magic",
     [](uint8_t* m) {
       const size_t n = put_msg(m, 1, 0, 16, 0);
       m[0] ^= 0xff;
       return n;
     }},
    {"reply_to_a_get_never_asked",
     [](uint8_t* m) {
       mesh::gin::Header h;
       h.kind = mesh::gin::Kind::kGetReply;
       h.flags = mesh::gin::kFlagLast;
       h.get_id = 77;
       h.length = 8;
       mesh::gin::encode_header(h, m);
       return mesh::gin::kHeaderSize + 8;
     }},
    {"get_past_the_end",
     [](uint8_t* m) {
       mesh::gin::Header h;
       h.kind = mesh::gin::Kind::kGetRequest;
       h.flags = mesh::gin::kFlagLast;
       h.reg = 1;
       h.offset = 4000;
       h.length = 200;
       h.get_id = 1;
       mesh::gin::encode_header(h, m);
       return mesh::gin::kHeaderSize;
     }},
    // A registration key (one-sided peers only) from a peer that offered no QP.
    {"registration_key_from_a_two_sided_peer",
     [](uint8_t* m) {
       mesh::gin::Header h;
       h.kind = mesh::gin::Kind::kRegKey;
       h.flags = mesh::gin::kFlagLast;
       h.reg = 1;
       h.length = mesh::gin::kRegKeySize;
       mesh::gin::encode_header(h, m);
       mesh::gin::encode_reg_key({0x1000, 4096, 7}, m + mesh::gin::kHeaderSize);
       return mesh::gin::kHeaderSize + mesh::gin::kRegKeySize;
     }},
    {"signal_outside_its_registration",
     [](uint8_t* m) {
       mesh::gin::Header h;
       h.kind = mesh::gin::Kind::kPut;
       h.flags = mesh::gin::kFlagLast | mesh::gin::kFlagSignal;
       h.signal_reg = 1;
       h.signal_offset = kRegion;
       h.signal_op = mesh::gin::kSignalInc;
       h.signal_value = 1;
       mesh::gin::encode_header(h, m);
       return mesh::gin::kHeaderSize;
     }},
};

class HostilePeerTest : public ::testing::TestWithParam<Case> {};

// Rank 1: the forged peer, on the net plugin API. With `bad_hello` it answers the greeting with
// an RDMA hello that offers a QP but carries no setup message, and stops there.
bool forged_peer(RankEnv& env, const Case& c, bool bad_hello = false) {
  void* lib = dlopen(plugin_path().c_str(), RTLD_NOW | RTLD_LOCAL);
  auto* net =
      lib != nullptr ? static_cast<ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11")) : nullptr;
  if (net == nullptr) return env.fail("no ncclNetPlugin_v11");
  void* ctx = nullptr;
  ncclNetCommConfig_v11_t cfg{};
  cfg.trafficClass = -1;
  uint8_t handle[128] = {};
  void* listen = nullptr;
  if (net->init(&ctx, env.shared().comm_id, &cfg, nullptr, nullptr) != ncclSuccess ||
      net->listen(ctx, 0, handle, &listen) != ncclSuccess)
    return env.fail("net init/listen");
  std::vector<void*> handles(2);
  if (!env.allgather_handles(handle, handles.data())) return false;
  void *send = nullptr, *recv = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20 * time_scale());
  while (send == nullptr || recv == nullptr) {
    if (send == nullptr && net->connect(ctx, 0, handles[0], &send, nullptr) != ncclSuccess)
      return env.fail("net connect");
    if (recv == nullptr && net->accept(listen, &recv, nullptr) != ncclSuccess)
      return env.fail("net accept");
    if (std::chrono::steady_clock::now() > deadline) return env.fail("net connect timed out");
  }
  std::vector<uint8_t> out(mesh::gin::kSlotSize), in(mesh::gin::kSlotSize);
  void *out_mh = nullptr, *in_mh = nullptr;
  if (net->regMr(send, out.data(), out.size(), NCCL_PTR_HOST, &out_mh) != ncclSuccess ||
      net->regMr(recv, in.data(), in.size(), NCCL_PTR_HOST, &in_mh) != ncclSuccess)
    return env.fail("net regMr");
  auto send_msg = [&](size_t n) {
    void* req = nullptr;
    while (req == nullptr)
      if (net->isend(send, out.data(), n, 0, out_mh, nullptr, &req) != ncclSuccess) return false;
    int done = 0;
    while (!done)
      if (net->test(req, &done, nullptr) != ncclSuccess) return false;
    return true;
  };
  // Rank 0's greeting arrives on `recv`; ours goes out on `send`.
  void* rreq = nullptr;
  void* data = in.data();
  size_t size = in.size();
  int tag = 0;
  while (rreq == nullptr)
    if (net->irecv(recv, 1, &data, &size, &tag, &in_mh, nullptr, &rreq) != ncclSuccess)
      return env.fail("net irecv");
  mesh::gin::encode_greeting({1, 2, env.shared().comm_id}, out.data());
  if (!send_msg(mesh::gin::kGreetingSize)) return env.fail("greeting");
  int done = 0;
  while (!done)
    if (net->test(rreq, &done, nullptr) != ncclSuccess) return env.fail("rank 0's greeting");
  if (bad_hello) {
    const uint8_t hello[mesh::gin::kRdmaHelloHeader] = {'G', 'I', 'N', 'R', 1, 1};
    std::memcpy(out.data(), hello, sizeof(hello));
    if (!send_msg(sizeof(hello))) return env.fail("bad RDMA hello");
    if (!env.barrier(60000)) return false;  // rank 0's connect has failed
    net->closeSend(send);
    net->closeRecv(recv);
    net->closeListen(listen);
    net->finalize(ctx);
    return true;
  }
  // The RDMA hellos (wire.h): rank 0's two, and ours, offering no QP (a two-sided peer).
  for (const uint8_t phase : {uint8_t{1}, uint8_t{2}}) {
    rreq = nullptr;
    while (rreq == nullptr)
      if (net->irecv(recv, 1, &data, &size, &tag, &in_mh, nullptr, &rreq) != ncclSuccess)
        return env.fail("net irecv");
    mesh::gin::RdmaHello hello;
    hello.phase = phase;
    const std::vector<uint8_t> bytes = mesh::gin::encode_rdma_hello(hello);
    std::memcpy(out.data(), bytes.data(), bytes.size());
    if (!send_msg(bytes.size())) return env.fail("RDMA hello");
    done = 0;
    int got = 0;
    while (!done)
      if (net->test(rreq, &done, &got) != ncclSuccess) return env.fail("rank 0's RDMA hello");
    mesh::gin::RdmaHello theirs;
    std::string why;
    if (!mesh::gin::decode_rdma_hello(in.data(), static_cast<size_t>(got), &theirs, &why) ||
        theirs.phase != phase)
      return env.fail("rank 0's RDMA hello: " + why);
  }
  if (!env.barrier()) return false;  // rank 0 registered its region (id 1)
  if (!send_msg(c.craft(out.data()))) return env.fail("crafted message");
  if (!env.barrier(60000)) return false;  // rank 0 has checked
  net->closeSend(send);
  net->closeRecv(recv);
  net->closeListen(listen);
  net->finalize(ctx);
  return true;
}

TEST_P(HostilePeerTest, StreamFailsAndNothingIsWrittenOutsideTheRegistration) {
  const Case& c = GetParam();
  const std::string errors = run_ranks(2, 90, [&](RankEnv& env) {
    if (env.rank() == 1) return forged_peer(env, c);
    GinRank g(env);
    if (!g.setup(13, 1)) return false;
    std::vector<uint8_t> mem(kRegion + 64, 0x11);  // the registration plus a guard after it
    void* mh = nullptr;
    if (!g.reg(mem.data(), kRegion, &mh) || !env.barrier()) return false;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(20 * time_scale());
    bool has_error = false;
    while (!has_error) {
      if (!g.ok(g.api.query_last_error(g.target, &has_error), "queryLastError")) return false;
      if (std::chrono::steady_clock::now() > deadline)
        return env.fail(std::string(c.name) + ": the crafted message was not refused");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    for (size_t i = 0; i < mem.size(); ++i)
      if (mem[i] != 0x11)
        return env.fail(std::string(c.name) + ": byte " + std::to_string(i) + " written");
    void* req = nullptr;
    int done = 0;
    const ncclResult_t rc = g.api.iput(g.target, 0, 0, mh, 16, 0, mh, 1, &req);
    if (rc == ncclSuccess && (g.api.test(g.comm, req, &done) == ncclSuccess))
      return env.fail(std::string(c.name) + ": a put to the broken peer did not fail");
    if (!env.barrier()) return false;
    return g.dereg(mh) && g.api.release_target(g.comm, g.target) == ncclSuccess &&
           g.api.close_coll(g.comm) == ncclSuccess && g.api.finalize(g.ctx) == ncclSuccess;
  });
  EXPECT_EQ(errors, "");
}

// A peer whose RDMA hello (connect's second exchange) is malformed: connect fails with a WARN
// instead of pairing with it, and returns well within the connect timeout.
TEST(GinHostileHello, ConnectRefusesAMalformedRdmaHello) {
  const std::string errors = run_ranks(2, 90, [&](RankEnv& env) {
    if (env.rank() == 1) return forged_peer(env, kCases[0], true);
    GinRank g(env);
    std::vector<void*> handles;
    if (!g.listen_and_gather(13, &handles)) return false;
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t rc = g.api.connect(g.ctx, handles.data(), 2, 0, g.listen, &g.comm);
    const auto took = std::chrono::steady_clock::now() - t0;
    if (rc == ncclSuccess) return env.fail("connect accepted a peer with a malformed RDMA hello");
    if (took > std::chrono::seconds(4 * time_scale()))
      return env.fail("connect took too long to refuse the hello");
    if (!env.barrier(60000)) return false;
    return g.api.close_listen(g.listen) == ncclSuccess && g.api.finalize(g.ctx) == ncclSuccess;
  });
  EXPECT_EQ(errors, "");
}

// A peer that says goodbye (kBye) while rank 0 has a get to it outstanding: that get can never
// be answered, so it and a flush waiting on it must fail within a bounded time instead of
// leaving NCCL's proxy testing them forever.
TEST(GinHostileBye, GoodbyeWithAGetOutstandingFailsTheGetAndTheFlush) {
  const Case bye{"bye", [](uint8_t* m) {
                   mesh::gin::Header h;
                   h.kind = mesh::gin::Kind::kBye;
                   h.flags = mesh::gin::kFlagLast;
                   mesh::gin::encode_header(h, m);
                   return mesh::gin::kHeaderSize;
                 }};
  const std::string errors = run_ranks(2, 60, [&](RankEnv& env) {
    if (env.rank() == 1) return forged_peer(env, bye);
    GinRank g(env);
    if (!g.setup(13, 1)) return false;
    std::vector<uint8_t> mem(kRegion, 0x11);
    void *mh = nullptr, *get = nullptr, *flush = nullptr;
    if (!g.reg(mem.data(), kRegion, &mh) ||
        !g.ok(g.api.iget(g.target, 0, 0, mh, 64, 0, mh, 1, &get), "iget") ||
        !g.ok(g.api.iflush(g.target, 0, mh, 1, &flush), "iflush") || !env.barrier())
      return false;  // after the barrier the forged peer sends its kBye
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3 * time_scale());
    for (void* req : {get, flush}) {
      int done = 0;
      ncclResult_t rc = ncclSuccess;
      while (!done) {
        rc = g.api.test(g.comm, req, &done);
        if (!done && std::chrono::steady_clock::now() > deadline)
          return env.fail(std::string(req == get ? "the get" : "the flush") +
                          " was still pending 3 s after the peer's goodbye");
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (rc == ncclSuccess) return env.fail("a get the peer never answered completed");
    }
    if (!env.barrier()) return false;
    return g.dereg(mh) && g.api.release_target(g.comm, g.target) == ncclSuccess &&
           g.api.close_coll(g.comm) == ncclSuccess && g.api.finalize(g.ctx) == ncclSuccess;
  });
  EXPECT_EQ(errors, "");
}

INSTANTIATE_TEST_SUITE_P(Gin, HostilePeerTest, ::testing::ValuesIn(kCases),
                         [](const auto& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace gintest
