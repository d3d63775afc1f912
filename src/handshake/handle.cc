// SPDX-License-Identifier: Apache-2.0
#include "handshake/handle.h"

#include <cstring>

#include "util/byte_order.h"

namespace mesh::handshake {

namespace {
constexpr size_t kChecksumOffset = 24;

uint32_t handle_checksum(const uint8_t* h) {
  uint32_t sum = fnv1a(h, kChecksumOffset);
  return fnv1a(h + kChecksumOffset + 4, kHandleSize - kChecksumOffset - 4, sum);
}
}  // namespace

bool encode_handle(const Handle& handle, uint8_t* out, std::string* why) {
  if (handle.addrs.empty()) {
    *why = "no local address to advertise";
    return false;
  }
  if (handle.port == 0) {
    *why = "handshake port is 0";
    return false;
  }
  std::memset(out, 0, kHandleSize);
  const size_t n = handle.addrs.size() < kMaxHandleAddrs ? handle.addrs.size() : kMaxHandleAddrs;
  put_u32(out, kHandleMagic);
  out[4] = kHandleVersion;
  out[5] = static_cast<uint8_t>(n);
  put_u16(out + 6, handle.port);
  std::memcpy(out + 8, handle.nonce.data(), kNonceSize);
  put_u32(out + 28, handle.rdma_mask & ((1u << n) - 1));
  encode_agreement(handle.agreement, out + 32);
  for (size_t i = 0; i < n; ++i) {
    const Ipv4Prefix& a = handle.addrs[i];
    if (a.prefix > 32) {
      *why = "prefix length " + std::to_string(a.prefix) + " > 32";
      return false;
    }
    uint8_t* e = out + kHandleHeaderSize + i * kHandleAddrSize;
    put_u32(e, a.addr);
    e[4] = a.prefix;
  }
  put_u32(out + kChecksumOffset, handle_checksum(out));
  return true;
}

bool decode_handle(const uint8_t* in, size_t len, Handle* out, std::string* why) {
  if (in == nullptr) {
    *why = "handle pointer is NULL";
    return false;
  }
  if (len < kHandleSize) {
    *why = "handle is " + std::to_string(len) + " bytes, expected " + std::to_string(kHandleSize);
    return false;
  }
  if (get_u32(in) != kHandleMagic) {
    *why = "bad magic (not an nccl-mesh handle; do both ranks load the same plugin?)";
    return false;
  }
  if (in[4] != kHandleVersion) {
    *why = "protocol version " + std::to_string(in[4]) + ", this plugin speaks " +
           std::to_string(kHandleVersion) + " (mixed plugin versions across ranks?)";
    return false;
  }
  const size_t n = in[5];
  if (n == 0 || n > kMaxHandleAddrs) {
    *why = "address count " + std::to_string(n) + " outside 1.." + std::to_string(kMaxHandleAddrs);
    return false;
  }
  const uint16_t port = get_u16(in + 6);
  if (port == 0) {
    *why = "handshake port is 0";
    return false;
  }
  const uint32_t rdma_mask = get_u32(in + 28);
  if ((rdma_mask >> n) != 0) {
    *why = "RDMA mask has bits beyond the " + std::to_string(n) + " addresses";
    return false;
  }
  for (size_t i = kHandleHeaderSize + n * kHandleAddrSize; i < kHandleSize; ++i) {
    if (in[i] != 0) {
      *why = "non-zero padding after the address list";
      return false;
    }
  }
  if (get_u32(in + kChecksumOffset) != handle_checksum(in)) {
    *why = "checksum mismatch (handle corrupted in transit)";
    return false;
  }
  Handle h;
  if (!decode_agreement(in + 32, &h.agreement, why)) return false;
  h.port = port;
  h.rdma_mask = rdma_mask;
  std::memcpy(h.nonce.data(), in + 8, kNonceSize);
  h.addrs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* e = in + kHandleHeaderSize + i * kHandleAddrSize;
    Ipv4Prefix a{get_u32(e), e[4]};
    if (a.prefix > 32) {
      *why = "address " + std::to_string(i) + " has prefix length " + std::to_string(a.prefix);
      return false;
    }
    if (a.addr == 0 || a.addr == 0xffffffffu || (a.addr >> 28) == 0xE) {
      *why = "address " + format_ipv4(a.addr) + " is not a unicast host address";
      return false;
    }
    h.addrs.push_back(a);
  }
  *out = std::move(h);
  return true;
}

}  // namespace mesh::handshake
