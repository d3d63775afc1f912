// SPDX-License-Identifier: Apache-2.0
#include "gin/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

#include "util/settings.h"

namespace mesh::gin {

namespace {
// CUDA driver API values (cuda.h), as facts: pointer attributes, the memory type, stream flags.
constexpr int kAttrMemoryType = 2;          // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrDeviceOrdinal = 9;       // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeDevice = 2;   // CU_MEMORYTYPE_DEVICE
constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING

template <typename F>
bool find(void* lib, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(lib, name));
  return *out != nullptr;
}

std::string code(const char* call, int rc) {
  return std::string(call) + " failed (CUresult " + std::to_string(rc) + ")";
}
}  // namespace

CudaDriver& CudaDriver::instance() {
  static CudaDriver* driver = new CudaDriver;  // never destroyed: engine threads may outlive exit
  return *driver;
}

CudaDriver::CudaDriver() {
  // NCCL_MESH_TEST_GIN_CUDA_LIBRARY: another driver (the GIN suite loads a host-memory stand-in).
  const std::string& lib = settings().test_gin_cuda_library;
  available_ = load(lib.empty() ? "libcuda.so.1" : lib.c_str());
}

bool CudaDriver::load(const char* library) {
  lib_ = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) {
    const char* e = dlerror();
    why_ = std::string(library) + " not loadable (" + (e != nullptr ? e : "?") + ")";
    return false;
  }
  if (!find(lib_, "cuInit", &init_) || !find(lib_, "cuPointerGetAttribute", &pointer_attribute_) ||
      !find(lib_, "cuDeviceGet", &device_get_) ||
      !find(lib_, "cuDevicePrimaryCtxRetain", &primary_retain_) ||
      !find(lib_, "cuDevicePrimaryCtxRelease_v2", &primary_release_) ||
      !find(lib_, "cuCtxSetCurrent", &ctx_set_current_) ||
      !find(lib_, "cuCtxPushCurrent_v2", &ctx_push_) ||
      !find(lib_, "cuCtxPopCurrent_v2", &ctx_pop_) ||
      !find(lib_, "cuStreamCreate", &stream_create_) ||
      !find(lib_, "cuStreamDestroy_v2", &stream_destroy_) ||
      !find(lib_, "cuStreamSynchronize", &stream_sync_) ||
      !find(lib_, "cuMemcpyHtoDAsync_v2", &htod_async_) ||
      !find(lib_, "cuMemcpyDtoHAsync_v2", &dtoh_async_)) {
    why_ = std::string(library) + " lacks a driver function GIN needs";
    return false;
  }
  const int rc = init_(0);
  if (rc != 0) {
    why_ = code("cuInit", rc);
    return false;
  }
  return true;
}

bool CudaDriver::context_of(const void* ptr, void** context, int* device_out, std::string* why) {
  if (!available_) {
    *why = why_;
    return false;
  }
  unsigned type = 0;
  int rc = pointer_attribute_(&type, kAttrMemoryType, reinterpret_cast<uintptr_t>(ptr));
  if (rc != 0 || type != kMemoryTypeDevice) {
    *why = rc != 0 ? code("cuPointerGetAttribute(MEMORY_TYPE)", rc)
                   : "the pointer is not device memory (memory type " + std::to_string(type) + ")";
    return false;
  }
  int ordinal = -1;
  rc = pointer_attribute_(&ordinal, kAttrDeviceOrdinal, reinterpret_cast<uintptr_t>(ptr));
  if (rc != 0) {
    *why = code("cuPointerGetAttribute(DEVICE_ORDINAL)", rc);
    return false;
  }
  int device = 0;
  rc = device_get_(&device, ordinal);
  if (rc == 0) rc = primary_retain_(context, device);
  if (rc != 0) {
    *why = code("cuDevicePrimaryCtxRetain", rc);
    return false;
  }
  // The context's copy stream, made with its first registration (on this, NCCL's, thread:
  // pushed and popped, so the thread's own current context stays).
  std::lock_guard<std::mutex> lock(streams_mu_);
  std::unique_ptr<ContextStream>& s = streams_[*context];
  if (!s) s = std::make_unique<ContextStream>();
  if (s->retains == 0) {
    std::unique_lock<std::shared_mutex> exclusive(s->mu);
    rc = ctx_push_(*context);
    if (rc == 0) {
      rc = stream_create_(&s->stream, kStreamNonBlocking);
      void* popped = nullptr;
      ctx_pop_(&popped);
      if (rc != 0) s->stream = nullptr;
    }
    if (rc != 0) {
      *why = code("cuStreamCreate(CU_STREAM_NON_BLOCKING)", rc);
      primary_release_(device);
      return false;
    }
  }
  ++s->retains;
  *device_out = device;
  return true;
}

void CudaDriver::release_context(void* context, int device) {
  if (!available_) return;
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    auto it = streams_.find(context);
    if (it != streams_.end() && it->second->retains > 0 && --it->second->retains == 0) {
      ContextStream& s = *it->second;
      std::unique_lock<std::shared_mutex> exclusive(s.mu);  // after the copies in flight
      if (s.stream != nullptr && ctx_push_(context) == 0) {
        stream_destroy_(s.stream);
        void* popped = nullptr;
        ctx_pop_(&popped);
      }
      s.stream = nullptr;
    }
  }
  primary_release_(device);
}

CudaDriver::ContextStream* CudaDriver::stream_of(void* context) {
  std::lock_guard<std::mutex> lock(streams_mu_);
  auto it = streams_.find(context);
  return it == streams_.end() ? nullptr : it->second.get();
}

bool CudaDriver::copy(void* context, bool to_device, void* dst, const void* src, size_t n,
                      std::string* why) {
  const char* call = to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
  ContextStream* s = stream_of(context);
  if (s == nullptr) {
    *why = std::string(call) + ": no registration holds this GPU context";
    return false;
  }
  std::shared_lock<std::shared_mutex> shared(s->mu);
  if (s->stream == nullptr) {
    *why = std::string(call) + ": the GPU memory's last registration was released";
    return false;
  }
  int rc = ctx_set_current_(context);
  if (rc != 0) {
    *why = code("cuCtxSetCurrent", rc);
    return false;
  }
  rc = to_device ? htod_async_(reinterpret_cast<uintptr_t>(dst), src, n, s->stream)
                 : dtoh_async_(dst, reinterpret_cast<uintptr_t>(src), n, s->stream);
  if (rc != 0) {
    *why = code(call, rc);
    return false;
  }
  rc = stream_sync_(s->stream);
  if (rc != 0) *why = code("cuStreamSynchronize", rc);
  return rc == 0;
}

bool CudaDriver::to_device(void* context, void* dst, const void* src, size_t n, std::string* why) {
  return copy(context, true, dst, src, n, why);
}

bool CudaDriver::to_host(void* context, void* dst, const void* src, size_t n, std::string* why) {
  return copy(context, false, dst, src, n, why);
}

}  // namespace mesh::gin
