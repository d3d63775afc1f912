// SPDX-License-Identifier: Apache-2.0
// The relay host's RDMA forwarding thread (docs/relay.md, "RDMA relay"): the relay agent
// (relay/agent.h) hands over each RDMA-relayed connection's two sockets once it has connected
// to the destination; this thread runs every RelayForward's setup and data path.
//
// Threads: adopt() from the relay agent's thread; everything else on the forwarder's own thread
// (started with the first adopted connection), which polls the forwards' completion queues:
// continuously while chunks move, backing off to sleeps of up to kMaxIdleSleepUs when nothing
// moved, and blocking on a condition variable when it forwards nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "transport/rdma/rdma_transport.h"
#include "transport/rdma/relay_forward.h"

namespace mesh::rdma {

struct ForwarderOptions {
  uint32_t slots = 8;                // NCCL_MESH_RELAY_RDMA_SLOTS
  uint32_t slot_bytes = 512 * 1024;  // NCCL_MESH_RELAY_RDMA_SLOT_BYTES
  size_t max_forwards = 64;          // connections relayed at once (staging is K x S each)
  int64_t setup_timeout_ms = 15000;
  int64_t drain_timeout_ms = 60000;  // NCCL_MESH_RELAY_RDMA_DRAIN_MS: delivery after close
};

class RelayForwarder {
 public:
  static constexpr int kMaxIdleSleepUs = 64;

  explicit RelayForwarder(RdmaTransport& transport) : transport_(transport) {}
  ~RelayForwarder() { stop(); }
  RelayForwarder(const RelayForwarder&) = delete;
  RelayForwarder& operator=(const RelayForwarder&) = delete;

  void configure(const ForwarderOptions& options) { options_ = options; }
  // Takes the sockets (moved out); false with *why, sockets untouched (the agent answers the
  // connector "busy"), when this host
  // forwards its maximum already or its thread cannot start.
  bool adopt(ForwardSockets& sockets, std::string* why);
  // Ends every forward (both ends of each see their control socket close) and joins the thread.
  void stop();
  size_t forwards() const { return count_.load(); }

 private:
  void loop();

  RdmaTransport& transport_;
  ForwarderOptions options_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<std::unique_ptr<RelayForward>> inbox_;  // guarded by mu_
  std::atomic<size_t> count_{0};                      // forwards held (inbox + running)
};

}  // namespace mesh::rdma
