// SPDX-License-Identifier: Apache-2.0
// Device-side buffer filling: the only code that runs on the GPU besides NCCL's own kernels.
#ifndef NCCL_MESH_TESTS_GPU_KERNELS_H
#define NCCL_MESH_TESTS_GPU_KERNELS_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "reference.h"

namespace e2e {

// Writes inputValue(kind, seed, rank, nranks, firstIndex + i) as dtype `elt` into element i of
// `dst`, for i < elems, asynchronously on `stream`. Filling on the GPU keeps 256 MiB cases cheap;
// the host never sees these values except through its own reference computation.
cudaError_t launchFill(void* dst, Elt elt, size_t elems, ValueKind kind, uint32_t seed, int rank,
                       int nranks, uint64_t firstIndex, cudaStream_t stream);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_KERNELS_H
