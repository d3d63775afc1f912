// SPDX-License-Identifier: Apache-2.0
// What two RDMA endpoints tell each other, and the arithmetic both sides must agree on.
//
// 1. Setup message (handshake extension, big-endian). The connector (always the sender: NCCL's
//    connect() returns the send comm) appends it to its control-socket hello; the listener's
//    handshake service answers with its own after the 4-byte reply (handshake/hello.h).
//      [0] u32 magic 'MSRD'   [4] u8 version   [5] u8 number of QPs (1..kMaxQps)
//      [6] u8 flags: bit 0 = [7] holds a traffic class (the connector's, from NCCL's comm config:
//          the listener applies it to its QPs too, as NCCL's IB transport does); bit 1 = relay
//          hop (5. below: the message ends with the 8-byte relay trailer); other bits 0
//      [7] u8 traffic class (0 without the flag)
//      [8] u64 clear-to-send ring address (sender; 0 from the receiver)
//      [16] nqps x 40-byte QP entries:
//        [0] u32 QP number (24 bits)   [4] u32 initial PSN (24 bits)   [8] u8[16] GID
//        [24] u16 LID (InfiniBand; 0 on RoCE)   [26] u8 path MTU (verbs enum 1..5)
//        [27] u8 reserved (0)   [28] u32 local IPv4 address of this QP's cable
//        [32] u32 peer IPv4 address on that cable   [36] u32 ring rkey (sender; 0 from receiver)
//    Both sides check every field; the listener maps "peer IPv4 address" to its own RDMA port.
//    Version 2 added the traffic class and the ready byte (4.), so version 1 peers are refused;
//    version 3 added the chunk tag of a relay hop's immediate (5.).
//
// 2. Clear-to-send ring: NCCL_NET_MAX_REQUESTS entries of kCtsEntrySize bytes in the sender's
//    registered memory. For every posted receive the receiver RDMA-WRITEs (inline) one entry
//    into slot seq % NCCL_NET_MAX_REQUESTS, little-endian:
//      [0] u64 buffer address   [8] u64 buffer capacity   [16] u32 rkey per QP (kMaxQps)
//      [48] u32 reserved (0)    [52] u32 reserved (0)     [56] u32 reserved (0)
//      [60] u32 sequence + 1 (written in the same WRITE; the sender reads it last)
//    A sender's isend returns "retry" (NULL) until the entry for its sequence is there.
//
// 3. Data: the message is split into 128-byte-aligned slices by the sender's actual size
//    (split()); QP q writes slice q with one RDMA WRITE_WITH_IMM into the announced buffer; every
//    QP posts exactly one per message (a zero-length one when its slice is empty), so each QP's
//    completions arrive in message order on both sides. The immediate is the message size.
//
// 4. Ready: after the handshake the connector moves its QPs to RTR/RTS, then writes one byte
//    'R' on the control socket. The listener's accept() returns the receive comm only once it
//    has read it, so its first clear-to-send never reaches a QP still in INIT (which would drop
//    it and wait for the ACK timeout, or fail the QP when the connector comes back late).
//    Nothing else is ever written on the control socket: any other byte is a protocol error.
//
// 5. Relay hop (docs/relay.md, "RDMA relay"): between a connector and the relay host that
//    forwards its connection to a peer it has no cable to. Both setup messages carry flag bit 1
//    and end with an 8-byte trailer: [0] u32 staging slots K   [4] u32 slot size S (bytes).
//    The connector sends K = S = 0 and, in the ring fields, its credit word (u64, LE, in its
//    registered memory: the number of chunks the relay has freed). The relay answers with its
//    staging ring (ring address, per-QP ring rkey) and K (1..kMaxRelaySlots) and S (a multiple
//    of 4096 in [kMinRelaySlotBytes, kMaxRelaySlotBytes]). The connector cuts every message
//    into chunks of at most S bytes (one chunk for an empty message); chunk c (counted over the
//    connection's life) goes with one WRITE_WITH_IMM on QP c % nqps into slot c % K, and only
//    once c < credit + K. Its immediate: bit 31 = last chunk of its message, bits 25..30 = the
//    chunk's number c mod 64 (its tag), bits 0..24 = the chunk's length (S <= 2^24). The relay
//    checks every chunk's tag against the number it counts for that QP, so a duplicated or lost
//    completion (a provider fault) fails the connection instead of shifting the stream. The
//    relay forwards chunks in order to the destination with the ordinary
//    protocol (2., 3.; plain RDMA WRITEs from the slot, then one zero-length WRITE_WITH_IMM
//    per QP carrying the message size) and advances the credit word with an RDMA WRITE once a
//    slot's onward write completed. No CPU touches the payload on the relay host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mesh::rdma {

