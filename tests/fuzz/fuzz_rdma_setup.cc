// SPDX-License-Identifier: Apache-2.0
// The RDMA setup message arrives from the peer inside the handshake (its length bounded by the
// hello): decode must reject or accept without crashing, and what it accepts must re-encode to
// the same bytes. The same bytes also drive the relay host's chunk account (relay_chunks.h) as
// a hostile connector and a faulty provider would: chunk completions with arbitrary immediates
// on arbitrary QPs, forwards, write completions for arbitrary chunks, arbitrary credit words;
// whatever is accepted must keep the account's invariants. A middle hop of a chain is driven
// too: what it forwards into the next relay host's slots (relay_chunk_writer.h, as far as that
// relay's credits allow) must be accepted there, tags and all. And a relay's answer
// (decode_relay_answer) accepted from any bytes must place every chunk inside its ring.
#include <cstring>

#include "transport/rdma/relay_chunk_writer.h"
#include "transport/rdma/relay_chunks.h"
#include "transport/rdma/wire.h"

namespace {

void drive_chunks(const uint8_t* data, size_t size) {
  using namespace mesh::rdma;
  if (size < 2) return;
  const uint32_t slots = 1 + data[0] % kMaxRelaySlots;
  const size_t nqps = 1 + data[1] % kMaxQps;
  constexpr uint32_t kSlotBytes = 4096;
  RelayChunks r(slots, kSlotBytes, nqps);
  // The next relay host of a middle hop: its own K and QP count.
  const uint32_t next_slots = 1 + (data[0] >> 2) % kMaxRelaySlots;
  const size_t next_qps = 1 + (data[1] >> 3) % kMaxQps;
  RelayChunks next(next_slots, kSlotBytes, next_qps);
  SetupMessage answer;
  answer.relay = true;
  answer.ring_addr = 1u << 20;
  answer.relay_slots = next_slots;
  answer.relay_slot_bytes = kSlotBytes;
  answer.qps.resize(next_qps);
  RelayChunkWriter onward(answer);
  uint64_t credit_seen = 0;
  std::string why;
  for (size_t at = 2; at + 5 <= size; at += 5) {
    uint32_t word;
    std::memcpy(&word, data + at + 1, sizeof(word));
    const uint8_t op = data[at];
    switch (op % 4) {
      case 0:  // a chunk completion on QP op/4 (possibly beyond the connection's QPs)
        (void)r.arrived((op >> 2) % (kMaxQps + 2), word, &why);
        break;
      case 1: {  // forward the next chunk, if it arrived
        RelayChunks::Next n;
        if (r.next(&n)) {
          if (n.length > kSlotBytes || n.slot >= slots || n.chunk != r.next_chunk())
            __builtin_trap();
          if ((op & 8) != 0 && onward.posted() == n.chunk) {
            // A middle hop: on into the next relay host's slots while its credits allow. The
            // next hop accepts exactly what the middle hop took from a well-checked slot.
            if (!onward.take_credit(next.freed())) __builtin_trap();
            if (!onward.may_post()) break;
            const RelayChunkWriter::Write w = onward.next(next_qps, n.length, n.last);
            if (w.chunk != n.chunk || !next.arrived(w.qp, w.imm, &why)) __builtin_trap();
            onward.posted_one();
            r.forwarded(true);
            RelayChunks::Next m;
            if ((op & 16) != 0 && next.next(&m)) {  // the next hop delivers and completes it
              next.forwarded(true);
              if (!next.written(m.chunk, &why)) __builtin_trap();
            }
            break;
          }
          r.forwarded((op & 4) != 0 && n.length > 0);
        }
        break;
      }
      case 2:  // a write completion for any chunk
        (void)r.written(word, &why);
        break;
      case 3: {  // the connector reads a credit word
        const uint64_t posted = r.arrivals();
        const uint64_t before = credit_seen;
        if (accept_credit(word, posted, &credit_seen) != (word <= posted)) __builtin_trap();
        if (credit_seen < before || credit_seen > posted) __builtin_trap();
        break;
      }
    }
    const uint64_t freed = r.freed();
    if (freed > r.next_chunk() || r.next_chunk() > r.arrivals() || r.writing() > slots ||
        r.arrivals() > freed + slots)
      __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mesh::rdma;
  SetupMessage m;
  std::string why;
  if (decode_setup(data, size, &m, &why)) {
    if (m.qps.empty() || m.qps.size() > kMaxQps) __builtin_trap();
    const auto again = encode_setup(m);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) __builtin_trap();
  }
  // Peer-written clear-to-send entries are decoded from any 64 bytes.
  if (size >= kCtsEntrySize) {
    const CtsEntry e = decode_cts_entry(data);
    uint8_t again[kCtsEntrySize];
    encode_cts_entry(e, again);
    (void)again;
  }
  SetupMessage a;
  if (decode_relay_answer(data, size, &a, &why)) {
    if (!a.relay || a.relay_slots < 1 || a.relay_slots > kMaxRelaySlots ||
        a.relay_slot_bytes > kMaxRelaySlotBytes || a.ring_addr == 0)
      __builtin_trap();
    RelayChunkWriter w(a);
    const uint64_t ring = static_cast<uint64_t>(a.relay_slots) * a.relay_slot_bytes;
    for (uint64_t c = 0; a.ring_addr <= ~0ull - ring && c < 2 * a.relay_slots && w.may_post();
         ++c) {
      const RelayChunkWriter::Write x = w.next(a.qps.size(), a.relay_slot_bytes, false);
      if (x.qp >= a.qps.size() || x.remote_addr < a.ring_addr ||
          x.remote_addr + a.relay_slot_bytes >
              a.ring_addr + static_cast<uint64_t>(a.relay_slots) * a.relay_slot_bytes)
        __builtin_trap();
      w.posted_one();
    }
  }
  drive_chunks(data, size);
  return 0;
}
