// SPDX-License-Identifier: Apache-2.0
#include "relay/request.h"

#include <cstring>

#include "relay/fail.h"
#include "util/byte_order.h"
#include "util/fnv1a.h"

namespace mesh::relay {

namespace {

constexpr size_t kAddrsAt = 16;
constexpr size_t kReservedAt = 56;
constexpr size_t kChecksumAt = 60;

}  // namespace

void encode_request(const RelayRequest& req, uint8_t* out) {
  std::memset(out, 0, kRequestSize);
  put_u32(out, kRequestMagic);
  out[4] = kRequestVersion;
  out[5] = req.hop_limit;
  put_u16(out + 6, req.stream);
  put_u16(out + 8, req.port);
  const size_t n = req.dest.size() < kMaxRequestAddrs ? req.dest.size() : kMaxRequestAddrs;
  out[10] = static_cast<uint8_t>(n);
  out[11] = req.rdma ? kRequestFlagRdma : 0;
  put_u32(out + 12, req.origin);
  for (size_t i = 0; i < n; ++i) {
    put_u32(out + kAddrsAt + 5 * i, req.dest[i].addr);
    out[kAddrsAt + 5 * i + 4] = req.dest[i].prefix;
  }
  put_u32(out + kChecksumAt, fnv1a(out, kChecksumAt));
}

bool decode_request(const uint8_t* in, RelayRequest* out, std::string* why) {
  if (get_u32(in) != kRequestMagic) return fail(why, "not a relay request (bad magic)");
  if (in[4] != kRequestVersion)
    return fail(why, "relay request version " + std::to_string(in[4]) + " (expected " +
                         std::to_string(kRequestVersion) + ")");
  if (fnv1a(in, kChecksumAt) != get_u32(in + kChecksumAt)) return fail(why, "bad checksum");
  RelayRequest r;
  r.hop_limit = in[5];
  r.stream = get_u16(in + 6);
  r.port = get_u16(in + 8);
  const size_t n = in[10];
  r.origin = get_u32(in + 12);
  if (r.port == 0) return fail(why, "destination port 0");
  if (n == 0 || n > kMaxRequestAddrs) return fail(why, "address count " + std::to_string(n));
  if ((in[11] & ~kRequestFlagRdma) != 0 || get_u32(in + kReservedAt) != 0)
    return fail(why, "reserved bytes not zero");
  r.rdma = (in[11] & kRequestFlagRdma) != 0;
  for (size_t i = kAddrsAt + 5 * n; i < kReservedAt; ++i) {
    if (in[i] != 0) return fail(why, "padding not zero");
  }
  for (size_t i = 0; i < n; ++i) {
    Ipv4Prefix p{get_u32(in + kAddrsAt + 5 * i), in[kAddrsAt + 5 * i + 4]};
    if (p.prefix == 0 || p.prefix > 32 || p.addr == 0 || p.addr == 0xffffffffu)
      return fail(why, "invalid destination address " + format_prefix(p));
    r.dest.push_back(p);
  }
  *out = std::move(r);
  return true;
}

void encode_relay_reply(ReplyCode code, uint8_t* out) {
  out[0] = 'M';
  out[1] = 'R';
  out[2] = 'P';
  out[3] = static_cast<uint8_t>(code);
}

bool decode_relay_reply(const uint8_t* in, ReplyCode* out) {
  if (in[0] != 'M' || in[1] != 'R' || in[2] != 'P') return false;
  if (in[3] < static_cast<uint8_t>(ReplyCode::kOk) ||
      in[3] > static_cast<uint8_t>(ReplyCode::kNoRdmaRelay))
    return false;
  *out = static_cast<ReplyCode>(in[3]);
  return true;
}

const char* relay_reply_text(ReplyCode code) {
  switch (code) {
    case ReplyCode::kOk:
      return "connected";
    case ReplyCode::kNoRoute:
      return "has no route to the destination (its cable graph does not reach it)";
    case ReplyCode::kHopLimit:
      return "refused: the route is longer than the hop limit";
    case ReplyCode::kBusy:
      return "is busy (it carries its maximum of relayed sockets)";
    case ReplyCode::kMalformed:
      return "refused the relay request as malformed";
    case ReplyCode::kConnectFailed:
      return "could not connect onward (next relay or the destination's handshake port)";
    case ReplyCode::kNoRdmaRelay:
      return "cannot forward RDMA to the destination (it is not next to it, or it has no "
             "usable RDMA port on both cables: run nccl-mesh-doctor there)";
  }
  return "answered an unknown code";
}

}  // namespace mesh::relay
