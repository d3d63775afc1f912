// SPDX-License-Identifier: Apache-2.0
// One connection relayed over RDMA, on a relay host (docs/relay.md, "RDMA relay"): the
// connector's QPs (or the previous relay host's) write chunks into this host's staging slots,
// and this host writes each chunk on: to the destination's posted buffer with the ordinary
// protocol (wire.h 2., 3., 5.; the last relay host), or into the next relay host's staging
// slots as a connector does (a middle hop of a chain: ForwardSockets::down_relay).
//
// Setup (both sockets non-blocking; the relay agent handed them over after connecting to the
// destination's handshake port, or to the next relay host, whose forwarder answered "ok"):
//   answer the relay request "ok"  ->  read the connector's control hello + its relay-hop setup  ->
//   build the receiver endpoint for its QPs, the staging ring, and a sender endpoint on the next
//   cable  -> send the next host the same hello (nonce, connection id) with our own setup (a
//   middle hop: a relay-hop setup with our credit word)  ->  read its answer (a refusal is
//   passed back unchanged)  ->  connect both sides' QPs, send the next host our ready byte,
//   answer the connector with our staging ring (a middle hop: with the slot size cut to the
//   next relay host's when that is smaller, so chunk numbers and tags stay the same end to end).
// Forwarding, last hop: chunk c arrives in slot c % K (a WRITE_WITH_IMM: its length, tag and
// last flag, checked by RelayChunks); once the destination's clear-to-send for the chunk's
// message is there, an RDMA WRITE from the slot puts it at its offset in that buffer (the NIC
// reads the slot: no CPU copy); after the last chunk one zero-length WRITE_WITH_IMM per QP
// carries the message size.
// Forwarding, middle hop: chunk c goes from slot c % K into the next relay host's slot c % K'
// with one WRITE_WITH_IMM carrying the same immediate, once c < its credit + K'
// (RelayChunkWriter, shared with the connector).
// Either way a slot is free again when its onward WRITE completed; the freed count goes back
// to the connector's credit word. Work requests are counted per QP and never exceed the send
// queue (QueuePair::kSendDepth), whatever K: a chunk waits when its QPs have no room.
// Memory: K x S bytes of staging per connection and relay host, whatever the traffic.
// Delivery after close: a connector's send completes once its chunks are in the slots here, so
// when its control socket closes (its comm was closed, its process exited, or the previous
// relay host finished its own drain) the forward drains: no more credits, every complete
// message held is forwarded (to the destination as it posts its receives, or into the next
// relay host's slots as its credits allow), and once their WRITEs completed, the next host's
// socket is closed (which starts the next relay host's drain). Bounded by the drain timeout
// (NCCL_MESH_RELAY_RDMA_DRAIN_MS) per relay host, after which the next socket is closed with
// messages undelivered: the destination's receives fail, never a silent loss. A message the
// connector left unfinished is not delivered either (its send never completed): the
// destination's receive fails the same way.
// Faults: a completion error (of either leg; of the connector's leg only while it is live), an
// asynchronous QP or CQ error, a protocol violation (a chunk tag mismatch or a credit beyond
// what was posted included) or EOF on the next host's control socket ends the forward: both
// control sockets are closed, so both ends fail (within their 500 ms grace; along a chain each
// relay host passes the close on).
//
// Single-threaded: only the forwarder's thread (relay_forwarder.h) calls step().
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "relay/rdma_handoff.h"
#include "transport/failure_latch.h"
#include "transport/rdma/endpoint.h"
#include "transport/rdma/rdma_memory.h"
#include "transport/rdma/rdma_transport.h"
#include "transport/rdma/relay_chunk_writer.h"
#include "transport/rdma/relay_chunks.h"
#include "transport/rdma/wire.h"
#include "util/socket_util.h"

namespace mesh::rdma {

using ForwardSockets = relay::RdmaHandoff;

class RelayForward {
 public:
  RelayForward(RdmaTransport& transport, ForwardSockets sockets, uint32_t slots,
               uint32_t slot_bytes, int64_t setup_deadline_ms, int64_t drain_timeout_ms = 60000);
  ~RelayForward();
  RelayForward(const RelayForward&) = delete;
  RelayForward& operator=(const RelayForward&) = delete;

