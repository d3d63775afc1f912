// SPDX-License-Identifier: Apache-2.0
// Input values of the end-to-end test: one function, compiled for the GPU (to fill buffers) and
// for the host (to compute the reference), so both sides agree on every element.
//
// Values are small integers. Every sum, product, max and min NCCL can form from them, in any
// order and in every dtype down to bfloat16's 8-bit significand, is exact, so results are
// compared exactly; only float averages (NCCL pre-multiplies by 1/n) need a tolerance.
#ifndef NCCL_MESH_TESTS_GPU_VALUES_H
#define NCCL_MESH_TESTS_GPU_VALUES_H

#include <cstdint>

#if defined(__CUDACC__)
#define E2E_HOST_DEVICE __host__ __device__
#else
#define E2E_HOST_DEVICE
#endif

namespace e2e {

// Which value distribution a buffer holds; chosen by the reduction op under test.
enum class ValueKind : uint8_t {
  kGeneral,  // [-15, 15]: a sum over 5 ranks stays in [-75, 75], exact in int8 and bfloat16
  kProduct,  // {-2, -1, 1, 2}: a product over 5 ranks is at most 32 in magnitude
  kAverage,  // nranks * [-3, 3]: the sum is divisible by nranks, so integer averages are exact
};

// splitmix64's finalizer: neighbouring indices get unrelated values, so a chunk delivered to
// the wrong offset (which is always a power-of-two-ish distance away) cannot go unnoticed.
E2E_HOST_DEVICE inline uint64_t mixBits(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// 64 random bits shared by ranks 8*group .. 8*group+7 at one index: each rank takes one byte.
// One hash serves up to 8 ranks, which keeps the host reference (n values per element for a
// reduction, hundreds of MiB per case) cheap.
E2E_HOST_DEVICE inline uint64_t valueBits(uint32_t seed, int rankGroup, uint64_t index) {
  return mixBits(index * 0x9e3779b97f4a7c15ULL +
                 static_cast<uint64_t>(seed) * 0xd1b54a32d192ed03ULL +
                 static_cast<uint64_t>(rankGroup) * 0x8cb92ba72f3d8dd7ULL);
}

E2E_HOST_DEVICE inline unsigned rankByte(uint64_t bits, int rank) {
  return static_cast<unsigned>(bits >> (8 * (rank & 7))) & 0xffu;
}

E2E_HOST_DEVICE inline int valueFromByte(ValueKind kind, unsigned byte, int nranks) {
  switch (kind) {
    case ValueKind::kProduct:
      return ((byte & 1) ? 2 : 1) * ((byte & 2) ? -1 : 1);
    case ValueKind::kAverage:
      return nranks * (static_cast<int>(byte % 7) - 3);
    case ValueKind::kGeneral:
    default:
      return static_cast<int>(byte % 31) - 15;
  }
}

// Element `index` of the input of `rank` in the case identified by `seed`. Every case gets its
// own seed so data left over from an earlier case never looks right.
E2E_HOST_DEVICE inline int inputValue(ValueKind kind, uint32_t seed, int rank, int nranks,
                                      uint64_t index) {
  return valueFromByte(kind, rankByte(valueBits(seed, rank / 8, index), rank), nranks);
}

// Byte written over every output buffer (and the guard behind it) before a collective runs.
// 0x7F.. is NaN in float16, ~3e38 in float32/bfloat16, and 127 or more in the integer types:
// never an expected value, so an element NCCL failed to write is always reported.
constexpr uint8_t kSentinelByte = 0x7F;

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_VALUES_H
