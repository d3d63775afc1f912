// SPDX-License-Identifier: Apache-2.0
// Message sizes: parsing "64K"/"1G" style arguments, the power-of-two sweep, and how many
// iterations and in-flight buffers one size gets. Pure functions, unit-tested.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mesh::bench {

// The largest message the bench sends: test() reports sizes as int, and NCCL itself never
// posts more than 1 GiB per isend on registered buffers.
inline constexpr uint64_t kMaxMessageBytes = 1ull << 30;

// "8", "64K", "1M", "1G", "4KiB", "2MB", "512k": binary multiples (1K = 1024), as nccl-tests.
// Returns nullopt and says why for anything else (empty, junk, overflow).
std::optional<uint64_t> parse_size(std::string_view text, std::string* why = nullptr);

// Comma-separated list of parse_size() values, kept in the given order.
std::optional<std::vector<uint64_t>> parse_size_list(std::string_view text,
                                                     std::string* why = nullptr);

// min, 2*min, 4*min, ... while <= max (nccl-tests' -f 2). Empty when min is 0 or min > max.
std::vector<uint64_t> power_of_two_sweep(uint64_t min_bytes, uint64_t max_bytes);

// "8 B", "64 KiB", "1 GiB", "1.5 MiB", "3000 B".
std::string format_size(uint64_t bytes);

struct IterPlan {
  int iters = 0;
  int warmup = 0;
};

// Big messages get fewer iterations so every size costs about `iter_bytes` of traffic, but never
// fewer than min(iters, 4) (a steady state needs a few messages); warm-up shrinks with them.
IterPlan plan_iterations(uint64_t bytes, int iters, int warmup, uint64_t iter_bytes);

// `total` bytes or elements cut into pieces of `piece` (a ring step into slices, a step into
// messages): how many, and how long the k-th is (the last may be shorter).
inline size_t piece_count(size_t total, size_t piece) {
  return (total + piece - 1) / piece;
}
inline size_t piece_length(size_t total, size_t piece, size_t k) {
  return std::min(piece, total - k * piece);
}

// The slice (in 4-byte elements) that NCCL's Simple protocol cuts a ring all-reduce's chunk of
// `chunk_floats` into (`--slice-bytes nccl`): SlicePerChunk = ALLREDUCE_CHUNKSTEPS /
// ALLREDUCE_SLICESTEPS = 2 slices of half the chunk, rounded up to 16 elements, at least
// stepSize * StepPerSlice / 32 (32 KiB with the default 4 MiB NCCL_BUFFSIZE: 8 steps of 512 KiB,
// 2 per slice), and at most half of its largest chunk (4 steps, 2 MiB): 1 MiB. A chunk at most
// twice the least slice goes in one slice of at most that least size and the rest. Chunks
// above 2 MiB are, in NCCL, several loops of 2 MiB chunks: cut here into 1 MiB slices, the
// same except for the last loop's smaller ones.
inline constexpr uint64_t kNcclMinSliceBytes = 32 * 1024;
inline constexpr uint64_t kNcclMaxSliceBytes = 1024 * 1024;
size_t nccl_slice_floats(size_t chunk_floats);

// How many messages of `bytes` are kept in flight: `window`, reduced so the buffers of one
// direction fit in `buffer_bytes`, and at least 1.
int plan_window(uint64_t bytes, int window, uint64_t buffer_bytes);

}  // namespace mesh::bench