inline constexpr uint32_t kSetupMagic = 0x4D535244;  // "MSRD"
inline constexpr uint8_t kSetupVersion = 3;
inline constexpr uint8_t kSetupFlagTrafficClass = 0x01;
inline constexpr uint8_t kSetupFlagRelay = 0x02;
inline constexpr size_t kRelayTrailerSize = 8;
inline constexpr uint32_t kMaxRelaySlots = 64;
inline constexpr uint32_t kMinRelaySlotBytes = 4096;
inline constexpr uint32_t kMaxRelaySlotBytes = 16u << 20;
inline constexpr uint32_t kChunkLastFlag = 0x80000000u;
inline constexpr uint32_t kChunkTagShift = 25;
inline constexpr uint32_t kChunkTagMask = 0x3Fu;  // chunk number mod 64
inline constexpr uint32_t kChunkLengthMask = (1u << kChunkTagShift) - 1;
static_assert(kMaxRelaySlotBytes <= kChunkLengthMask, "a slot's length must fit the immediate");
inline constexpr size_t kMaxQps = 8;
inline constexpr size_t kSetupHeaderSize = 16;
inline constexpr size_t kQpEntrySize = 40;
inline constexpr size_t kMaxSetupSize =
    kSetupHeaderSize + kMaxQps * kQpEntrySize + kRelayTrailerSize;
inline constexpr size_t kCtsEntrySize = 64;
inline constexpr size_t kSliceAlign = 128;
// The immediate carries the message size: larger sends are refused (NCCL's test() reports int
// sizes anyway, so NCCL never posts one).
inline constexpr uint64_t kMaxMessageSize = 0xFFFFFFFFull;

struct QpInfo {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint8_t gid[16] = {};
  uint16_t lid = 0;
  uint8_t mtu = 0;  // ibv_mtu: 1 = 256 ... 5 = 4096
  uint32_t local_addr = 0;
  uint32_t peer_addr = 0;
  uint32_t ring_rkey = 0;
};

struct SetupMessage {
  int traffic_class = -1;  // -1: none (the connector's comm config set none)
  uint64_t ring_addr = 0;
  std::vector<QpInfo> qps;
  bool relay = false;        // a relay hop (5.): the fields below are on the wire
  uint32_t relay_slots = 0;  // the relay's answer: K staging slots of relay_slot_bytes each
  uint32_t relay_slot_bytes = 0;
};

std::vector<uint8_t> encode_setup(const SetupMessage& m);
// Validates magic, version, QP count, reserved bytes, QPN/PSN ranges, MTU enum and length, and
// a relay trailer: zeros from a connector, K and S in range from a relay (which one is
// expected is the caller's check: relay_slots == 0 means a connector's message).
bool decode_setup(const uint8_t* data, size_t len, SetupMessage* out, std::string* why);

// A relay's answer to a relay-hop setup (5.): decode_setup plus the relay flag and a staging
// ring (K >= 1); a connector's trailer (K = S = 0) or a plain setup is refused with *why.
// Read by the connector and by a middle relay host from the next relay host.
bool decode_relay_answer(const uint8_t* data, size_t len, SetupMessage* out, std::string* why);

struct CtsEntry {
  uint64_t addr = 0;
  uint64_t capacity = 0;
  uint32_t rkeys[kMaxQps] = {};
  uint32_t seq_plus_one = 0;
};

void encode_cts_entry(const CtsEntry& e, uint8_t* out);  // kCtsEntrySize bytes
CtsEntry decode_cts_entry(const uint8_t* in);

struct Slice {
  size_t offset = 0;
  size_t length = 0;
};

// Slice q of a `size`-byte message over `nqps` QPs: equal 128-byte-aligned pieces, the last one
// takes the remainder; trailing slices are empty when the message is small.
// Why the share is rounded *up* (tcp::part_range rounds down): every QP posts exactly one
// WRITE_WITH_IMM per message, empty or not (the receiver counts one completion per QP), so an
// empty trailing slice costs nothing, while rounding up bounds every slice by the share: no QP
// carries more than its fair part plus alignment. Wire contract (point 3 above): the slices
// are where the sender's bytes land in the receiver's buffer; keep it as it is.
Slice split(size_t size, size_t nqps, size_t q);

// A relay-hop chunk's immediate (5.): its length (<= kMaxRelaySlotBytes), its number's tag and
// whether it ends its message.
inline uint32_t chunk_imm(uint32_t length, bool last, uint64_t chunk) {
  return (length & kChunkLengthMask) |
         (static_cast<uint32_t>(chunk & kChunkTagMask) << kChunkTagShift) |
         (last ? kChunkLastFlag : 0);
}
struct ChunkImm {
  uint32_t length = 0;
  uint32_t tag = 0;
  bool last = false;
};
inline ChunkImm decode_chunk_imm(uint32_t imm) {
  return {imm & kChunkLengthMask, (imm >> kChunkTagShift) & kChunkTagMask,
          (imm & kChunkLastFlag) != 0};
}
inline uint32_t chunk_tag(uint64_t chunk) {
  return static_cast<uint32_t>(chunk & kChunkTagMask);
}

// The connector's view of the relay's credit word (5.): false for a count beyond the chunks it
// posted (a protocol violation); a count below the one seen is stale and leaves *seen as is.
inline bool accept_credit(uint64_t credit, uint64_t posted, uint64_t* seen) {
  if (credit > posted) return false;
  if (credit > *seen) *seen = credit;
  return true;
}

}  // namespace mesh::rdma
