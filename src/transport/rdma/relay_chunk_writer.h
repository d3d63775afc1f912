// SPDX-License-Identifier: Apache-2.0
// The writing side of a relay hop (wire.h 5., docs/relay.md "RDMA relay"), shared by the
// connector (RelaySendConnection) and a middle relay host writing on to the next relay host
// (RelayForward): chunk c goes with one WRITE_WITH_IMM (its length, its tag c mod 64, the last
// flag) on QP c % nqps into the next relay's staging slot c % K, and only once c < credit + K,
// where credit is the count of chunks the next relay has freed (its NIC writes it into our
// credit word). A credit beyond the chunks posted is a protocol violation; a lower one than
// already seen is stale and ignored.
// The arithmetic is pure (unit-tested in tests/unit/relay_forward_test.cc without verbs);
// post_chunk_write() is the one verbs call both writers make.
// Single-threaded: the caller's (NCCL's progress thread under the connection's mutex, or the
// forwarder's thread).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/rdma/wire.h"

namespace mesh::rdma {

class QueuePair;

class RelayChunkWriter {
 public:
  RelayChunkWriter() = default;
  // `relay`: the next relay's decoded answer (relay flag, K and S in range: decode_setup and
  // RdmaTransport::connect_relay_sender check them).
  explicit RelayChunkWriter(const SetupMessage& relay);

  uint32_t slots() const { return slots_; }
  uint32_t slot_bytes() const { return slot_bytes_; }
  uint64_t posted() const { return posted_; }
  uint64_t credit() const { return credit_seen_; }

  // The credit word's value: false for a count beyond the chunks posted (a protocol
  // violation); a stale (lower) count leaves the credit as is.
  bool take_credit(uint64_t credit) { return accept_credit(credit, posted_, &credit_seen_); }
  // Whether the next chunk has a free slot at the next relay.
  bool may_post() const { return slots_ > 0 && posted_ < credit_seen_ + slots_; }

  // Where the next chunk (number posted()) goes over `nqps` QPs, and its immediate.
  struct Write {
    uint64_t chunk = 0;
    size_t qp = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint32_t imm = 0;  // host order: chunk_imm(length, last, chunk)
  };
  Write next(size_t nqps, uint32_t length, bool last) const;
  void posted_one() { ++posted_; }

 private:
  uint64_t staging_addr_ = 0;
  std::array<uint32_t, kMaxQps> rkey_{};
  uint32_t slots_ = 0;
  uint32_t slot_bytes_ = 0;
  uint64_t posted_ = 0;       // chunks written so far (the next chunk's number)
  uint64_t credit_seen_ = 0;  // the highest credit word value seen
};

// The credit word (little-endian u64) the next relay's NIC writes into our registered memory.
uint64_t read_credit_word(const uint8_t* word);

// Posts `w` on `qp` (signalled, wr_id `wr_id`) with `length` bytes from local address `addr`
// (registered with `lkey`); inline only when `inline_ok` (host memory the CPU may read).
// False with *why when the post fails.
bool post_chunk_write(QueuePair& qp, const RelayChunkWriter::Write& w, uint64_t addr,
                      uint32_t length, uint32_t lkey, uint64_t wr_id, bool inline_ok,
                      std::string* why);

}  // namespace mesh::rdma
