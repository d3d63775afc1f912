// SPDX-License-Identifier: Apache-2.0
// The first bytes on a relayed socket: the connecting side (or the previous relay agent) asks a
// relay agent to carry this socket towards a destination, and the agent answers with one status
// word. Peer-supplied: decode_request() validates every field.
//
// Request layout (kRequestSize = 64 bytes, big-endian):
//   [0] u32 magic 'MSHR'   [4] u8 version   [5] u8 hop limit (relay agents still allowed)
//   [6] u16 stream index (picks among equal-cost next hops)
//   [8] u16 destination handshake port (non-zero)   [10] u8 address count A (1..kMaxRequestAddrs)
//   [11] u8 flags: bit 0 = RDMA (the relay next to the destination forwards the connection's
//        RDMA writes itself: transport/rdma/wire.h 5.); other bits 0
//   [12] u32 origin host id (for the relay's log lines)
//   [16] A x {u32 address, u8 prefix}, zero padding to byte 56
//   [56] u32 reserved (0)  [60] u32 FNV-1a checksum of bytes [0,60)
// Reply: 4 bytes 'M','R','P',code (ReplyCode). Only the agent that connects to the destination's
// handshake port answers kOk; an agent in the middle forwards the request (hop limit - 1) and
// splices, so its successor's answer reaches the origin; any agent answers an error itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/ipv4.h"

namespace mesh::relay {

inline constexpr size_t kRequestSize = 64;
inline constexpr size_t kRelayReplySize = 4;
inline constexpr uint32_t kRequestMagic = 0x4D534852;  // "MSHR"
inline constexpr uint8_t kRequestVersion = 1;
inline constexpr size_t kMaxRequestAddrs = 8;
inline constexpr uint8_t kDefaultHopLimit = 8;
inline constexpr uint8_t kRequestFlagRdma = 0x01;

struct RelayRequest {
  uint8_t hop_limit = kDefaultHopLimit;
  uint16_t stream = 0;
  uint16_t port = 0;
  uint32_t origin = 0;
  bool rdma = false;             // the connection's data goes over RDMA through this relay
  std::vector<Ipv4Prefix> dest;  // the destination's addresses (from its handle), 1..8
};

enum class ReplyCode : uint8_t {
  kOk = 1,             // connected to the destination's handshake port: the hello comes next
  kNoRoute = 2,        // no path to the destination in this agent's cable graph
  kHopLimit = 3,       // the path is longer than the hop limit allows
  kBusy = 4,           // the agent carries its maximum of relayed sockets
  kMalformed = 5,      // the request failed validation
  kConnectFailed = 6,  // the onward connect (next agent or destination) failed
  kNoRdmaRelay = 7,    // RDMA asked, but this agent is not next to the destination or cannot
                       // forward RDMA (no usable RDMA port on both cables)
};

void encode_request(const RelayRequest& req, uint8_t* out);
bool decode_request(const uint8_t* in, RelayRequest* out, std::string* why);

void encode_relay_reply(ReplyCode code, uint8_t* out);
// False for bytes that are not a relay reply.
bool decode_relay_reply(const uint8_t* in, ReplyCode* out);
const char* relay_reply_text(ReplyCode code);

}  // namespace mesh::relay
