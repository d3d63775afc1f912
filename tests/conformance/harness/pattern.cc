// SPDX-License-Identifier: Apache-2.0
#include "harness/pattern.h"

#include <cstdio>
#include <cstring>

namespace conformance {

uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t message_key(uint64_t seed, uint64_t index) {
  return mix64(seed ^ mix64(index));
}

namespace {

// Cheap per-word value: distinct for every (key, word) pair that matters here, and fast enough to
// fill and check 64 MiB messages under sanitizers.
inline uint64_t word_value(uint64_t key, uint64_t word) {
  uint64_t v = (key + word) * 0x9E3779B97F4A7C15ull;
  return v ^ (v >> 29);
}

inline uint8_t byte_at(uint64_t key, size_t offset) {
  const uint64_t v = word_value(key, offset / 8);
  uint8_t bytes[8];
  std::memcpy(bytes, &v, sizeof(v));
  return bytes[offset % 8];
}

}  // namespace

void fill_pattern(uint8_t* data, size_t size, uint64_t key) {
  const size_t words = size / 8;
  for (size_t w = 0; w < words; ++w) {
    const uint64_t v = word_value(key, w);
    std::memcpy(data + w * 8, &v, sizeof(v));
  }
  for (size_t i = words * 8; i < size; ++i) data[i] = byte_at(key, i);
}

bool verify_pattern(const uint8_t* data, size_t size, uint64_t key, std::string* why) {
  const size_t words = size / 8;
  size_t bad = size;
  for (size_t w = 0; w < words && bad == size; ++w) {
    const uint64_t expected = word_value(key, w);
    uint64_t got;
    std::memcpy(&got, data + w * 8, sizeof(got));
    if (got != expected) {
      for (size_t i = w * 8; i < w * 8 + 8; ++i) {
        if (data[i] != byte_at(key, i)) {
          bad = i;
          break;
        }
      }
    }
  }
  for (size_t i = words * 8; i < size && bad == size; ++i) {
    if (data[i] != byte_at(key, i)) bad = i;
  }
  if (bad == size) return true;
  char text[160];
  std::snprintf(text, sizeof(text), "byte %zu of %zu is 0x%02x, expected 0x%02x", bad, size,
                data[bad], byte_at(key, bad));
  *why = text;
  return false;
}

bool verify_canary(const uint8_t* data, size_t size, std::string* why) {
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != kCanaryByte) {
      char text[160];
      std::snprintf(text, sizeof(text),
                    "byte %zu past the message end was overwritten (0x%02x) in a larger buffer", i,
                    data[i]);
      *why = text;
      return false;
    }
  }
  return true;
}

}  // namespace conformance
