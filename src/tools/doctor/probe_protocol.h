// SPDX-License-Identifier: Apache-2.0
// Wire format between `nccl-mesh-doctor --probe` and `nccl-mesh-doctor --serve`. One TCP
// connection per operation; the client's first 12 bytes are the request:
//   u32 magic "MDR1" | u8 version (1) | u8 op | u16 reserved (0) | u32 arg     (big-endian)
// Operations:
//   INFO   (arg 0):         reply u32 length + JSON (PeerInfo: host, interfaces, arrived_on).
//   PING   (arg = count):   count times: the client sends 8 bytes, the server echoes them.
//   SINK   (arg = ms):      the client streams bytes and shuts down its write side; the server
//                           answers the u64 byte count it received.
//   SOURCE (arg = ms):      the server streams bytes for arg ms, then closes.
// The server clamps every count and duration (kMaxPings, kMaxDurationMs), so a probe is short
// whatever a client asks.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "tools/doctor/peers.h"

namespace mesh::doctor::probe {

inline constexpr uint16_t kDefaultPort = 29170;
inline constexpr uint32_t kMagic = 0x4d445231;  // "MDR1"
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kRequestSize = 12;
inline constexpr uint32_t kMaxPings = 10000;
inline constexpr uint32_t kMaxDurationMs = 10000;
inline constexpr uint32_t kMaxInfoBytes = 1u << 16;
inline constexpr size_t kIoChunk = 1u << 20;  // bytes per send/recv call of SINK and SOURCE

enum class Op : uint8_t { kInfo = 1, kPing = 2, kSink = 3, kSource = 4 };

struct Request {
  Op op = Op::kInfo;
  uint32_t arg = 0;
};

std::array<uint8_t, kRequestSize> encode_request(const Request& r);
// nullopt with *why on a bad magic, version, op or reserved field.
std::optional<Request> decode_request(const uint8_t* p, std::string* why);

std::string encode_info(const PeerInfo& info);  // JSON text
std::optional<PeerInfo> decode_info(const std::string& json, std::string* why);

}  // namespace mesh::doctor::probe
