// SPDX-License-Identifier: Apache-2.0
// The GIN message format: what one rank's GIN engine sends another over the ordered message
// stream of a net connection (transport/connection.h: TCP, RDMA or relayed). Every message is a
// 64-byte header followed by at most kMaxChunk payload bytes; a put larger than that travels as
// several messages. It is peer-supplied data: decode_header() validates every field and the
// caller then checks the references (registration ids, offsets, contexts) against its own state.
//
// Header, big-endian (util/byte_order.h), 64 bytes:
//   [0]  u32 magic 'G','I','N','1'
//   [4]  u8  kind (Kind)
//   [5]  u8  flags (kLast: the op's last message; kSignal: apply the signal after the data)
//   [6]  u16 context (GIN context of the op; the receiver bounds it)
//   [8]  u32 reg: kPut: destination registration id; kGetRequest: source registration id
//   [12] u32 signal_reg: kPut with kSignal: registration id of the signal word, else 0
//   [16] u64 offset: kPut: destination offset of this chunk; kGetRequest: source offset;
//                    kGetReply: offset of this chunk inside the get
//   [24] u64 length: kPut, kGetReply: payload bytes of this message; kGetRequest: get size
//   [32] u64 signal_offset (kSignal only, 8-aligned)
//   [40] u64 signal_value (kSignal with kSignalAdd; 1 for kSignalInc)
//   [48] u32 signal_op (kSignalInc=1, kSignalAdd=2; 0 without kSignal)
//   [52] u32 get_id: kGetRequest/kGetReply: the requester's id of the get, else 0
//   [56] u64 seq: messages of one direction of one peer pair, from 0, +1 per message
// A kBye carries only magic, kind, kLast and seq (every other field zero).
// A kRegKey (one-sided peers only, one_sided.h) carries kLast, reg = the sender's registration
// id, length = kRegKeySize and seq; its payload is the registration's RDMA address:
//   [0] u64 address  [8] u64 size  [16] u32 rkey  [20] u32 zero
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mesh::gin {

inline constexpr size_t kHeaderSize = 64;
inline constexpr uint32_t kMagic = 0x47494E31;  // "GIN1"
inline constexpr size_t kMaxChunk = 256 * 1024;
inline constexpr size_t kSlotSize = kHeaderSize + kMaxChunk;
inline constexpr uint32_t kMaxContexts = 64;  // contexts one comm accepts (NCCL uses <= 4 x 4)
inline constexpr uint64_t kMaxOpBytes = 1ULL << 30;  // NCCL's MAX_GIN_SIZE

// kBye: the sender's comm is closing; nothing follows it on this stream (header only).
// kRegKey: where a registration is for RDMA (one-sided peers only).
enum class Kind : uint8_t { kPut = 1, kGetRequest = 2, kGetReply = 3, kBye = 4, kRegKey = 5 };
inline constexpr uint8_t kFlagLast = 1;
inline constexpr uint8_t kFlagSignal = 2;
inline constexpr uint32_t kSignalInc = 1;  // NCCL_GIN_SIGNAL_OP_INC
inline constexpr uint32_t kSignalAdd = 2;  // NCCL_GIN_SIGNAL_OP_ADD

struct Header {
  Kind kind = Kind::kPut;
  uint8_t flags = 0;
  uint16_t context = 0;
  uint32_t reg = 0;
  uint32_t signal_reg = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t signal_offset = 0;
  uint64_t signal_value = 0;
  uint32_t signal_op = 0;
  uint32_t get_id = 0;
  uint64_t seq = 0;
};

void encode_header(const Header& h, uint8_t* out);
// Checks everything a header can say about itself: magic, kind, flags (kSignal only on the last
// message of a put), signal fields zero without kSignal, a known signal op, an 8-aligned signal
// offset, length <= kMaxChunk for data messages and <= kMaxOpBytes for a get request, zero
// fields a kind does not use, context < kMaxContexts, and that `payload` (the bytes after the
// header) equals the length a data message announces. False with *why otherwise.
bool decode_header(const uint8_t* in, size_t message_size, Header* out, std::string* why);

// The connect-time greeting each rank sends on its send comm to every peer: who it is.
// [0] u32 magic 'G','I','N','C'  [4] u32 rank  [8] u32 nranks  [12] u32 zero  [16] u64 comm id
inline constexpr size_t kGreetingSize = 24;
inline constexpr uint32_t kGreetingMagic = 0x47494E43;  // "GINC"
struct Greeting {
  uint32_t rank = 0;
  uint32_t nranks = 0;
  uint64_t comm_id = 0;
};
void encode_greeting(const Greeting& g, uint8_t* out);
bool decode_greeting(const uint8_t* in, size_t size, Greeting* out, std::string* why);

// kRegKey's payload.
inline constexpr size_t kRegKeySize = 24;
struct RegKey {
  uint64_t addr = 0;
  uint64_t size = 0;
  uint32_t rkey = 0;
};
void encode_reg_key(const RegKey& k, uint8_t* out);
// Refuses a nonzero reserved word and a range that wraps the address space.
bool decode_reg_key(const uint8_t* in, size_t size, RegKey* out, std::string* why);

// How far past this rank's next registration id a peer's kRegKey may name (registration is
// collective, so a peer runs ahead of us by the registrations it made first, not by millions):
// with the keys of deregistered ids erased, a peer's stored keys stay bounded.
inline constexpr uint32_t kRegKeyLookahead = 1024;
// A kRegKey for registration `id`, given this rank's next id and whether `id` is live here:
// 1 store it, 0 ignore it (deregistered here already; its key was still on the way), -1 refuse
// (id 0, or more than kRegKeyLookahead ahead: a hostile or broken peer).
inline int reg_key_verdict(uint32_t id, uint32_t next_id, bool live) {
  if (id == 0 || (id >= next_id && id - next_id >= kRegKeyLookahead)) return -1;
  return id >= next_id || live ? 1 : 0;
}

// The RDMA hello (connect, after the greeting; outside the message sequence): each rank tells
// every peer whether it opened a QP for the one-sided path (phase 1, with that QP's numbers) and
// then that the QP is ready to receive (phase 2). A pair goes one-sided only when both offered.
//   [0] u32 magic 'G','I','N','R'  [4] u8 phase (1 setup, 2 ready)  [5] u8 offer (0/1)
//   [6] u16 zero  [8] u32 length of the setup message that follows (phase 1 with offer 1: an
//   RDMA setup message, transport/rdma/wire.h, with exactly one QP and no relay; else 0)
//   [12] u32 zero
inline constexpr uint32_t kRdmaHelloMagic = 0x47494E52;  // "GINR"
inline constexpr size_t kRdmaHelloHeader = 16;
struct RdmaHello {
  uint8_t phase = 1;
  bool offer = false;
  std::vector<uint8_t> setup;  // encoded setup message (phase 1 with offer)
};
std::vector<uint8_t> encode_rdma_hello(const RdmaHello& h);
// Validates the frame and, for an offer, the setup message (decode_setup, one QP, no relay).
bool decode_rdma_hello(const uint8_t* in, size_t size, RdmaHello* out, std::string* why);

}  // namespace mesh::gin
