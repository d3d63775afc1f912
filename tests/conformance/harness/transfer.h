// SPDX-License-Identifier: Apache-2.0
// Data transfer the way NCCL's proxy progress thread does it: per connection, post isend/irecv
// (re-posting when the plugin answers *request == NULL), test only the oldest outstanding request,
// never test a request again after done. Every message is checked byte for byte on arrival. Many
// streams (connections) are driven round-robin from one thread, like NCCL drives its channels.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/plugin.h"
#include "harness/timing.h"

namespace conformance {

enum class Direction : uint8_t { kSend = 0, kRecv = 1 };

struct MessageSpec {
  uint64_t size = 0;      // bytes the sender sends
  uint64_t capacity = 0;  // receive buffer size the receiver posts (>= size unless testing errors)
};

// One direction of one connection. The sender's and the receiver's specs of a flow carry the same
// seed and messages, so both sides derive the same contents.
struct StreamSpec {
  Direction dir = Direction::kSend;
  uint32_t comm_id = 0;  // which comm; resolved by the process that runs the stream
  uint64_t seed = 0;
  int32_t tag = 0;      // sender: its rank; receiver: the expected sender's rank (NCCL's use)
  uint32_t window = 8;  // requests in flight at most (NCCL_NET_MAX_REQUESTS = 32)
  // Post a whole window before the first test(): proves the plugin takes `window` requests in
  // flight. A NULL *request while filling it is retried for a while without testing, then fails.
  bool post_window_first = false;
  // Receiver, v9+: store NCCL_NET_OPTIONAL_RECV_COMPLETION in *request before every irecv, as
  // NCCL does for LL/LL128; the plugin must overwrite it.
  bool preset_optional_completion = false;
  int32_t expect_error_at = -1;      // this message must fail (in irecv/isend or test)
  int32_t tolerate_error_from = -1;  // an error at this message or later ends the stream quietly
  // The stream may still be pending at the deadline (a sender whose receiver failed on purpose:
  // NCCL would abort the job, so the plugin need not complete or fail the send).
  bool tolerate_timeout = false;
  // Receiver: post nothing for this long after the run starts (a rank that reaches the matching
  // operation late, while the sender's data is already in flight).
  uint32_t first_post_delay_ms = 0;
  // Receiver: register the buffers as NCCL_PTR_CUDA and iflush every received message before
  // checking it, as NCCL does for GPU buffers with GPUDirect RDMA (host memory stands in for GPU
  // memory: RDMA registers both alike). Local streams only (not sent to the peer).
  bool flush_as_gpu = false;
  // Local streams only. GPU-memory stand-in (sends and receives): page-aligned buffers
  // registered as NCCL_PTR_CUDA whose user mapping is then made PROT_NONE, so any CPU access by
  // the plugin or libibverbs faults (SIGSEGV) while the NIC still reaches the pinned pages
  // (docs/rdma.md). The suite opens a slot's pages only to fill, poison or verify it, while
  // the plugin holds no request on it. Receivers flush as for GPU memory (implies flush_as_gpu).
  bool gpu_standin = false;
  // Local streams only: message 0 stays untested until message `window` is posted, while the
  // later ones are tested as they complete (the contract allows any order; NCCL tests in order
  // today). With window 32 that is 32 outstanding requests whose sequences span 33.
  bool test_out_of_order = false;
  std::vector<MessageSpec> messages;
};

struct StreamResult {
  bool ok = false;
  std::string error;            // why not ok, or which tolerated error ended the stream
  uint32_t completed = 0;       // messages completed and verified
  int32_t failed_at = -1;       // message whose post or test returned an error
  int32_t rc = 0;               // that error
  uint64_t max_call_us = 0;     // slowest isend/irecv/test
  uint64_t error_after_us = 0;  // from the start of the run (or the hook) to that error
  uint32_t flushes = 0;         // iflush calls on non-empty messages (flush_as_gpu)
  uint32_t flush_requests = 0;  // of which returned a request (a real flush, not "nothing to do")
};

struct RunHooks {
  // Called before the first post of message `index` of stream `stream` (e.g. to kill the peer at a
  // known point of a transfer). Returning true restarts the error_after_us clock of every stream.
  std::function<bool(size_t stream, size_t index)> before_post;
};

// Runs all streams to completion, to their first error, or until `deadline`. `comms[i]` is the
// send or recv comm of `specs[i]`. Buffers are registered with regMr (one registration of the whole
// arena plus overlapping per-slot ones) before use and deregistered at the end.
std::vector<StreamResult> run_streams(NetApi& net, const std::vector<StreamSpec>& specs,
                                      const std::vector<void*>& comms, Clock::time_point deadline,
                                      const RunHooks& hooks = {});

// A readable one-line summary of a failed stream, for assertion messages.
std::string describe(const StreamSpec& spec, const StreamResult& result);

}  // namespace conformance
