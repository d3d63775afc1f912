// SPDX-License-Identifier: Apache-2.0
// Data patterns for --verify. Every byte of a message is a function of (sender rank, message
// index, byte offset), so a byte that lands in the wrong message, at the wrong offset, from the
// wrong sender, or that is simply stale (the buffer still holds an earlier message) is caught.
//
// The pattern is an arithmetic progression of 64-bit little-endian words seeded per message:
// word w = seed(sender, index) + w * K (K odd). Filling and checking run at memory speed, which
// matters because both happen inside the timed loops (for the plugin and the TCP baseline alike).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace mesh::bench {

// Which traffic a message belongs to. Folded into the message index so that a stale message of
// another phase (a warm-up message, a TCP message) never matches.
enum class Transport : uint32_t { kPlugin = 1, kTcp = 2, kRdma = 3, kGin = 4 };
enum class Phase : uint32_t {
  kWarmup = 1,
  kTimed = 2,
  kPing = 3,
  kPong = 4,
  kStream = 5,
  kControl = 6
};

// 32-bit stream id: transport (4 bits), phase (4 bits), size index (8 bits), receiver (16 bits).
uint32_t stream_id(Transport transport, Phase phase, unsigned size_index, unsigned receiver);

// Message index = stream id in the high half, message number in the low half.
constexpr uint64_t message_index(uint32_t stream, uint64_t number) {
  return (static_cast<uint64_t>(stream) << 32) | (number & 0xffffffffull);
}

uint64_t pattern_seed(int sender, uint64_t index);

// The byte the pattern puts at `offset` (slow; for tests and mismatch reports).
uint8_t pattern_byte(int sender, uint64_t index, size_t offset);

void fill_pattern(void* buf, size_t size, int sender, uint64_t index);

struct Mismatch {
  size_t offset = 0;  // first byte that differs
  uint8_t got = 0;
  uint8_t expected = 0;
  size_t bad_bytes = 0;  // how many bytes differ in total
};

// nullopt when every byte matches.
std::optional<Mismatch> check_pattern(const void* buf, size_t size, int sender, uint64_t index);

// Ring all-reduce data: small integers, so every float sum is exact whatever the order of
// additions and the check can demand bit equality. `round` changes the values every iteration,
// so a receive buffer still holding the previous iteration's data is caught.
// Input of `rank` at element i: (rank + 1) * (1 + (i + round) % 61).
// Sum over n ranks: (1 + (i + round) % 61) * n (n + 1) / 2, exact for n <= 512.
inline constexpr int kMaxAllreduceRanks = 512;
float allreduce_input(int rank, size_t index, uint64_t round);
float allreduce_expected(int nranks, size_t index, uint64_t round);
void fill_allreduce_input(float* data, size_t count, int rank, uint64_t round);
// Index of the first wrong element, nullopt when all are right.
std::optional<size_t> check_allreduce(const float* data, size_t count, int nranks, uint64_t round);

}  // namespace mesh::bench
