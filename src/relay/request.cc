// SPDX-License-Identifier: Apache-2.0
#include "relay/request.h"

#include <chrono>
#include <cstring>

#include "relay/fail.h"
#include "util/byte_order.h"
#include "util/random.h"

namespace mesh::relay {

namespace {

constexpr size_t kAddrsAt = 16;
constexpr size_t kTimeAt = 56;
constexpr size_t kUniqueAt = 64;
constexpr size_t kTagAt = 72;
constexpr size_t kProofAt = 80;
constexpr size_t kHopLimitAt = 5;

void put_u64(uint8_t* p, uint64_t v) {
  put_u32(p, static_cast<uint32_t>(v >> 32));
  put_u32(p + 4, static_cast<uint32_t>(v));
}
uint64_t get_u64(const uint8_t* p) {
  return (static_cast<uint64_t>(get_u32(p)) << 32) | get_u32(p + 4);
}

Sha256 derive(const uint8_t* nonce, size_t len, const char* label) {
  return hmac_sha256(nonce, len, reinterpret_cast<const uint8_t*>(label), std::strlen(label));
}

// The proof covers every byte before it except the hop limit (which each relay decrements).
Sha256 proof_of(const uint8_t* in, const Sha256& key) {
  uint8_t covered[kProofAt];
  std::memcpy(covered, in, kProofAt);
  covered[kHopLimitAt] = 0;
  return hmac_sha256(key.data(), key.size(), covered, kProofAt);
}

}  // namespace

Sha256 relay_listener_key(const uint8_t* nonce, size_t len) {
  return derive(nonce, len, "nccl-mesh relay request key v1");
}

ListenerTag relay_listener_tag(const uint8_t* nonce, size_t len) {
  const Sha256 h = derive(nonce, len, "nccl-mesh relay listener tag v1");
  ListenerTag t{};
  std::memcpy(t.data(), h.data(), t.size());
  return t;
}

void encode_request(const RelayRequest& req, const Sha256& key, uint8_t* out) {
  std::memset(out, 0, kRequestSize);
  put_u32(out, kRequestMagic);
  out[4] = kRequestVersion;
  out[kHopLimitAt] = req.hop_limit;
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
  uint64_t t = req.time_ms;
  if (t == 0) {
    t = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
  }
  uint64_t u = req.unique;
  while (u == 0) fill_random(&u, sizeof(u));
  put_u64(out + kTimeAt, t);
  put_u64(out + kUniqueAt, u);
  std::memcpy(out + kTagAt, req.tag.data(), kListenerTagSize);
  const Sha256 p = proof_of(out, key);
  std::memcpy(out + kProofAt, p.data(), kProofSize);
}

void reencode_request(const uint8_t* in, uint8_t hop_limit, uint8_t* out) {
  std::memcpy(out, in, kRequestSize);
  out[kHopLimitAt] = hop_limit;
}

bool verify_proof(const uint8_t* in, const Sha256& key) {
  const Sha256 p = proof_of(in, key);
  return equal_constant_time(p.data(), in + kProofAt, kProofSize);
}

bool decode_request(const uint8_t* in, RelayRequest* out, std::string* why) {
  if (get_u32(in) != kRequestMagic) return fail(why, "not a relay request (bad magic)");
  if (in[4] != kRequestVersion)
    return fail(why, "relay request version " + std::to_string(in[4]) + " (expected " +
                         std::to_string(kRequestVersion) +
                         ": every host must run the same plugin)");
  RelayRequest r;
  r.hop_limit = in[kHopLimitAt];
  r.stream = get_u16(in + 6);
  r.port = get_u16(in + 8);
  const size_t n = in[10];
  r.origin = get_u32(in + 12);
  if (r.port == 0) return fail(why, "destination port 0");
  if (n == 0 || n > kMaxRequestAddrs) return fail(why, "address count " + std::to_string(n));
  if ((in[11] & ~kRequestFlagRdma) != 0) return fail(why, "reserved flag bits not zero");
  r.rdma = (in[11] & kRequestFlagRdma) != 0;
  for (size_t i = kAddrsAt + 5 * n; i < kTimeAt; ++i) {
    if (in[i] != 0) return fail(why, "padding not zero");
  }
  for (size_t i = 0; i < n; ++i) {
    Ipv4Prefix p{get_u32(in + kAddrsAt + 5 * i), in[kAddrsAt + 5 * i + 4]};
    if (p.prefix == 0 || p.prefix > 32 || p.addr == 0 || p.addr == 0xffffffffu)
      return fail(why, "invalid destination address " + format_prefix(p));
    r.dest.push_back(p);
  }
  r.time_ms = get_u64(in + kTimeAt);
  r.unique = get_u64(in + kUniqueAt);
  std::memcpy(r.tag.data(), in + kTagAt, kListenerTagSize);
  std::memcpy(r.proof.data(), in + kProofAt, kProofSize);
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
      in[3] > static_cast<uint8_t>(ReplyCode::kNoRdmaOnCable))
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
      return "cannot forward RDMA (its relay agent has no usable RDMA port on the mesh "
             "interfaces: run nccl-mesh-doctor there)";
    case ReplyCode::kNotRegistered:
      return "(the destination host's relay agent) refused: no plugin listener of that host is "
             "registered for that port and handle (the listener closed, or its process could "
             "not reach the host's relay agent: see that host's log)";
    case ReplyCode::kNoRdmaOnCable:
      return "cannot forward RDMA: its own cable to the next host of the route (the destination "
             "or the next relay host) has no usable RDMA port (its log names the cable; run "
             "nccl-mesh-doctor there)";
    case ReplyCode::kBadProof:
      return "(the destination host's relay agent) refused: the request does not prove it holds "
             "the listener's handle, or is stale or replayed (are the hosts' clocks within "
             "5 minutes of each other?)";
  }
  return "answered an unknown code";
}

}  // namespace mesh::relay
