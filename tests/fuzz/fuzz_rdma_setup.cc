// SPDX-License-Identifier: Apache-2.0
// The RDMA setup message arrives from the peer inside the handshake (its length bounded by the
// hello): decode must reject or accept without crashing, and what it accepts must re-encode to
// the same bytes. The same bytes also drive the relay host's chunk account (relay_chunks.h) as
// a hostile connector and a faulty provider would: chunk completions with arbitrary immediates
// on arbitrary QPs, forwards, write completions for arbitrary chunks, arbitrary credit words;
// whatever is accepted must keep the account's invariants.
#include <cstring>

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
  drive_chunks(data, size);
  return 0;
}
