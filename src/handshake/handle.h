// SPDX-License-Identifier: Apache-2.0
// The 128-byte connection handle that NCCL ships from the listening rank to the connecting rank
// through its bootstrap. It is peer-supplied data: decode() validates every field.
//
// Wire layout (all multi-byte integers big-endian, total kHandleSize = 128 bytes):
//   [0]  u32  magic  'M','S','H','1'
//   [4]  u8   protocol version (kHandleVersion)
//   [5]  u8   number of addresses N (1..kMaxHandleAddrs)
//   [6]  u16  handshake TCP port (non-zero)
//   [8]  u8[16] nonce: random per listen; the listener refuses a handshake that does not present it
//   [24] u32  checksum: FNV-1a over bytes [0,24) and [28,128)
//   [28] u32  RDMA mask: bit i set = address i has a usable RDMA port (RoCE v2 GID or IB);
//             bits at or above N must be 0
//   [32] u8[8] the listener's agreement: the settings every host must share (agreement.h)
//   [40] N x { u32 IPv4 address, u8 prefix length (0..32) }, then zero padding to 128 bytes
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "handshake/agreement.h"
#include "util/fnv1a.h"  // the handle checksum (and hello.h's)
#include "util/ipv4.h"

namespace mesh::handshake {

inline constexpr size_t kHandleSize = 128;
inline constexpr size_t kNonceSize = 16;
inline constexpr uint32_t kHandleMagic = 0x4D534831;  // "MSH1"
inline constexpr uint8_t kHandleVersion = 3;          // 2: RDMA mask; 3: agreement
inline constexpr size_t kHandleHeaderSize = 40;
inline constexpr size_t kHandleAddrSize = 5;
inline constexpr size_t kMaxHandleAddrs = (kHandleSize - kHandleHeaderSize) / kHandleAddrSize;

using Nonce = std::array<uint8_t, kNonceSize>;

struct Handle {
  uint16_t port = 0;
  Nonce nonce{};
  std::vector<Ipv4Prefix> addrs;  // the listener's addresses, in its order of preference
  uint32_t rdma_mask = 0;         // bit i: addrs[i] can terminate an RDMA connection
  Agreement agreement;            // the listener's shared settings
};

// Writes exactly kHandleSize bytes. Addresses beyond kMaxHandleAddrs are not encoded: the caller
// checks handle.addrs.size() first and warns (see Listener). Returns false for an unencodable
// handle (no address, port 0, prefix > 32) and says why.
bool encode_handle(const Handle& handle, uint8_t* out, std::string* why);

// Validates magic, version, address count, port, reserved bytes, zero padding, prefix lengths,
// address sanity and the checksum. On failure returns false and sets *why.
bool decode_handle(const uint8_t* in, size_t len, Handle* out, std::string* why);

}  // namespace mesh::handshake
