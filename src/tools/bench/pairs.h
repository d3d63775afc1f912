// SPDX-License-Identifier: Apache-2.0
// Point-to-point pattern: every ordered pair (or every pair both ways with --bidir), one pair at
// a time, every size, measured over the plugin and over each baseline by the same two processes.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "context.h"
#include "report.h"
#include "sizes.h"

namespace mesh::bench {

// One size of one pair. Buffers live in the pairs arena: `send_slots`/`recv_slots` hold
// `window` messages each, `ctrl_send`/`ctrl_recv` 64 bytes for acknowledgements.
struct PairJob {
  int src = 0;
  int dst = 0;
  bool bidir = false;
  uint64_t bytes = 0;
  unsigned size_index = 0;
  IterPlan plan;
  int window = 1;
  bool latency = false;  // also run the ping-pong
  uint8_t* send_slots = nullptr;
  uint8_t* recv_slots = nullptr;
  uint8_t* ctrl_send = nullptr;
  uint8_t* ctrl_recv = nullptr;
  const Arena* arena = nullptr;
};

struct PairResult {
  double gbps = std::numeric_limits<double>::quiet_NaN();
  double lat_us = std::numeric_limits<double>::quiet_NaN();
};

// A way to move a pair's bytes. Both ranks of the pair call run() with the same job; the result
// counts on job.src. The plugin and plain TCP implement it; an RDMA baseline (ib_write_bw where
// it exists) would be a third implementation, added to the list in run_pairs().
class PairTransport {
 public:
  virtual ~PairTransport() = default;
  virtual const char* name() const = 0;
  virtual bool available(int peer) const = 0;
  virtual PairResult run(const PairJob& job) = 0;
  // After the last pair, on every rank, before the arena goes: collective closes (GIN).
  virtual void finish() {}
};

std::unique_ptr<PairTransport> make_plugin_pair_transport(Context& ctx);
std::unique_ptr<PairTransport> make_tcp_pair_transport(Context& ctx);

// The pattern; returns the rows this rank measured (as src).
std::vector<Row> run_pairs(Context& ctx);

}  // namespace mesh::bench
