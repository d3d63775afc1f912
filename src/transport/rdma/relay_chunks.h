// SPDX-License-Identifier: Apache-2.0
// The relay host's account of one forward's staging slots (docs/relay.md, "RDMA relay"): which
// chunk each slot holds, in which state, which chunk goes on next, how many slots are free again
// (the credit), and whether the messages held are complete. Pure bookkeeping, no verbs: every
// input from the network (a chunk's immediate, the QP it arrived on) is checked here, so the
// unit tests drive it with hostile and impossible input (tests/unit/relay_forward_test.cc).
//
// Chunk c of the connection arrives on up QP c % nqps into slot c % K; each QP completes in
// order, so the relay counts arrivals per QP to know c, and the chunk's tag (c mod 64, in its
// immediate) must agree: a duplicated or lost completion is a mismatch, never a shifted stream.
// Slots: empty -> arrived (its WRITE_WITH_IMM completed) -> forwarding (the onward WRITE is
// posted) -> empty once that WRITE completed; a zero-length chunk needs no onward WRITE.
// The freed count (chunks whose slots are empty again, in chunk order) is the connector's credit.
//
// Single-threaded: the forwarder's thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/rdma/wire.h"

namespace mesh::rdma {

class RelayChunks {
 public:
  RelayChunks(uint32_t slots, uint32_t slot_bytes, size_t nqps);

  // A WRITE_WITH_IMM with immediate `imm` completed on up QP `q`. False with *why when it is not
  // a chunk the connector may write now (tag mismatch, no free slot, too long, bad QP index).
  bool arrived(size_t q, uint32_t imm, std::string* why);

  // The next chunk in order, when it has arrived (nullptr-free: false when it has not).
  struct Next {
    uint64_t chunk = 0;
    size_t slot = 0;
    uint32_t length = 0;
    bool last = false;
  };
  bool next(Next* out) const;
  // The next chunk goes on: with an onward WRITE in flight (`writing`) or none (empty chunk,
  // or bytes the destination has no room for).
  void forwarded(bool writing);
  // The onward WRITE of `chunk` completed. False with *why when no such write is in flight.
  bool written(uint64_t chunk, std::string* why);

  // Advances and returns the freed count: chunks whose slots are free again, in order.
  uint64_t freed();
  uint64_t next_chunk() const { return next_fwd_; }
  uint64_t arrivals() const;  // chunks arrived over the connection's life
  size_t writing() const;     // onward WRITEs in flight

  // After the connector left: whether the chunks from the next one on hold a complete message
  // (its last chunk arrived, every chunk before it too), i.e. something still to deliver.
  bool holds_complete_message() const;
  // Whether any chunk is held (arrived and not forwarded): a partial message once nothing
  // complete is left.
  bool holds_any() const;

 private:
  enum class Slot : uint8_t { kEmpty, kArrived, kForwarding };

  const uint32_t slots_;
  const uint32_t slot_bytes_;
  const size_t nqps_;
  std::vector<Slot> slot_;
  std::vector<uint32_t> len_;
  std::vector<uint8_t> last_;
  std::array<uint64_t, kMaxQps> count_{};  // arrivals per up QP
  uint64_t next_fwd_ = 0;                  // the next chunk to forward
  uint64_t freed_ = 0;                     // chunks whose slot is free again, in order
};

}  // namespace mesh::rdma
