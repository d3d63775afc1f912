// SPDX-License-Identifier: Apache-2.0
// Forked ranks for the GIN suite: the gtest process forks N children (it never loads the
// plugin itself, so it has no threads to lose in fork), each runs the test body as one rank of a
// communicator, and they share a MAP_SHARED page set: the stand-in for NCCL's bootstrap
// (allgather of listen handles, barriers) and the place each rank writes why it failed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace gintest {

inline constexpr int kMaxRanks = 8;

struct Shared {
  std::atomic<int> arrived{0};
  std::atomic<int> generation{0};
  std::atomic<int> dead{0};  // a rank exited: barriers stop waiting
  uint64_t comm_id = 0;
  uint8_t handles[kMaxRanks][128] = {};
  uint8_t blob[kMaxRanks][256] = {};  // small per-rank values to exchange (allgather_blob)
  char error[kMaxRanks][1024] = {};
};

class RankEnv {
 public:
  RankEnv(Shared* shared, int rank, int nranks) : shared_(shared), rank_(rank), nranks_(nranks) {}
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  Shared& shared() { return *shared_; }
  // All ranks meet here; false after `timeout_ms` or when a rank died (the test then fails).
  bool barrier(int timeout_ms = 60000);
  // Every rank's 128-byte handle (written at handles[rank]) into handles[] pointers.
  bool allgather_handles(const void* mine, void** all);
  // Records the first failure of this rank (the parent prints it).
  bool fail(const std::string& why);

 private:
  Shared* shared_;
  int rank_;
  int nranks_;
};

// Forks `nranks` ranks running `body` (true = pass) with NCCL_MESH_IFNAME=lo; waits at most
// `timeout_s` (then kills them). Returns "" when every rank passed, else what each said.
std::string run_ranks(int nranks, int timeout_s, const std::function<bool(RankEnv&)>& body);

// Entry `rank` (mod the length) of the `sep`-separated list in environment variable `var`, or
// "": the namespace a rank enters (MESH_GIN_NETNS, netns.sh), its cables (MESH_GIN_IFNAMES).
std::string rank_entry(const char* var, char sep, int rank);

// ASan and TSan slow everything down: time bounds are multiplied by this.
int time_scale();

}  // namespace gintest
