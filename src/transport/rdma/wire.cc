// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/wire.h"

#include <endian.h>

#include <algorithm>
#include <cstring>

#include "util/byte_order.h"

namespace mesh::rdma {

std::vector<uint8_t> encode_setup(const SetupMessage& m) {
  uint8_t buf[kMaxSetupSize] = {};
  const size_t nqps = std::min(m.qps.size(), kMaxQps);
  put_u32(buf, kSetupMagic);
  buf[4] = kSetupVersion;
  buf[5] = static_cast<uint8_t>(nqps);
  if (m.traffic_class >= 0 && m.traffic_class <= 255) {
    buf[6] = kSetupFlagTrafficClass;
    buf[7] = static_cast<uint8_t>(m.traffic_class);
  }
  if (m.relay) buf[6] |= kSetupFlagRelay;
  put_u64(buf + 8, m.ring_addr);
  for (size_t i = 0; i < nqps; ++i) {
    const QpInfo& q = m.qps[i];
    uint8_t* p = buf + kSetupHeaderSize + i * kQpEntrySize;
    put_u32(p, q.qpn);
    put_u32(p + 4, q.psn);
    std::memcpy(p + 8, q.gid, sizeof(q.gid));
    put_u16(p + 24, q.lid);
    p[26] = q.mtu;
    put_u32(p + 28, q.local_addr);
    put_u32(p + 32, q.peer_addr);
    put_u32(p + 36, q.ring_rkey);
  }
  size_t len = kSetupHeaderSize + nqps * kQpEntrySize;
  if (m.relay) {
    put_u32(buf + len, m.relay_slots);
    put_u32(buf + len + 4, m.relay_slot_bytes);
    len += kRelayTrailerSize;
  }
  return std::vector<uint8_t>(buf, buf + len);
}

bool decode_setup(const uint8_t* data, size_t len, SetupMessage* out, std::string* why) {
  if (len < kSetupHeaderSize) {
    *why = "RDMA setup message of " + std::to_string(len) + " bytes is shorter than its header";
    return false;
  }
  if (get_u32(data) != kSetupMagic) {
    *why = "RDMA setup message has a bad magic";
    return false;
  }
  if (data[4] != kSetupVersion) {
    *why = "RDMA setup message version " + std::to_string(data[4]) + " (expected " +
           std::to_string(kSetupVersion) + "): the peer runs another nccl-mesh version";
    return false;
  }
  const size_t nqps = data[5];
  if (nqps < 1 || nqps > kMaxQps) {
    *why = "RDMA setup message announces " + std::to_string(nqps) + " QPs (1.." +
           std::to_string(kMaxQps) + " allowed)";
    return false;
  }
  if ((data[6] & ~(kSetupFlagTrafficClass | kSetupFlagRelay)) != 0 ||
      ((data[6] & kSetupFlagTrafficClass) == 0 && data[7] != 0)) {
    *why = "RDMA setup message has non-zero reserved bytes";
    return false;
  }
  const bool relay = (data[6] & kSetupFlagRelay) != 0;
  if (len != kSetupHeaderSize + nqps * kQpEntrySize + (relay ? kRelayTrailerSize : 0)) {
    *why = "RDMA setup message length " + std::to_string(len) + " does not match its " +
           std::to_string(nqps) + " QPs";
    return false;
  }
  SetupMessage m;
  m.ring_addr = get_u64(data + 8);
  m.traffic_class = (data[6] & kSetupFlagTrafficClass) != 0 ? data[7] : -1;
  if (relay) {
    const uint8_t* t = data + kSetupHeaderSize + nqps * kQpEntrySize;
    m.relay = true;
    m.relay_slots = get_u32(t);
    m.relay_slot_bytes = get_u32(t + 4);
    const bool connector = m.relay_slots == 0 && m.relay_slot_bytes == 0;
    const bool relay_ok = m.relay_slots >= 1 && m.relay_slots <= kMaxRelaySlots &&
                          m.relay_slot_bytes >= kMinRelaySlotBytes &&
                          m.relay_slot_bytes <= kMaxRelaySlotBytes &&
                          m.relay_slot_bytes % 4096 == 0;
    if (!connector && !relay_ok) {
      *why = "RDMA relay trailer announces " + std::to_string(m.relay_slots) + " slots of " +
             std::to_string(m.relay_slot_bytes) + " bytes (1.." + std::to_string(kMaxRelaySlots) +
             " slots, 4 KiB multiples up to 16 MiB allowed)";
      return false;
    }
    if (m.ring_addr == 0) {
      *why = "RDMA relay setup message announces no credit word or staging ring";
      return false;
    }
  }
  for (size_t i = 0; i < nqps; ++i) {
    const uint8_t* p = data + kSetupHeaderSize + i * kQpEntrySize;
    QpInfo q;
    q.qpn = get_u32(p);
    q.psn = get_u32(p + 4);
    std::memcpy(q.gid, p + 8, sizeof(q.gid));
    q.lid = get_u16(p + 24);
    q.mtu = p[26];
    q.local_addr = get_u32(p + 28);
    q.peer_addr = get_u32(p + 32);
    q.ring_rkey = get_u32(p + 36);
    const std::string which = "RDMA setup message QP " + std::to_string(i);
    if (q.qpn == 0 || q.qpn > 0xFFFFFF || q.psn > 0xFFFFFF) {
      *why = which + ": QP number or PSN out of the 24-bit range";
      return false;
    }
    if (q.mtu < 1 || q.mtu > 5) {
      *why = which + ": path MTU code " + std::to_string(q.mtu) + " is not 1..5";
      return false;
    }
    if (p[27] != 0) {
      *why = which + ": non-zero reserved byte";
      return false;
    }
    m.qps.push_back(q);
  }
  *out = std::move(m);
  return true;
}

bool decode_relay_answer(const uint8_t* data, size_t len, SetupMessage* out, std::string* why) {
  if (!decode_setup(data, len, out, why)) return false;
  if (!out->relay || out->relay_slots == 0) {
    *why = "the relay answered without its staging ring (not an nccl-mesh RDMA relay?)";
    return false;
  }
  return true;
}

namespace {
void put_le32(uint8_t* p, uint32_t v) {
  v = htole32(v);
  std::memcpy(p, &v, 4);
}
void put_le64(uint8_t* p, uint64_t v) {
  v = htole64(v);
  std::memcpy(p, &v, 8);
}
uint32_t get_le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return le32toh(v);
}
uint64_t get_le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return le64toh(v);
}
}  // namespace

void encode_cts_entry(const CtsEntry& e, uint8_t* out) {
  std::memset(out, 0, kCtsEntrySize);
  put_le64(out, e.addr);
  put_le64(out + 8, e.capacity);
  for (size_t q = 0; q < kMaxQps; ++q) put_le32(out + 16 + 4 * q, e.rkeys[q]);
  put_le32(out + 60, e.seq_plus_one);
}

CtsEntry decode_cts_entry(const uint8_t* in) {
  CtsEntry e;
  e.addr = get_le64(in);
  e.capacity = get_le64(in + 8);
  for (size_t q = 0; q < kMaxQps; ++q) e.rkeys[q] = get_le32(in + 16 + 4 * q);
  e.seq_plus_one = get_le32(in + 60);
  return e;
}

Slice split(size_t size, size_t nqps, size_t q) {
  if (nqps == 0 || q >= nqps) return {};
  // Round the per-QP share up to the alignment so every slice but the last starts aligned.
  size_t share = (size + nqps - 1) / nqps;
  share = (share + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
  const size_t offset = std::min(size, share * q);
  const size_t end = q + 1 == nqps ? size : std::min(size, offset + share);
  return {offset, end - offset};
}

}  // namespace mesh::rdma
