// SPDX-License-Identifier: Apache-2.0
// The RDMA transport's wire formats and arithmetic: the setup message exchanged in the
// handshake (peer-supplied: every field validated), the clear-to-send entry the receiver's NIC
// writes into the sender's ring, and the split of a message over the QPs.
#include "transport/rdma/wire.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace mesh::rdma {
namespace {

SetupMessage sample(size_t nqps) {
  SetupMessage m;
  m.ring_addr = 0x00007f1234567000ull;
  for (size_t i = 0; i < nqps; ++i) {
    QpInfo q;
    q.qpn = 0x11 + static_cast<uint32_t>(i);
    q.psn = 0xABCDE0 + static_cast<uint32_t>(i);
    for (int b = 0; b < 16; ++b) q.gid[b] = static_cast<uint8_t>(b * 7 + i);
    q.lid = static_cast<uint16_t>(i);
    q.mtu = 3;
    q.local_addr = 0xC6120001;  // 198.18.0.1
    q.peer_addr = 0xC6120002;
    q.ring_rkey = 0x1000 + static_cast<uint32_t>(i);
    m.qps.push_back(q);
  }
  return m;
}

void expect_rejected(const std::vector<uint8_t>& b, const std::string& reason) {
  SetupMessage out;
  std::string why;
  EXPECT_FALSE(decode_setup(b.data(), b.size(), &out, &why));
  EXPECT_NE(why.find(reason), std::string::npos) << "why: " << why << ", want: " << reason;
}

TEST(RdmaSetup, RoundTripsEveryField) {
  for (size_t n : {size_t{1}, size_t{2}, kMaxQps}) {
    const SetupMessage m = sample(n);
    const auto bytes = encode_setup(m);
    ASSERT_EQ(bytes.size(), kSetupHeaderSize + n * kQpEntrySize);
    ASSERT_LE(bytes.size(), kMaxSetupSize);
    SetupMessage out;
    std::string why;
    ASSERT_TRUE(decode_setup(bytes.data(), bytes.size(), &out, &why)) << why;
    EXPECT_EQ(out.ring_addr, m.ring_addr);
    ASSERT_EQ(out.qps.size(), n);
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(out.qps[i].qpn, m.qps[i].qpn);
      EXPECT_EQ(out.qps[i].psn, m.qps[i].psn);
      EXPECT_EQ(0, std::memcmp(out.qps[i].gid, m.qps[i].gid, 16));
      EXPECT_EQ(out.qps[i].lid, m.qps[i].lid);
      EXPECT_EQ(out.qps[i].mtu, m.qps[i].mtu);
      EXPECT_EQ(out.qps[i].local_addr, m.qps[i].local_addr);
      EXPECT_EQ(out.qps[i].peer_addr, m.qps[i].peer_addr);
      EXPECT_EQ(out.qps[i].ring_rkey, m.qps[i].ring_rkey);
    }
  }
}

TEST(RdmaSetup, LayoutIsBigEndianAsDocumented) {
  const auto b = encode_setup(sample(1));
  const uint8_t head[] = {'M', 'S', 'R', 'D', kSetupVersion, 1, 0, 0};
  for (size_t i = 0; i < sizeof(head); ++i) EXPECT_EQ(b[i], head[i]) << i;
  EXPECT_EQ(b[8], 0x00);
  EXPECT_EQ(b[15], 0x00);
  EXPECT_EQ(b[14], 0x70);
  EXPECT_EQ(b[16 + 3], 0x11);   // QPN low byte
  EXPECT_EQ(b[16 + 26], 3);     // MTU code
  EXPECT_EQ(b[16 + 28], 198);   // local address, first octet
  EXPECT_EQ(b[16 + 39], 0x00);  // ring rkey low byte (0x1000)
  EXPECT_EQ(b[16 + 38], 0x10);
}

TEST(RdmaSetup, TrafficClassTravelsOnlyWhenSet) {
  SetupMessage m = sample(1);
  SetupMessage out;
  std::string why;
  auto b = encode_setup(m);
  EXPECT_EQ(b[6], 0);
  EXPECT_EQ(b[7], 0);
  ASSERT_TRUE(decode_setup(b.data(), b.size(), &out, &why)) << why;
  EXPECT_EQ(out.traffic_class, -1);
  for (int tc : {0, 106, 255}) {
    m.traffic_class = tc;
    b = encode_setup(m);
    EXPECT_EQ(b[6], kSetupFlagTrafficClass);
    EXPECT_EQ(b[7], tc);
    ASSERT_TRUE(decode_setup(b.data(), b.size(), &out, &why)) << why;
    EXPECT_EQ(out.traffic_class, tc);
  }
}

