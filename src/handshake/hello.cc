// SPDX-License-Identifier: Apache-2.0
#include "handshake/hello.h"

#include <cstring>

#include "util/byte_order.h"

namespace mesh::handshake {

void encode_hello(const Hello& hello, uint8_t* out) {
  std::memset(out, 0, kHelloSize);
  put_u32(out, kHelloMagic);
  out[4] = kHelloVersion;
  out[5] = static_cast<uint8_t>(hello.role);
  put_u16(out + 6, hello.index);
  put_u16(out + 8, hello.ndata);
  put_u16(out + 10, hello.ext_len);
  std::memcpy(out + 16, hello.nonce.data(), kNonceSize);
  put_u64(out + 32, hello.conn_id);
  encode_agreement(hello.agreement, out + 40);
  put_u32(out + 48, hello.tcp_window);
  put_u32(out + 52, fnv1a(out, 52));
}

bool decode_hello(const uint8_t* in, Hello* out, std::string* why) {
  if (get_u32(in) != kHelloMagic) {
    *why = "bad magic (not an nccl-mesh handshake)";
    return false;
  }
  if (in[4] != kHelloVersion) {
    *why = "handshake version " + std::to_string(in[4]) + ", expected " +
           std::to_string(kHelloVersion);
    return false;
  }
  if (get_u32(in + 52) != fnv1a(in, 52)) {
    *why = "checksum mismatch";
    return false;
  }
  if (get_u32(in + 12) != 0) {
    *why = "reserved field is not zero";
    return false;
  }
  if (get_u32(in + 48) > kMaxTcpWindow) {
    *why = "TCP eager window " + std::to_string(get_u32(in + 48)) + " above " +
           std::to_string(kMaxTcpWindow) + " bytes";
    return false;
  }
  Hello h;
  if (in[5] > static_cast<uint8_t>(Role::kData)) {
    *why = "unknown socket role " + std::to_string(in[5]);
    return false;
  }
  h.role = static_cast<Role>(in[5]);
  h.index = get_u16(in + 6);
  h.ndata = get_u16(in + 8);
  h.ext_len = get_u16(in + 10);
  if (h.ext_len > kMaxExtension || (h.ext_len != 0 && h.role != Role::kControl)) {
    *why = "extension of " + std::to_string(h.ext_len) + " bytes on a " +
           (h.role == Role::kControl ? "control" : "data") + " socket (at most " +
           std::to_string(kMaxExtension) + ", control only)";
    return false;
  }
  // A transport with its own data path (RDMA) needs no data sockets.
  if ((h.ndata == 0 && h.ext_len == 0) || h.ndata > kMaxDataStreams) {
    *why = "data stream count " + std::to_string(h.ndata) + " outside 1.." +
           std::to_string(kMaxDataStreams);
    return false;
  }
  if ((h.role == Role::kControl && h.index != 0) || (h.role == Role::kData && h.index >= h.ndata)) {
    *why = "stream index " + std::to_string(h.index) + " invalid for " + std::to_string(h.ndata) +
           " data streams";
    return false;
  }
  std::memcpy(h.nonce.data(), in + 16, kNonceSize);
  h.conn_id = get_u64(in + 32);
  h.tcp_window = get_u32(in + 48);
  if (!decode_agreement(in + 40, &h.agreement, why)) return false;
  *out = h;
  return true;
}

void encode_reply(HelloReply reply, uint8_t* out) {
  out[0] = 'M';
  out[1] = 'S';
  out[2] = 'R';
  out[3] = static_cast<uint8_t>(reply);
}

bool decode_reply(const uint8_t* in, HelloReply* out) {
  if (in[0] != 'M' || in[1] != 'S' || in[2] != 'R') return false;
  if (in[3] < static_cast<uint8_t>(HelloReply::kAccepted) ||
      in[3] > static_cast<uint8_t>(HelloReply::kSettingsDiffer)) {
    return false;
  }
  *out = static_cast<HelloReply>(in[3]);
  return true;
}

const char* reply_text(HelloReply reply) {
  switch (reply) {
    case HelloReply::kAccepted:
      return "accepted";
    case HelloReply::kWrongNonce:
      return "refused: the nonce matches no open listen (stale or forged handle)";
    case HelloReply::kMalformed:
      return "refused: malformed handshake";
    case HelloReply::kBusy:
      return "refused: the peer's handshake service is saturated";
    case HelloReply::kSetupFailed:
      return "refused: the peer could not set up the transport (see the WARN in its log)";
    case HelloReply::kSettingsDiffer:
      return "refused: the peer's tuner settings differ from this host's (NCCL_MESH_TUNER, "
             "NCCL_MESH_TUNER_MIN_BYTES must be the same on every host)";
  }
  return "unknown reply";
}

}  // namespace mesh::handshake
