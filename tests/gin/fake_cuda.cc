// SPDX-License-Identifier: Apache-2.0
// A stand-in for libcuda.so.1 with the driver calls GIN uses (src/gin/cuda_driver.h), for the
// GIN suite on machines without a GPU (NCCL_MESH_TEST_GIN_CUDA_LIBRARY points the plugin at it).
// "Device memory" is host memory: every pointer is reported as device memory of device 0,
// copies are memcpy. It checks what a real driver would refuse (a copy with no context current
// on the calling thread, an unknown context or stream, releases without a retain, a stream
// destroyed twice or left behind) and counts every call, so the suite can assert that GPU memory
// was reached only through the driver.
//
// A running kernel, as the suite starts one with fake_cuda_kernel_begin() (NCCL's GIN kernel
// that waits for signals): a real driver orders a copy on the legacy default stream (the
// synchronous cuMemcpyHtoD/DtoH, or stream 0) and on a blocking stream after the kernels queued
// in blocking streams, so such a copy here waits until the kernel ends (fake_cuda_kernel_end),
// at most 30 s, and is counted in `queued`. Only a stream made with CU_STREAM_NON_BLOCKING
// copies at once.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>

namespace {
std::atomic<long> g_htod{0}, g_dtoh{0}, g_retained{0}, g_errors{0}, g_queued{0};
thread_local void* g_current = nullptr;
thread_local int g_pushed = 0;  // cuCtxPushCurrent depth on this thread
void* const kContext = reinterpret_cast<void*>(0x1000);
constexpr int kMemoryType = 2, kDeviceOrdinal = 9, kMemoryTypeDevice = 2;
constexpr int kInvalidValue = 1, kInvalidContext = 201, kInvalidHandle = 400;
constexpr unsigned kNonBlocking = 1;

struct Stream {
  unsigned flags;
};
std::mutex g_mu;
std::condition_variable g_kernel_done;
int g_kernels = 0;                  // kernels running in blocking streams (guarded by g_mu)
std::set<const Stream*> g_streams;  // live streams (guarded by g_mu)

// A copy the driver would order after the running kernels: wait for them (bounded).
void order_after_kernels() {
  std::unique_lock<std::mutex> lock(g_mu);
  if (g_kernels == 0) return;
  g_queued.fetch_add(1);
  g_kernel_done.wait_for(lock, std::chrono::seconds(30), [] { return g_kernels == 0; });
}

// Checks a stream argument: 0 is the legacy default stream; otherwise it must be live.
bool known_stream(void* stream, bool* orders_after_kernels) {
  if (stream == nullptr) {
    *orders_after_kernels = true;
    return true;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  auto* s = static_cast<const Stream*>(stream);
  if (g_streams.count(s) == 0) return false;
  *orders_after_kernels = (s->flags & kNonBlocking) == 0;
  return true;
}

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
__attribute__((visibility("default"))) int cuCtxPushCurrent_v2(void* ctx) {
  if (ctx != kContext) {
    g_errors.fetch_add(1);
    return kInvalidContext;
  }
  ++g_pushed;
  return 0;
}
__attribute__((visibility("default"))) int cuCtxPopCurrent_v2(void** ctx) {
  if (g_pushed == 0) {
    g_errors.fetch_add(1);
    return kInvalidContext;
  }
  --g_pushed;
  if (ctx != nullptr) *ctx = kContext;
  return 0;
}
// Stream calls need the context current or pushed on the calling thread, as a real driver's do.
static bool context_on_thread() {
  if (g_current == kContext || g_pushed > 0) return true;
  g_errors.fetch_add(1);
  return false;
}
__attribute__((visibility("default"))) int cuStreamCreate(void** stream, unsigned flags) {
  if (!context_on_thread()) return kInvalidContext;
  auto* s = new Stream{flags};
  std::lock_guard<std::mutex> lock(g_mu);
  g_streams.insert(s);
  *stream = s;
  return 0;
}
__attribute__((visibility("default"))) int cuStreamDestroy_v2(void* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto* s = static_cast<Stream*>(stream);
  if (g_streams.erase(s) == 0) {
    g_errors.fetch_add(1);
    return kInvalidHandle;
  }
  delete s;
  return 0;
}
__attribute__((visibility("default"))) int cuStreamSynchronize(void* stream) {
  bool unused = false;
  if (!known_stream(stream, &unused)) {
    g_errors.fetch_add(1);
    return kInvalidHandle;
  }
  return 0;  // the copies below complete before they return
}
static int copy_call(void* dst, const void* src, size_t n, void* stream, std::atomic<long>* count) {
  if (g_current != kContext) {
    g_errors.fetch_add(1);
    return kInvalidContext;
  }
  bool ordered = false;
  if (!known_stream(stream, &ordered)) {
    g_errors.fetch_add(1);
    return kInvalidHandle;
  }
  if (ordered) order_after_kernels();
  copy(dst, src, n);
  count->fetch_add(1);
  return 0;
}
__attribute__((visibility("default"))) int cuMemcpyHtoDAsync_v2(unsigned long long dst,
                                                                const void* src, size_t n,
                                                                void* stream) {
  return copy_call(reinterpret_cast<void*>(dst), src, n, stream, &g_htod);
}
__attribute__((visibility("default"))) int cuMemcpyDtoHAsync_v2(void* dst, unsigned long long src,
                                                                size_t n, void* stream) {
  return copy_call(dst, reinterpret_cast<const void*>(src), n, stream, &g_dtoh);
}
// The synchronous copies go to the legacy default stream (a plugin before the fix used them).
__attribute__((visibility("default"))) int cuMemcpyHtoD_v2(unsigned long long dst, const void* src,
                                                           size_t n) {
  return copy_call(reinterpret_cast<void*>(dst), src, n, nullptr, &g_htod);
}
__attribute__((visibility("default"))) int cuMemcpyDtoH_v2(void* dst, unsigned long long src,
                                                           size_t n) {
  return copy_call(dst, reinterpret_cast<const void*>(src), n, nullptr, &g_dtoh);
}
// For the suite: a kernel starts or ends in a blocking stream.
__attribute__((visibility("default"))) void fake_cuda_kernel_begin() {
  std::lock_guard<std::mutex> lock(g_mu);
  ++g_kernels;
}
__attribute__((visibility("default"))) void fake_cuda_kernel_end() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    --g_kernels;
  }
  g_kernel_done.notify_all();
}
// For the suite: the counts so far (streams: live streams; queued: copies that waited for a
// running kernel).
__attribute__((visibility("default"))) void fake_cuda_counts(long* htod, long* dtoh, long* retained,
                                                             long* errors) {
  *htod = g_htod.load();
  *dtoh = g_dtoh.load();
  *retained = g_retained.load();
  *errors = g_errors.load();
}
__attribute__((visibility("default"))) void fake_cuda_streams(long* live, long* queued) {
  std::lock_guard<std::mutex> lock(g_mu);
  *live = static_cast<long>(g_streams.size());
  *queued = g_queued.load();
}
}  // extern "C"