  // Advances setup or forwarding without blocking. False once the forward is over (the
  // connection closed, or failed: then it has logged why); the caller destroys it.
  bool step(int64_t now_ms, bool* progress);
  const std::string& what() const { return sockets_.what; }
  uint64_t chunks() const { return chunks_ ? chunks_->next_chunk() : 0; }
  bool draining() const { return drain_since_ms_ >= 0; }

 private:
  enum class Phase { kReplyOk, kReadHello, kWriteDown, kReadDownReply, kWriteUp, kLive, kDone };

  bool read_some(int fd, size_t want, std::vector<uint8_t>* buf, bool* progress);
  bool write_some(int fd, std::vector<uint8_t>* buf, size_t* sent, bool* progress);
  bool on_hello();       // the connector's hello and setup are in in_
  bool on_down_reply();  // the destination's answer is in in_
  bool allocate_staging(std::string* why);
  bool poll_up(bool* progress);
  bool forward_arrived(bool* progress);
  bool forward_to_relay(bool* progress);  // a middle hop's forward_arrived
  bool poll_down(bool* progress);
  bool return_credits(bool* progress);
  bool check_controls();
  bool connector_closed();  // EOF on the connector's socket (starts the drain)
  void start_drain();
  bool check_async_errors();
  bool drained(int64_t now_ms);  // while draining: true once done (the forward has ended)
  bool post_imm_writes(uint64_t size);
  bool room_for(size_t payload_qp, bool payload, bool last) const;
  void refuse_up(uint8_t hello_reply, const std::string& why);
  bool fail(const std::string& why);  // logs, ends the forward; returns false
  void finish();

  RdmaTransport& transport_;
  ForwardSockets sockets_;
  const uint32_t slots_;
  uint32_t slot_bytes_;  // a middle hop: at most the next relay host's slot size
  Phase phase_ = Phase::kReplyOk;
  int64_t deadline_ms_;
  int64_t next_control_check_ms_ = 0;

  std::vector<uint8_t> in_, out_;
  size_t sent_ = 0;
  SetupMessage up_setup_;  // the connector's relay-hop setup
  bool up_ready_ = false;  // the connector's ready byte arrived

  std::unique_ptr<Endpoint> up_ep_;    // receives the connector's chunks
  std::shared_ptr<Endpoint> down_ep_;  // writes to the destination
  uint8_t* staging_ = nullptr;
  // The staging ring's registrations: the up QPs' devices (rkeys for the connector) and the
  // down QPs' devices (lkeys for the onward writes); one MR per device either way.
  std::unique_ptr<RdmaMemory> up_mem_, down_mem_;

  std::unique_ptr<RelayChunks> chunks_;  // the staging slots' account
  RelayChunkWriter next_;                // a middle hop: the next relay host's slots, credits
  // Asynchronous QP/CQ errors of each leg (VerbsDevice's event thread records them).
  std::shared_ptr<FailureLatch> up_async_ = std::make_shared<FailureLatch>();
  std::shared_ptr<FailureLatch> down_async_ = std::make_shared<FailureLatch>();
  std::array<uint32_t, kMaxQps> down_sq_{};  // send work requests outstanding per down QP
  uint32_t up_sq_ = 0;                       // credit writes outstanding on up QP 0
  uint64_t credit_sent_ = 0;                 // the freed count last written to the connector
  // Delivery after close (see above): when the connector's socket closed, and until when.
  const int64_t drain_timeout_ms_;
  int64_t drain_since_ms_ = -1;
  int64_t now_ms_ = 0;      // the current step's time
  uint32_t up_closed_ = 0;  // draining: bit q = up QP q failed (the connector's QP is gone)
  // The destination's message being filled.
  uint32_t msg_seq_ = 0;
  bool have_cts_ = false;
  CtsEntry cts_;
  uint64_t msg_offset_ = 0;
  bool oversize_ = false;
};

}  // namespace mesh::rdma
