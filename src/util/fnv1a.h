// SPDX-License-Identifier: Apache-2.0
// FNV-1a, 32 bits: the checksum of every wire format (handle, hello, relay beacon and request).
// Catches corruption and garbage, not forgery (the nonce does that).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mesh {

// `seed` continues a previous sum, so a message can be checksummed in pieces.
inline uint32_t fnv1a(const uint8_t* data, size_t len, uint32_t seed = 2166136261u) {
  uint32_t h = seed;
  for (size_t i = 0; i < len; ++i) {
    h ^= data[i];
    h *= 16777619u;
  }
  return h;
}

}  // namespace mesh
