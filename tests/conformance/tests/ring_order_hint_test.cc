// SPDX-License-Identifier: Apache-2.0
// The one WARN that says NCCL's ring is not on the cables (plugin/ring_order_hint.cc): a
// communicator whose collectives this library's tuner steers to Ring, and that has so far run on
// Ring alone, gets a relayed connection (ranks launched out of cable order). Once per
// communicator, with the fix; never for a communicator that also ran Tree or PAT (their
// non-neighbour pairs are relayed by design).
//
// The emulated ring of 4 (CTest sets NCCL_MESH_EMULATE=ring:4:0 for this process, see
// CMakeLists.txt): this process is host 0, a spawned peer is host 2 (no common cable), another
// spawned peer is host 1, the relay host between them.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "harness/log_capture.h"
#include "nccl/tuner.h"
#include "tests/fixture.h"

namespace conformance {
namespace {

constexpr int kAlgos = 7;
constexpr int kProtos = 3;
constexpr const char* kHint = "runs its collectives on NCCL's Ring";

// A cost table as NCCL fills it (Tree and PAT cheaper than Ring), through the tuner of the
// plugin's own library, for communicator `comm_id`.
class Tuner {
 public:
  Tuner() {
    lib_ = dlopen(plugin_path().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib_ != nullptr) t_ = static_cast<ncclTuner_v5_t*>(dlsym(lib_, "ncclTunerPlugin_v5"));
  }
  ~Tuner() {
    for (void* c : ctxs_) t_->finalize(c);
    if (lib_ != nullptr) dlclose(lib_);
  }
  bool ok() const { return t_ != nullptr; }
  void* init(uint64_t comm_id) {
    ncclTunerConstants_v5_t constants{};
    ncclNvlDomainInfo_v5_t nvl{};
    void* c = nullptr;
    EXPECT_EQ(t_->init(&c, comm_id, 4, 4, nullptr, &nvl, &constants), ncclSuccess);
    ctxs_.push_back(c);
    return c;
  }
  void collective(void* ctx, size_t n_bytes) {
    float table[kAlgos * kProtos];
    std::fill(std::begin(table), std::end(table), -1.0f);
    for (int p = 0; p < kProtos; ++p) {
      table[NCCL_ALGO_TREE * kProtos + p] = 10.0f;
      table[NCCL_ALGO_RING * kProtos + p] = 50.0f;
      table[NCCL_ALGO_PAT * kProtos + p] = 5.0f;
    }
    int channels = 0;
    EXPECT_EQ(t_->getCollInfo(ctx, ncclFuncAllReduce, n_bytes, 1, reinterpret_cast<float**>(table),
                              kAlgos, kProtos, 0, &channels),
              ncclSuccess);
  }

 private:
  void* lib_ = nullptr;
  ncclTuner_v5_t* t_ = nullptr;
  std::vector<void*> ctxs_;
};

class RingOrderHintTest : public PeerFixture {
 protected:
  void SetUp() override {
    const char* emulate = std::getenv("NCCL_MESH_EMULATE");
    if (emulate == nullptr || std::string(emulate) != "ring:4:0") {
      GTEST_SKIP() << "needs NCCL_MESH_EMULATE=ring:4:0 (CTest's ring_order_hint: tests set it; "
                      "this run has '"
                   << (emulate ? emulate : "") << "')";
    }
    // The destination: host 2, two cables away.
    set_peer_env({"NCCL_MESH_EMULATE=ring:4:2"});
    ASSERT_NO_FATAL_FAILURE(start(11, 2));
    // The relay host: host 1, a plugin process whose agent relays 0 <-> 2.
    std::string error;
    relay_host_ =
        PeerProcess::spawn(peer_path(), plugin_path(), &error, {"NCCL_MESH_EMULATE=ring:4:1"});
    ASSERT_TRUE(relay_host_) << error;
    InitReply rep;
    ASSERT_TRUE(relay_host_->call(Op::kInit, InitRequest{11, 1}, &rep, scaled(10000)));
    ASSERT_EQ(rep.rc, ncclSuccess) << rep.error;
  }

  size_t hints_since(size_t first) {
    const auto lines = warns_since(first);
    return static_cast<size_t>(std::count_if(lines.begin(), lines.end(), [](const auto& l) {
      return l.find(kHint) != std::string::npos;
    }));
  }

  std::unique_ptr<PeerProcess> relay_host_;
};

TEST_F(RingOrderHintTest, RelayedConnectionInARingOnlyCommunicatorWarnsOncePerCommunicator) {
  Tuner tuner;
  ASSERT_TRUE(tuner.ok());
  // Context 0 (comm 0x7E57000000000000): its collectives ran on Ring only.
  tuner.collective(tuner.init(0x7E57000000000000ull), 64 << 20);
  // Context 1 (comm ...01): a small AllReduce kept NCCL's PAT too.
  void* mixed = tuner.init(0x7E57000000000001ull);
  tuner.collective(mixed, 64 << 20);
  tuner.collective(mixed, 1024);

  const size_t before = warn_count();
  std::vector<Link> out;
  ASSERT_NO_FATAL_FAILURE(open_outbound(2, &out, 0));
  EXPECT_EQ(hints_since(before), 1u) << "two relayed connections of one Ring communicator: one "
                                        "WARN. Lines:\n"
                                     << join_lines(warns_since(before));
  const auto lines = warns_since(before);
  const bool names_fix = std::any_of(lines.begin(), lines.end(), [](const auto& l) {
    return l.find(kHint) != std::string::npos && l.find("cable order") != std::string::npos &&
           l.find("nccl-mesh-doctor") != std::string::npos && l.find("0x7e57") != std::string::npos;
  });
  EXPECT_TRUE(names_fix) << join_lines(lines);

  const size_t before_mixed = warn_count();
  std::vector<Link> out_mixed;
  ASSERT_NO_FATAL_FAILURE(open_outbound(1, &out_mixed, 1));
  EXPECT_EQ(hints_since(before_mixed), 0u)
      << "a communicator that also ran PAT relays its diagonals by design: no WARN";
}

}  // namespace
}  // namespace conformance
