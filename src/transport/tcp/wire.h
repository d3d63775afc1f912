// SPDX-License-Identifier: Apache-2.0
// The per-message header on a TCP connection's control socket (16 bytes, big-endian):
//   [0] u32 sequence number (0, 1, 2, ... per connection: detects a desynchronised stream)
//   [4] u16 flags (kInline: the payload follows the header on the control socket)
//   [6] u16 number of parts on the data sockets (0 when inline)
//   [8] u64 message size in bytes
// It is peer-supplied: the receiver checks the sequence, the flags, the part count against its
// data sockets and the size against the posted buffer before touching memory.
//
// Clear-to-send, receiver -> sender on the same control socket (16 bytes, big-endian), one per
// posted receive, in order:
//   [0] u32 sequence number of the receive   [4] u32 reserved (0)   [8] u64 buffer capacity
// The sender moves a message's bytes only after its clear-to-send arrived, except eager messages
// (tcp_connection.cc: at most NCCL_MESH_TCP_EAGER_BYTES and one request window ahead, which the
// receiver's socket buffer holds). Without it a late receiver (a rank busy computing) leaves the
// sender's data parked in a zero TCP window, and Linux aborts such a connection after
// TCP_USER_TIMEOUT even though the peer is alive.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mesh::tcp {

inline constexpr size_t kHeaderSize = 16;
inline constexpr uint16_t kFlagInline = 0x1;

struct MessageHeader {
  uint32_t seq = 0;
  uint16_t flags = 0;
  uint16_t nparts = 0;
  uint64_t size = 0;
};

void encode_header(const MessageHeader& h, uint8_t* out);
MessageHeader decode_header(const uint8_t* in);

inline constexpr size_t kCtsSize = 16;

struct ClearToSend {
  uint32_t seq = 0;
  uint32_t reserved = 0;
  uint64_t capacity = 0;
};

void encode_cts(const ClearToSend& c, uint8_t* out);
ClearToSend decode_cts(const uint8_t* in);

}  // namespace mesh::tcp
