// SPDX-License-Identifier: Apache-2.0
// One connection relayed over RDMA, on the relay host (docs/relay.md, "RDMA relay"): the
// connector's QPs write chunks into this host's staging slots, and this host writes each chunk
// on to the destination's posted buffer with the ordinary protocol (wire.h 2., 3., 5.).
//
// Setup (both sockets non-blocking; the relay agent handed them over after connecting to the
// destination's handshake port):
//   answer the relay request "ok"  ->  read the connector's control hello + its relay-hop setup  ->
//   build the receiver endpoint for its QPs, the staging ring, and a sender endpoint on the cable
//   to the destination  -> send the destination the same hello (nonce, connection id) with our own
//   setup  ->  read its answer (a refusal is passed back unchanged)  ->  connect both sides' QPs,
//   send the destination our ready byte, answer the connector with our staging ring.
// Forwarding: chunk c arrives in slot c % K (a WRITE_WITH_IMM: its length and last flag); once
// the destination's clear-to-send for the chunk's message is there, an RDMA WRITE from the slot
// puts it at its offset in that buffer (the NIC reads the slot: no CPU copy); after the last
// chunk one zero-length WRITE_WITH_IMM per QP carries the message size. A slot is free again
// when its onward WRITE completed; the freed count goes back to the connector's credit word.
// Memory: K x S bytes of staging per connection, whatever the traffic.
// Faults: a completion error, a protocol violation or EOF on either control socket ends the
// forward: both control sockets are closed, so both endpoints fail (within their 500 ms grace).
//
// Single-threaded: only the forwarder's thread (relay_forwarder.h) calls step().
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "relay/rdma_handoff.h"
#include "transport/rdma/endpoint.h"
#include "transport/rdma/rdma_memory.h"
#include "transport/rdma/rdma_transport.h"
#include "transport/rdma/wire.h"
#include "util/socket_util.h"

namespace mesh::rdma {

using ForwardSockets = relay::RdmaHandoff;

class RelayForward {
 public:
  RelayForward(RdmaTransport& transport, ForwardSockets sockets, uint32_t slots,
               uint32_t slot_bytes, int64_t setup_timeout_ms);
  ~RelayForward();
  RelayForward(const RelayForward&) = delete;
  RelayForward& operator=(const RelayForward&) = delete;

  // Advances setup or forwarding without blocking. False once the forward is over (the
  // connection closed, or failed: then it has logged why); the caller destroys it.
  bool step(int64_t now_ms, bool* progress);
  const std::string& what() const { return sockets_.what; }
  uint64_t chunks() const { return next_fwd_; }

 private:
  enum class Phase { kReplyOk, kReadHello, kWriteDown, kReadDownReply, kWriteUp, kLive, kDone };
  enum class Slot : uint8_t { kEmpty, kArrived, kForwarding };

  bool read_some(int fd, size_t want, std::vector<uint8_t>* buf, bool* progress);
  bool write_some(int fd, std::vector<uint8_t>* buf, size_t* sent, bool* progress);
  bool on_hello();       // the connector's hello and setup are in in_
  bool on_down_reply();  // the destination's answer is in in_
  bool allocate_staging(std::string* why);
  bool poll_up(bool* progress);
  bool forward_arrived(bool* progress);
  bool poll_down(bool* progress);
  bool return_credits(bool* progress);
  bool check_controls();
  bool post_imm_writes(uint64_t size);
  void refuse_up(uint8_t hello_reply, const std::string& why);
  bool fail(const std::string& why);  // logs, ends the forward; returns false
  void finish();

  RdmaTransport& transport_;
  ForwardSockets sockets_;
  const uint32_t slots_;
  const uint32_t slot_bytes_;
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

  std::vector<Slot> slot_;
  std::vector<uint32_t> slot_len_;
  std::vector<uint8_t> slot_last_;
  std::array<uint64_t, kMaxQps> up_count_{};  // WRITE_WITH_IMMs received per up QP
  uint64_t next_fwd_ = 0;                     // the next chunk to forward
  uint64_t freed_ = 0;                        // chunks whose slot is free again, in order
  uint64_t credit_sent_ = 0;                  // the freed count last written to the connector
  uint32_t credit_writes_ = 0;
  // The destination's message being filled.
  uint32_t msg_seq_ = 0;
  bool have_cts_ = false;
  CtsEntry cts_;
  uint64_t msg_offset_ = 0;
  bool oversize_ = false;
};

}  // namespace mesh::rdma