TEST(RdmaSetup, RejectsEveryMalformedField) {
  const auto good = encode_setup(sample(2));
  expect_rejected({good.begin(), good.begin() + 10}, "shorter");
  {
    auto b = good;
    b[0] ^= 1;
    expect_rejected(b, "magic");
  }
  {
    auto b = good;
    b[4] = kSetupVersion + 1;
    expect_rejected(b, "version");
  }
  for (uint8_t n : {uint8_t{0}, static_cast<uint8_t>(kMaxQps + 1), uint8_t{255}}) {
    auto b = good;
    b[5] = n;
    expect_rejected(b, "QPs");
  }
  for (uint8_t flag : {uint8_t{4}, uint8_t{0x80}}) {  // flags: bits 0 and 1 are defined
    auto b = good;
    b[6] = flag;
    expect_rejected(b, "reserved");
  }
  {  // the relay flag without its trailer
    auto b = good;
    b[6] = kSetupFlagRelay;
    expect_rejected(b, "length");
  }
  {  // a traffic class byte without its flag
    auto b = good;
    b[7] = 1;
    expect_rejected(b, "reserved");
  }
  {  // Length must match the QP count exactly: no trailing bytes, no truncation.
    auto b = good;
    b.push_back(0);
    expect_rejected(b, "length");
    b.resize(good.size() - 1);
    expect_rejected(b, "length");
  }
  {  // QPN 0 and values above 24 bits.
    auto b = good;
    b[16] = b[17] = b[18] = b[19] = 0;
    expect_rejected(b, "24-bit");
    b = good;
    b[16] = 0x01;
    expect_rejected(b, "24-bit");
    b = good;
    b[20] = 0x01;  // PSN
    expect_rejected(b, "24-bit");
  }
  for (uint8_t mtu : {uint8_t{0}, uint8_t{6}, uint8_t{255}}) {
    auto b = good;
    b[16 + kQpEntrySize + 26] = mtu;  // second QP
    expect_rejected(b, "MTU");
  }
  {
    auto b = good;
    b[16 + 27] = 1;
    expect_rejected(b, "reserved");
  }
}

TEST(RdmaSetup, RelayTrailerRoundTripsForBothSides) {
  SetupMessage connector = sample(2);
  connector.relay = true;  // K = S = 0: the connector's side
  SetupMessage relay = sample(2);
  relay.relay = true;
  relay.relay_slots = 8;
  relay.relay_slot_bytes = 512 * 1024;
  for (const SetupMessage& m : {connector, relay}) {
    const auto bytes = encode_setup(m);
    ASSERT_EQ(bytes.size(), kSetupHeaderSize + 2 * kQpEntrySize + kRelayTrailerSize);
    ASSERT_LE(bytes.size(), kMaxSetupSize);
    SetupMessage out;
    std::string why;
    ASSERT_TRUE(decode_setup(bytes.data(), bytes.size(), &out, &why)) << why;
    EXPECT_TRUE(out.relay);
    EXPECT_EQ(out.relay_slots, m.relay_slots);
    EXPECT_EQ(out.relay_slot_bytes, m.relay_slot_bytes);
    EXPECT_EQ(out.ring_addr, m.ring_addr);
  }
  SetupMessage plain;
  const auto b = encode_setup(sample(1));
  ASSERT_TRUE(decode_setup(b.data(), b.size(), &plain, nullptr));
  EXPECT_FALSE(plain.relay);
}

TEST(RdmaSetup, RelayTrailerOutOfRangeIsRejected) {
  struct Case {
    uint32_t slots, bytes;
  };
  for (const Case& c : std::vector<Case>{{0, 4096},
                                         {1, 0},
                                         {kMaxRelaySlots + 1, 4096},
                                         {8, 4095},
                                         {8, 4096 + 128},
                                         {8, kMaxRelaySlotBytes + 4096},
                                         {0xFFFFFFFFu, 0xFFFFFFFFu}}) {
    SetupMessage m = sample(2);
    m.relay = true;
    m.relay_slots = c.slots;
    m.relay_slot_bytes = c.bytes;
    expect_rejected(encode_setup(m), "relay trailer");
  }
  SetupMessage m = sample(2);
  m.relay = true;
  m.ring_addr = 0;
  expect_rejected(encode_setup(m), "credit word");
}

TEST(RdmaSetup, ChunkImmediateKeepsLengthTagAndLastFlagApart) {
  EXPECT_EQ(chunk_imm(0, true, 0), kChunkLastFlag);
  EXPECT_EQ(chunk_imm(4096, false, 0), 4096u);
  EXPECT_EQ(chunk_imm(4096, false, 1), 4096u | (1u << kChunkTagShift));
  EXPECT_EQ(chunk_imm(4096, false, 64), 4096u);  // the tag is the chunk number mod 64
  for (uint64_t chunk : {0ull, 1ull, 63ull, 64ull, 1000003ull, ~0ull}) {
    for (uint32_t len : {0u, 1u, 4096u, kMaxRelaySlotBytes}) {
      for (bool last : {false, true}) {
        const ChunkImm d = decode_chunk_imm(chunk_imm(len, last, chunk));
        EXPECT_EQ(d.length, len);
        EXPECT_EQ(d.last, last);
        EXPECT_EQ(d.tag, chunk_tag(chunk));
      }
    }
  }
}

