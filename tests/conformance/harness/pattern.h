// SPDX-License-Identifier: Apache-2.0
// Message contents. Every message gets its own key (from the flow's seed and the message index),
// and every 8-byte word of it a value derived from the key and the word's position, so a byte that
// arrives in the wrong message, at the wrong offset or not at all is caught by verify_pattern.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace conformance {

uint64_t mix64(uint64_t x);
uint64_t message_key(uint64_t seed, uint64_t index);

void fill_pattern(uint8_t* data, size_t size, uint64_t key);
// Returns true when data[0, size) holds the pattern for `key`; otherwise describes the first
// differing byte in *why.
bool verify_pattern(const uint8_t* data, size_t size, uint64_t key, std::string* why);

// Bytes of a receive buffer past the message: the plugin must not write there.
inline constexpr uint8_t kCanaryByte = 0xA5;
// Returns true when data[0, size) is all kCanaryByte; otherwise describes the first written byte.
bool verify_canary(const uint8_t* data, size_t size, std::string* why);

}  // namespace conformance
