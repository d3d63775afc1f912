// SPDX-License-Identifier: Apache-2.0
// The first bytes a connecting rank sends on every socket of a new connection, and the
// listener's one-word reply. The hello is peer-supplied: decode_hello() validates every field.
//
// Hello layout (kHelloSize bytes, big-endian):
//   [0]  u32 magic 'MSHH'       [4] u8 version      [5] u8 role (0 control, 1 data)
//   [6]  u16 stream index       [8] u16 number of data streams (1..kMaxDataStreams)
//   [10] u16 extension length   [12] u32 reserved (0)
//   [16] u8[16] nonce from the listener's handle
//   [32] u64 connection id (random, chosen by the connector; groups the sockets)
//   [40] u8[8] the connector's agreement: the settings every host must share (agreement.h)
//   [48] u32 the connector's TCP eager window (bytes, 0..kMaxTcpWindow; below)
//   [52] u32 FNV-1a checksum of bytes [0,52)
// Reply: 4 bytes 'M','S','R',code (HelloReply).
//
// Extension (version 2): a control-socket hello may be followed by `extension length` bytes
// (1..kMaxExtension) of transport setup (RDMA: transport/rdma/wire.h); the connection then
// may have 0 data sockets. An accepted reply to such a hello is followed by u16 length + the
// listener's own extension (1..kMaxExtension bytes). Data-socket hellos carry no extension.
//
// TCP eager window (version 6): the bytes the connecting side, a TCP sender, may have ahead of
// its clear-to-sends (NCCL_MESH_TCP_EAGER_WINDOW). Its receiver sends clear-to-sends unasked
// by that bound (transport/tcp/wire.h), which the sender counts on to leave out asks: both
// ends then apply one number, whatever each host's own setting. The listener reads it off the
// control socket's hello (ConnectedSockets::peer_tcp_window); RDMA connections ignore it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "handshake/handle.h"

namespace mesh::handshake {

inline constexpr size_t kHelloSize = 56;
inline constexpr size_t kReplySize = 4;
inline constexpr uint32_t kHelloMagic = 0x4D534848;  // "MSHH"
// 3: agreement; 4: clear-to-sends on request; 5: TCP message headers on the data sockets
// (transport/tcp/wire.h); 6: the connector's TCP eager window; 7: 64-byte TCP message headers;
// 8: TCP receives cleared unasked from half the sender's eager window (was: over a quarter);
// 9: ... and only where one of the two messages before was that large (transport/tcp/wire.h
// owes_unasked); 10: a small one-part message leaves the next one on its data socket
// (transport/tcp/wire.h next_first_stream).
inline constexpr uint8_t kHelloVersion = 10;
// NCCL_MESH_TCP_EAGER_WINDOW's upper bound (util/settings.h): a larger one is malformed.
inline constexpr uint32_t kMaxTcpWindow = 16u << 20;
inline constexpr size_t kMaxExtension = 1024;
inline constexpr uint16_t kMaxDataStreams = 64;

enum class Role : uint8_t { kControl = 0, kData = 1 };

enum class HelloReply : uint8_t {
  kAccepted = 1,
  kWrongNonce = 2,      // no open listen has this nonce: stale or forged handle
  kMalformed = 3,       // the hello failed validation
  kBusy = 4,            // too many unauthenticated handshakes pending
  kSetupFailed = 5,     // the listener could not set up the requested transport (see its WARN)
  kSettingsDiffer = 6,  // the hello's agreement differs from the listener's (agreement.h)
};

struct Hello {
  Role role = Role::kControl;
  uint16_t index = 0;
  uint16_t ndata = 1;
  Nonce nonce{};
  uint64_t conn_id = 0;
  uint16_t ext_len = 0;     // transport extension bytes following a control hello
  Agreement agreement;      // the connector's shared settings
  uint32_t tcp_window = 0;  // the connector's TCP eager window (above)
};

void encode_hello(const Hello& hello, uint8_t* out);
bool decode_hello(const uint8_t* in, Hello* out, std::string* why);

void encode_reply(HelloReply reply, uint8_t* out);
// Returns false for bytes that are not a reply at all.
bool decode_reply(const uint8_t* in, HelloReply* out);
const char* reply_text(HelloReply reply);

}  // namespace mesh::handshake
