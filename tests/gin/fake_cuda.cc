// SPDX-License-Identifier: Apache-2.0
// A stand-in for libcuda.so.1 with the nine driver calls GIN uses (src/gin/cuda_driver.h), for
// the GIN suite on machines without a GPU (NCCL_MESH_TEST_GIN_CUDA_LIBRARY points the plugin at
// it). "Device memory" is host memory: every pointer is reported as device memory of device 0,
// copies are memcpy. It checks what a real driver would refuse (a copy with no context current
// on the calling thread, an unknown context, releases without a retain) and counts every call,
// so the suite can assert that GPU memory was reached only through the driver.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {
std::atomic<long> g_htod{0}, g_dtoh{0}, g_retained{0}, g_errors{0};
thread_local void* g_current = nullptr;
void* const kContext = reinterpret_cast<void*>(0x1000);
constexpr int kMemoryType = 2, kDeviceOrdinal = 9, kMemoryTypeDevice = 2;
constexpr int kInvalidValue = 1, kInvalidContext = 201;

// An aligned 8-byte copy is one atomic access, as a GPU sees a signal word; the suite's waits
// read such words with acquire loads (and TSan sees the same ordering a GPU would give).
void copy(void* dst, const void* src, size_t n) {
  if (n == 8 && reinterpret_cast<uintptr_t>(dst) % 8 == 0 &&
      reinterpret_cast<uintptr_t>(src) % 8 == 0) {
    __atomic_store_n(static_cast<uint64_t*>(dst),
                     __atomic_load_n(static_cast<const uint64_t*>(src), __ATOMIC_ACQUIRE),
                     __ATOMIC_RELEASE);
    return;
  }
  std::memcpy(dst, src, n);
}
}  // namespace

extern "C" {
__attribute__((visibility("default"))) int cuInit(unsigned) {
  return 0;
}
__attribute__((visibility("default"))) int cuPointerGetAttribute(void* out, int attr,
                                                                 unsigned long long) {
  if (attr == kMemoryType) {
    *static_cast<unsigned*>(out) = kMemoryTypeDevice;
    return 0;
  }
  if (attr == kDeviceOrdinal) {
    *static_cast<int*>(out) = 0;
    return 0;
  }
  return kInvalidValue;
}
__attribute__((visibility("default"))) int cuDeviceGet(int* device, int ordinal) {
  *device = ordinal;
  return 0;
}
__attribute__((visibility("default"))) int cuDevicePrimaryCtxRetain(void** ctx, int device) {
  if (device != 0) return kInvalidValue;
  *ctx = kContext;
  g_retained.fetch_add(1);
  return 0;
}
__attribute__((visibility("default"))) int cuDevicePrimaryCtxRelease_v2(int device) {
  if (device != 0 || g_retained.fetch_sub(1) <= 0) g_errors.fetch_add(1);
  return 0;
}
__attribute__((visibility("default"))) int cuCtxSetCurrent(void* ctx) {
  if (ctx != kContext) {
    g_errors.fetch_add(1);
    return kInvalidContext;
  }
  g_current = ctx;
  return 0;
}
__attribute__((visibility("default"))) int cuMemcpyHtoD_v2(unsigned long long dst, const void* src,
                                                           size_t n) {
  if (g_current != kContext) {
    g_errors.fetch_add(1);
    return kInvalidContext;
  }
  copy(reinterpret_cast<void*>(dst), src, n);
  g_htod.fetch_add(1);
  return 0;
}
__attribute__((visibility("default"))) int cuMemcpyDtoH_v2(void* dst, unsigned long long src,
                                                           size_t n) {
  if (g_current != kContext) {
    g_errors.fetch_add(1);
    return kInvalidContext;
  }
  copy(dst, reinterpret_cast<const void*>(src), n);
  g_dtoh.fetch_add(1);
  return 0;
}
// For the suite: the counts so far.
__attribute__((visibility("default"))) void fake_cuda_counts(long* htod, long* dtoh, long* retained,
                                                             long* errors) {
  *htod = g_htod.load();
  *dtoh = g_dtoh.load();
  *retained = g_retained.load();
  *errors = g_errors.load();
}
}  // extern "C"
