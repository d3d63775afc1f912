// SPDX-License-Identifier: Apache-2.0
// The bench's own out-of-band channel (NCCL's bootstrap plays this role for the plugin): rank 0
// listens on --rendezvous IP:PORT, every other rank connects to it (retrying until --timeout
// while rank 0 is still starting), and all collective traffic is star-shaped through rank 0.
// It carries the plugin handles, each rank's interface list, barriers between pairs and the
// results. Blobs are opaque strings (the bench sends JSON).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "launch_env.h"
#include "socket_io.h"

namespace mesh::bench {

class Rendezvous {
 public:
  // listen_fd >= 0: rank 0 uses this already-listening socket (the local launcher creates it
  // before forking, so there is no race for the port); otherwise rank 0 binds `where`.
  Rendezvous(int rank, int nranks, HostPort where, int listen_fd, double timeout_s);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  // Everybody's blob, indexed by rank. wait_s bounds how long a rank may stay silent; the
  // default is no bound, because a rank idling at a barrier legitimately waits for a whole pair
  // sweep: a rank that dies closes its connection (noticed at once), and a rank that stalls
  // runs into the deadline of its own wait loop and then exits.
  std::vector<std::string> allgather(const std::string& mine, double wait_s = kNoDeadline);
  void barrier() { allgather(std::string()); }

  static constexpr double kNoDeadline = 1e9;

  // Throws kExitPeerFailed when a rank's connection is gone (that rank died): installed as the
  // Waiter's peer watch, so every wait loop notices within 100 ms.
  void check_peers();

 private:
  std::vector<std::string> exchange_all(const std::string& mine, double wait_s);

  int rank_;
  int nranks_;
  double timeout_s_;
  uint32_t seq_ = 0;
  std::vector<Fd> clients_;  // rank 0: index = client rank (slot 0 unused)
  Fd server_;                // other ranks: the connection to rank 0
};

}  // namespace mesh::bench
