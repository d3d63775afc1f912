// SPDX-License-Identifier: Apache-2.0
// The first bytes on a relayed socket: the connecting side (or the previous relay agent) asks a
// relay agent to carry this socket towards a destination, and the agent answers with one status
// word. Peer-supplied: decode_request() validates every field.
//
// Request layout (kRequestSize = 96 bytes, big-endian):
//   [0] u32 magic 'MSHR'   [4] u8 version (2)   [5] u8 hop limit (relay agents still allowed)
//   [6] u16 stream index (picks among equal-cost next hops)
//   [8] u16 destination handshake port (non-zero)   [10] u8 address count A (1..kMaxRequestAddrs)
//   [11] u8 flags: bit 0 = RDMA (the relay next to the destination forwards the connection's
//        RDMA writes itself: transport/rdma/wire.h 5.); other bits 0
//   [12] u32 origin host id (for the relay's log lines)
//   [16] A x {u32 address, u8 prefix}, zero padding to byte 56
//   [56] u64 time of the request (ms since the Unix epoch)   [64] u64 random (unique per request)
//   [72] 8 B listener tag: which registered listener (relay_listener_tag of its handle's nonce)
//   [80] 16 B proof: HMAC-SHA256 keyed by relay_listener_key(nonce) over bytes [0,80) with the
//        hop limit taken as 0, first 16 bytes
// Reply: 4 bytes 'M','R','P',code (ReplyCode).
//
// Who answers: the relay agent of the destination's own host is the last hop (docs/relay.md,
// threat model). It connects only to a handshake port that a plugin process of its host
// registered (relay/registry.h), and only for a request whose proof verifies with that
// listener's key, whose time is within kProofWindowMs of its clock, and which it has not seen
// before. The key is derived from the listener's handle nonce, which only the ranks that got
// the handle through NCCL's bootstrap know (and the relay hosts that carried its hello), and the
// agent holds only the derived key, never the nonce (so the agent cannot forge a hello). A
// relay in the middle forwards the request (hop limit - 1: outside the proof) and splices, so
// the last hop's answer reaches the origin; any agent answers an error itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/hmac.h"
#include "util/ipv4.h"

namespace mesh::relay {

inline constexpr size_t kRequestSize = 96;
inline constexpr size_t kRelayReplySize = 4;
inline constexpr uint32_t kRequestMagic = 0x4D534852;  // "MSHR"
inline constexpr uint8_t kRequestVersion = 2;          // 2: listener tag and proof
inline constexpr size_t kMaxRequestAddrs = 8;
inline constexpr uint8_t kDefaultHopLimit = 8;
inline constexpr uint8_t kRequestFlagRdma = 0x01;
inline constexpr size_t kListenerTagSize = 8;
inline constexpr size_t kProofSize = 16;
// A request's time must be within this much of the last hop's clock (hosts' clocks agree to
// well within it under NTP; a request is sent at most the connect timeout after it was built).
inline constexpr int64_t kProofWindowMs = 300000;

using ListenerTag = std::array<uint8_t, kListenerTagSize>;

// From the listener's 16-byte handle nonce: the key its relay requests are proved with, and the
// tag that names the listener in a request (both one-way: neither gives back the nonce).
Sha256 relay_listener_key(const uint8_t* nonce, size_t len);
ListenerTag relay_listener_tag(const uint8_t* nonce, size_t len);

struct RelayRequest {
  uint8_t hop_limit = kDefaultHopLimit;
  uint16_t stream = 0;
  uint16_t port = 0;
  uint32_t origin = 0;
  bool rdma = false;             // the connection's data goes over RDMA through this relay
  std::vector<Ipv4Prefix> dest;  // the destination's addresses (from its handle), 1..8
  uint64_t time_ms = 0;          // set by encode_request when 0 (the wall clock)
  uint64_t unique = 0;           // set by encode_request when 0 (random)
  ListenerTag tag{};
  std::array<uint8_t, kProofSize> proof{};  // filled by encode_request / kept by decode
};

// Writes kRequestSize bytes, proved with `key` (relay_listener_key of the handle's nonce).
void encode_request(const RelayRequest& req, const Sha256& key, uint8_t* out);
// Re-encodes a decoded request as a relay in the middle forwards it: only the hop limit changes
// (the proof stays valid, it does not cover the hop limit).
void reencode_request(const uint8_t* in, uint8_t hop_limit, uint8_t* out);
// Structure only: any agent can check it (the proof needs the listener's key, verify_proof).
bool decode_request(const uint8_t* in, RelayRequest* out, std::string* why);
// The proof of request bytes `in` under `key`.
bool verify_proof(const uint8_t* in, const Sha256& key);

enum class ReplyCode : uint8_t {
  kOk = 1,              // connected to the destination's handshake port: the hello comes next
  kNoRoute = 2,         // no path to the destination in this agent's cable graph
  kHopLimit = 3,        // the path is longer than the hop limit allows
  kBusy = 4,            // the agent carries its maximum of relayed sockets
  kMalformed = 5,       // the request failed validation
  kConnectFailed = 6,   // the onward connect (next agent or destination) failed
  kNoRdmaRelay = 7,     // RDMA asked, but this relay host cannot forward RDMA (its agent has
                        // no RDMA forwarder: no usable RDMA port on its mesh interfaces)
  kNotRegistered = 8,   // the destination's host has no plugin listener on that port with tag
  kBadProof = 9,        // the request does not prove it holds the listener's handle (or is
                        // stale or replayed)
  kNoRdmaOnCable = 10,  // RDMA asked; this relay host forwards RDMA, but its own next cable
                        // (to the destination or the next relay host) has no usable RDMA port
};

void encode_relay_reply(ReplyCode code, uint8_t* out);
// False for bytes that are not a relay reply.
bool decode_relay_reply(const uint8_t* in, ReplyCode* out);
const char* relay_reply_text(ReplyCode code);

}  // namespace mesh::relay
