// SPDX-License-Identifier: Apache-2.0
#include "pattern.h"

#include <cstring>

namespace mesh::bench {
namespace {

constexpr uint64_t kStride = 0x9E3779B97F4A7C15ull;  // odd: consecutive words never repeat

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Words are stored little-endian so the pattern is the same bytes on any host.
inline uint64_t to_le(uint64_t v) {
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return __builtin_bswap64(v);
#else
  return v;
#endif
}

}  // namespace

uint32_t stream_id(Transport transport, Phase phase, unsigned size_index, unsigned receiver) {
  return (static_cast<uint32_t>(transport) & 0xfu) << 28 |
         (static_cast<uint32_t>(phase) & 0xfu) << 24 | (size_index & 0xffu) << 16 |
         (receiver & 0xffffu);
}

uint64_t pattern_seed(int sender, uint64_t index) {
  return splitmix64(splitmix64(static_cast<uint64_t>(sender) + 0x5EEDull) ^ index);
}

uint8_t pattern_byte(int sender, uint64_t index, size_t offset) {
  const uint64_t word = to_le(pattern_seed(sender, index) + (offset / 8) * kStride);
  uint8_t bytes[8];
  std::memcpy(bytes, &word, 8);
  return bytes[offset % 8];
}

void fill_pattern(void* buf, size_t size, int sender, uint64_t index) {
  auto* out = static_cast<uint8_t*>(buf);
  const uint64_t seed = pattern_seed(sender, index);
  const size_t words = size / 8;
  uint64_t v = seed;
  for (size_t w = 0; w < words; ++w, v += kStride) {
    const uint64_t le = to_le(v);
    std::memcpy(out + w * 8, &le, 8);
  }
  if (size % 8 != 0) {
    const uint64_t le = to_le(v);
    std::memcpy(out + words * 8, &le, size % 8);
  }
}

std::optional<Mismatch> check_pattern(const void* buf, size_t size, int sender, uint64_t index) {
  const auto* in = static_cast<const uint8_t*>(buf);
  const uint64_t seed = pattern_seed(sender, index);
  const size_t words = size / 8;
  // Fast pass: OR of XOR differences per block (vectorizes); only a dirty block is re-scanned
  // byte by byte for the report.
  constexpr size_t kBlock = 512;  // words
  bool dirty = false;
  uint64_t v = seed;
  for (size_t b = 0; b < words && !dirty; b += kBlock) {
    const size_t end = b + kBlock < words ? b + kBlock : words;
    uint64_t diff = 0;
    uint64_t x = v;
    for (size_t w = b; w < end; ++w, x += kStride) {
      uint64_t got;
      std::memcpy(&got, in + w * 8, 8);
      diff |= got ^ to_le(x);
    }
    v = x;
    dirty = diff != 0;
  }
  if (!dirty && size % 8 != 0) {
    const uint64_t le = to_le(seed + words * kStride);
    dirty = std::memcmp(in + words * 8, &le, size % 8) != 0;
  }
  if (!dirty) return std::nullopt;

  Mismatch m;
  bool first = true;
  for (size_t o = 0; o < size; ++o) {
    const uint8_t want = pattern_byte(sender, index, o);
    if (in[o] != want) {
      if (first) {
        m.offset = o;
        m.got = in[o];
        m.expected = want;
        first = false;
      }
      ++m.bad_bytes;
    }
  }
  return m;
}

float allreduce_input(int rank, size_t index, uint64_t round) {
  return static_cast<float>((rank + 1) * static_cast<int>(1 + (index + round) % 61));
}

float allreduce_expected(int nranks, size_t index, uint64_t round) {
  return static_cast<float>(static_cast<int>(1 + (index + round) % 61) * nranks * (nranks + 1) / 2);
}

void fill_allreduce_input(float* data, size_t count, int rank, uint64_t round) {
  // Incremental modulo: this runs over up to 256M elements between iterations.
  unsigned j = static_cast<unsigned>(round % 61);
  const float scale = static_cast<float>(rank + 1);
  for (size_t i = 0; i < count; ++i) {
    data[i] = scale * static_cast<float>(1 + j);
    if (++j == 61) j = 0;
  }
}

std::optional<size_t> check_allreduce(const float* data, size_t count, int nranks, uint64_t round) {
  unsigned j = static_cast<unsigned>(round % 61);
  const float scale = static_cast<float>(nranks * (nranks + 1) / 2);
  for (size_t i = 0; i < count; ++i) {
    // Bit equality is intended: all values are small integers, every sum is exact.
    const float want = scale * static_cast<float>(1 + j);
    uint32_t a, b;
    std::memcpy(&a, &data[i], 4);
    std::memcpy(&b, &want, 4);
    if (a != b) return i;
    if (++j == 61) j = 0;
  }
  return std::nullopt;
}

}  // namespace mesh::bench
