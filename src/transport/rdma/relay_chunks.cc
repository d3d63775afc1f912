// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/relay_chunks.h"

#include <algorithm>

namespace mesh::rdma {

RelayChunks::RelayChunks(uint32_t slots, uint32_t slot_bytes, size_t nqps)
    : slots_(std::max<uint32_t>(slots, 1)),
      slot_bytes_(slot_bytes),
      nqps_(std::clamp<size_t>(nqps, 1, kMaxQps)),
      slot_(slots_, Slot::kEmpty),
      len_(slots_, 0),
      last_(slots_, 0) {}

bool RelayChunks::arrived(size_t q, uint32_t imm, std::string* why) {
  if (q >= nqps_) {
    *why = "a chunk on QP " + std::to_string(q) + " of " + std::to_string(nqps_);
    return false;
  }
  // Chunk c travels on QP c % nqps, and each QP completes in order.
  const uint64_t chunk = q + nqps_ * count_[q];
  const ChunkImm c = decode_chunk_imm(imm);
  if (c.tag != chunk_tag(chunk)) {
    *why = "chunk tag mismatch on up QP " + std::to_string(q) + ": expected chunk " +
           std::to_string(chunk) + " (tag " + std::to_string(chunk_tag(chunk)) + "), got tag " +
           std::to_string(c.tag) +
           " (a duplicated or lost completion: a provider fault, or a protocol violation)";
    return false;
  }
  const size_t slot = chunk % slots_;
  if (chunk < next_fwd_ || chunk >= freed_ + slots_ || slot_[slot] != Slot::kEmpty) {
    *why = "the connector wrote chunk " + std::to_string(chunk) + " without a free slot (" +
           std::to_string(freed_) + " freed of " + std::to_string(slots_) + "; protocol violation)";
    return false;
  }
  if (c.length > slot_bytes_) {
    *why = "the connector's chunk " + std::to_string(chunk) + " claims " +
           std::to_string(c.length) + " bytes in a slot of " + std::to_string(slot_bytes_);
    return false;
  }
  ++count_[q];
  slot_[slot] = Slot::kArrived;
  len_[slot] = c.length;
  last_[slot] = c.last ? 1 : 0;
  return true;
}

bool RelayChunks::next(Next* out) const {
  const size_t slot = next_fwd_ % slots_;
  if (slot_[slot] != Slot::kArrived) return false;
  out->chunk = next_fwd_;
  out->slot = slot;
  out->length = len_[slot];
  out->last = last_[slot] != 0;
  return true;
}

void RelayChunks::forwarded(bool writing) {
  slot_[next_fwd_ % slots_] = writing ? Slot::kForwarding : Slot::kEmpty;
  ++next_fwd_;
}

bool RelayChunks::written(uint64_t chunk, std::string* why) {
  const size_t slot = chunk % slots_;
  if (chunk < freed_ || chunk >= next_fwd_ || slot_[slot] != Slot::kForwarding) {
    *why = "completion for chunk " + std::to_string(chunk) + " that is not in flight";
    return false;
  }
  slot_[slot] = Slot::kEmpty;
  return true;
}

uint64_t RelayChunks::freed() {
  while (freed_ < next_fwd_ && slot_[freed_ % slots_] == Slot::kEmpty) ++freed_;
  return freed_;
}

uint64_t RelayChunks::arrivals() const {
  uint64_t n = 0;
  for (size_t q = 0; q < nqps_; ++q) n += count_[q];
  return n;
}

size_t RelayChunks::writing() const {
  return static_cast<size_t>(std::count(slot_.begin(), slot_.end(), Slot::kForwarding));
}

bool RelayChunks::holds_complete_message() const {
  for (uint64_t c = next_fwd_; c < next_fwd_ + slots_; ++c) {
    const size_t slot = c % slots_;
    if (slot_[slot] != Slot::kArrived) return false;
    if (last_[slot] != 0) return true;
  }
  return false;
}

bool RelayChunks::holds_any() const {
  return std::count(slot_.begin(), slot_.end(), Slot::kArrived) > 0;
}

}  // namespace mesh::rdma
