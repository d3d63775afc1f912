// SPDX-License-Identifier: Apache-2.0
// The fixture every conformance test uses: this process is one rank (rank 0) and a spawned
// mesh_conformance_peer is the other (rank 1). Helpers open connections between them the way NCCL
// does and run verified traffic in both directions at once.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "harness/env.h"
#include "harness/establish.h"
#include "harness/peer_client.h"
#include "harness/plugin.h"
#include "harness/protocol.h"
#include "harness/transfer.h"

namespace conformance {

inline constexpr uint64_t KiB = 1024;
inline constexpr uint64_t MiB = 1024 * 1024;

std::string plugin_path();
std::string peer_path();
// Whether a handle of `rank` may advertise `addr` (host order): a loopback address when the rank
// runs on loopback (the default), else an address of an interface its NCCL_MESH_IFNAME selects
// (the plugin's own selection code; every rank of the suite runs on this host).
bool rank_may_advertise(Rank rank, uint32_t addr);
// Log lines, one per line, for assertion messages.
std::string join_lines(const std::vector<std::string>& lines);

// One connection: this process's comm and the peer's id for the other end of it.
struct Link {
  void* local = nullptr;
  uint32_t remote = kNoId;
};

// Messages of one direction of one connection; see StreamSpec for the knobs.
struct Flow {
  std::vector<MessageSpec> messages;
  uint32_t window = 8;
  bool post_window_first = false;
  bool preset_optional_completion = false;
  bool recv_flush_as_gpu = false;   // local receiver only: see StreamSpec::flush_as_gpu
  bool local_gpu_standin = false;   // this process's end only: see StreamSpec::gpu_standin
  bool local_out_of_order = false;  // this process's end only: StreamSpec::test_out_of_order
  int32_t recv_expect_error_at = -1;
  int32_t send_tolerate_error_from = -1;
  bool send_tolerate_timeout = false;
};

// Messages of the given sizes received into buffers of exactly that size.
std::vector<MessageSpec> exact(const std::vector<uint64_t>& sizes);

// Two spawned ranks, each with its own plugin settings (`extra_env`, PeerProcess::spawn),
// loaded as v11 with one context, and one connection from the sender to the receiver (the
// handle travels through this process, as NCCL's bootstrap carries it). For tests that need
// a setting in the ranks only, not in this process.
struct PeerPair {
  std::unique_ptr<PeerProcess> sender, receiver;
  uint32_t send_id = kNoId;  // the sender's send comm
  uint32_t recv_id = kNoId;  // the receiver's receive comm
};
// False, with the test failed saying which step failed, if any did.
bool connect_peer_pair(const std::vector<std::string>& sender_env,
                       const std::vector<std::string>& receiver_env, Millis wait, PeerPair* out);

class Exchange {
 public:
  void outbound(const Link& link, const Flow& flow);  // this process sends on link.local
  void inbound(const Link& link, const Flow& flow);   // the peer sends, this process receives

  std::vector<StreamSpec> local_specs, remote_specs;
  std::vector<void*> local_comms;

 private:
  uint64_t next_seed_ = 0x3E5Full;
};

struct ExchangeResult {
  std::vector<StreamSpec> local_specs, remote_specs;
  std::vector<StreamResult> local, remote;
  bool all_ok() const;
  std::string report() const;  // every stream, failures first
};

class PeerFixture : public ::testing::Test {
 protected:
  // Loads `version` here, inits `local_contexts` contexts, spawns the peer and has it do the same.
  void start(int version, int local_contexts = 1, int remote_contexts = 1);
  void TearDown() override;

  NetApi& net() { return *net_; }
  void* ctx(size_t i = 0) const { return ctxs_.at(i); }
  PeerProcess& peer() { return *peer_; }
  int version() const { return version_; }

  // n connections this process sends on (the peer listens and accepts).
  void open_outbound(size_t n, std::vector<Link>* links, size_t local_ctx = 0,
                     uint32_t remote_ctx = 0);
  // n connections the peer sends on (this process listens and accepts).
  void open_inbound(size_t n, std::vector<Link>* links, size_t local_ctx = 0,
                    uint32_t remote_ctx = 0);
  // n of each at once: both sides listen, swap handles, then connect and accept interleaved in
  // one thread each (the pattern that deadlocks a blocking plugin).
  void open_both(size_t n, std::vector<Link>* outbound, std::vector<Link>* inbound,
                 size_t local_ctx = 0, uint32_t remote_ctx = 0);

  ExchangeResult run(const Exchange& exchange, Millis timeout = scaled(60000),
                     const RunHooks& hooks = {});
  // A small exchange in both directions on the given links; fails the test if anything is wrong.
  void expect_traffic(const std::vector<Link>& outbound, const std::vector<Link>& inbound,
                      const char* why);

  // Closes this process's comms explicitly (they are no longer closed at teardown).
  ncclResult_t close_send(void* comm);
  ncclResult_t close_recv(void* comm);
  ncclResult_t close_listen(void* comm);
  StatusReply remote_close(CommKind kind, uint32_t id);

  // A second peer (for tests that need a fresh one after killing the first).
  void respawn_peer();
  // Plugin settings ("NAME=value") for the peers spawned from now on (start, respawn_peer).
  void set_peer_env(std::vector<std::string> env) { peer_env_ = std::move(env); }
  // The peer was killed on purpose: teardown does not expect a clean exit.
  void peer_killed() { peer_dead_ = true; }
  // Listen comms this process created through listen_local (closed at teardown unless accepted).
  void listen_local(size_t n, std::vector<HandleBytes>* handles, std::vector<void*>* lcomms,
                    size_t local_ctx = 0);
  void track_send(void* c) { sends_.push_back(c); }
  std::vector<std::string> remote_warnings();
  // WARN lines this process logged since the test started.
  std::vector<std::string> local_warnings() const;

  std::vector<void*> ctxs_;
  std::vector<bool> finalized_;

 private:
  void forget(std::vector<void*>& list, void* c);

  int version_ = 0;
  int remote_contexts_ = 1;
  std::unique_ptr<NetApi> net_;
  std::unique_ptr<PeerProcess> peer_;
  bool peer_dead_ = false;
  size_t warns_at_start_ = 0;
  size_t connections_at_start_ = 0;
  std::vector<void*> sends_, recvs_, listens_;
  std::vector<std::string> peer_env_;
};

// A fixture per ABI version: TEST_P suites derive from it and are instantiated per version.
class VersionedTest : public PeerFixture, public ::testing::WithParamInterface<int> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(start(GetParam())); }
};

std::string version_name(const ::testing::TestParamInfo<int>& info);

#define MESH_INSTANTIATE_VERSIONS(Suite, ...)                             \
  INSTANTIATE_TEST_SUITE_P(Plugin, Suite, ::testing::Values(__VA_ARGS__), \
                           ::conformance::version_name)
// Every version NCCL (2.13 ... 2.30) or RCCL may load.
#define MESH_INSTANTIATE_ALL_VERSIONS(Suite) \
  MESH_INSTANTIATE_VERSIONS(Suite, 6, 7, 8, 9, 10, 11, 12)

}  // namespace conformance