TEST(RdmaSetup, CreditsBeyondThePostedFailAndStaleOnesAreIgnored) {
  uint64_t seen = 0;
  EXPECT_TRUE(accept_credit(3, 5, &seen));
  EXPECT_EQ(seen, 3u);
  EXPECT_TRUE(accept_credit(2, 5, &seen));  // stale (a duplicated WRITE re-executed): ignored
  EXPECT_EQ(seen, 3u);
  EXPECT_TRUE(accept_credit(5, 5, &seen));
  EXPECT_EQ(seen, 5u);
  EXPECT_FALSE(accept_credit(6, 5, &seen));  // more freed than ever posted
  EXPECT_EQ(seen, 5u);
  EXPECT_FALSE(accept_credit(~0ull, 5, &seen));
}

TEST(RdmaSetup, RandomBytesNeverCrashAndRarelyPass) {
  std::mt19937 rng(7);
  int accepted = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> b(rng() % (kMaxSetupSize + 8));
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    if (rng() % 2 && b.size() >= 8) {  // plausible header, random rest
      b[0] = 'M', b[1] = 'S', b[2] = 'R', b[3] = 'D', b[4] = kSetupVersion;
    }
    SetupMessage out;
    std::string why;
    accepted += decode_setup(b.data(), b.size(), &out, &why) ? 1 : 0;
  }
  EXPECT_LT(accepted, 20);
}

TEST(CtsEntry, RoundTripsWithTheMarkerLast) {
  CtsEntry e;
  e.addr = 0x00007f00deadbe80ull;
  e.capacity = 4ull << 20;
  for (size_t q = 0; q < kMaxQps; ++q) e.rkeys[q] = 0x100 + static_cast<uint32_t>(q);
  e.seq_plus_one = 0x01020304;
  uint8_t b[kCtsEntrySize];
  encode_cts_entry(e, b);
  // Little-endian; the marker occupies the last 4 bytes so the sender can read it last.
  EXPECT_EQ(b[60], 0x04);
  EXPECT_EQ(b[63], 0x01);
  for (size_t i = 48; i < 60; ++i) EXPECT_EQ(b[i], 0) << i;
  const CtsEntry out = decode_cts_entry(b);
  EXPECT_EQ(out.addr, e.addr);
  EXPECT_EQ(out.capacity, e.capacity);
  for (size_t q = 0; q < kMaxQps; ++q) EXPECT_EQ(out.rkeys[q], e.rkeys[q]);
  EXPECT_EQ(out.seq_plus_one, e.seq_plus_one);
}

TEST(CtsEntry, RingSlotsOfConsecutiveSequencesNeverCollide) {
  // The sender looks for sequence s in slot s % 32 and accepts only marker s + 1: the entry
  // of s - 32 that still sits in the slot (marker s - 31) can never be taken for s.
  for (uint32_t s = 0; s < 1000; ++s) {
    const uint32_t stale = s >= 32 ? s - 32 + 1 : 0;
    EXPECT_NE(stale, s + 1);
    EXPECT_EQ((s % 32), ((s + 32) % 32));
  }
  // Wrap-around of the 32-bit sequence: marker arithmetic stays distinct.
  const uint32_t s = 0xFFFFFFFFu;
  EXPECT_EQ(s + 1, 0u);
  EXPECT_NE(static_cast<uint32_t>(s - 32 + 1), static_cast<uint32_t>(s + 1));
}

TEST(Split, CoversTheMessageExactlyWithAlignedSlices) {
  std::mt19937_64 rng(11);
  std::vector<size_t> sizes = {0,    1,    127,   128,     129,           255,        256,
                               1000, 4096, 65536, 1 << 20, (1 << 20) + 3, 64ull << 20};
  for (int i = 0; i < 500; ++i) sizes.push_back(rng() % (8 << 20));
  for (size_t nqps = 1; nqps <= kMaxQps; ++nqps) {
    for (size_t size : sizes) {
      size_t next = 0;
      for (size_t q = 0; q < nqps; ++q) {
        const Slice s = split(size, nqps, q);
        ASSERT_EQ(s.offset, s.length == 0 ? s.offset : next) << size << " " << nqps << " " << q;
        if (s.length > 0) {
          EXPECT_EQ(s.offset % kSliceAlign, 0u) << size << " " << nqps << " " << q;
          next = s.offset + s.length;
        }
        EXPECT_LE(s.offset + s.length, size);
      }
      EXPECT_EQ(next, size) << size << " over " << nqps;
    }
  }
}

TEST(Split, SharesAreBalanced) {
  // 4 MiB over 4 QPs: four equal 1 MiB slices.
  for (size_t q = 0; q < 4; ++q) {
    const Slice s = split(4 << 20, 4, q);
    EXPECT_EQ(s.offset, q << 20);
    EXPECT_EQ(s.length, size_t{1} << 20);
  }
  // Small messages use the first QP only; the others post zero-length writes.
  EXPECT_EQ(split(100, 4, 0).length, 100u);
  for (size_t q = 1; q < 4; ++q) EXPECT_EQ(split(100, 4, q).length, 0u);
  EXPECT_EQ(split(100, 0, 0).length, 0u);  // no QPs: nothing (defensive)
  EXPECT_EQ(split(100, 2, 5).length, 0u);
}

}  // namespace
}  // namespace mesh::rdma
