// SPDX-License-Identifier: Apache-2.0
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels.h"
#include "values.h"

namespace e2e {
namespace {

template <typename T>
__device__ T fromInt(int v) {
  return static_cast<T>(v);
}
template <>
__device__ __half fromInt<__half>(int v) {
  return __int2half_rn(v);
}
template <>
__device__ __nv_bfloat16 fromInt<__nv_bfloat16>(int v) {
  return __int2bfloat16_rn(v);
}

template <typename T>
__global__ void fillKernel(T* dst, size_t elems, ValueKind kind, uint32_t seed, int rank,
                           int nranks, uint64_t firstIndex) {
  const size_t step = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < elems;
       i += step) {
    dst[i] = fromInt<T>(inputValue(kind, seed, rank, nranks, firstIndex + i));
  }
}

template <typename T>
cudaError_t launchTyped(void* dst, size_t elems, ValueKind kind, uint32_t seed, int rank,
                        int nranks, uint64_t firstIndex, cudaStream_t stream) {
  constexpr unsigned kThreads = 256;
  // A grid-stride loop with a bounded grid: enough blocks to fill the GPU, not one per element.
  const size_t wanted = (elems + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(std::min<size_t>(wanted, 4096));
  fillKernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<T*>(dst), elems, kind, seed, rank,
                                                 nranks, firstIndex);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launchFill(void* dst, Elt elt, size_t elems, ValueKind kind, uint32_t seed, int rank,
                       int nranks, uint64_t firstIndex, cudaStream_t stream) {
  if (elems == 0) return cudaSuccess;
  switch (elt) {
    case Elt::kInt8:
      return launchTyped<int8_t>(dst, elems, kind, seed, rank, nranks, firstIndex, stream);
    case Elt::kInt32:
      return launchTyped<int32_t>(dst, elems, kind, seed, rank, nranks, firstIndex, stream);
    case Elt::kInt64:
      return launchTyped<int64_t>(dst, elems, kind, seed, rank, nranks, firstIndex, stream);
    case Elt::kFloat16:
      return launchTyped<__half>(dst, elems, kind, seed, rank, nranks, firstIndex, stream);
    case Elt::kBfloat16:
      return launchTyped<__nv_bfloat16>(dst, elems, kind, seed, rank, nranks, firstIndex, stream);
    case Elt::kFloat32:
      return launchTyped<float>(dst, elems, kind, seed, rank, nranks, firstIndex, stream);
    case Elt::kFloat64:
      return launchTyped<double>(dst, elems, kind, seed, rank, nranks, firstIndex, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace e2e
