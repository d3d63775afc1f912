// SPDX-License-Identifier: Apache-2.0
#include "gin/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

#include "util/settings.h"

namespace mesh::gin {

namespace {
// CUDA driver API values (cuda.h), as facts: pointer attributes and the memory type.
constexpr int kAttrMemoryType = 2;         // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kAttrDeviceOrdinal = 9;      // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr unsigned kMemoryTypeDevice = 2;  // CU_MEMORYTYPE_DEVICE

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
      !find(lib_, "cuCtxSetCurrent", &ctx_set_current_) || !find(lib_, "cuMemcpyHtoD_v2", &htod_) ||
      !find(lib_, "cuMemcpyDtoH_v2", &dtoh_)) {
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
  *device_out = device;
  return true;
}

void CudaDriver::release_context(int device) {
  if (available_) primary_release_(device);
}

bool CudaDriver::to_device(void* context, void* dst, const void* src, size_t n, std::string* why) {
  int rc = ctx_set_current_(context);
  if (rc == 0) rc = htod_(reinterpret_cast<uintptr_t>(dst), src, n);
  if (rc != 0) *why = code("cuMemcpyHtoD", rc);
  return rc == 0;
}

bool CudaDriver::to_host(void* context, void* dst, const void* src, size_t n, std::string* why) {
  int rc = ctx_set_current_(context);
  if (rc == 0) rc = dtoh_(dst, reinterpret_cast<uintptr_t>(src), n);
  if (rc != 0) *why = code("cuMemcpyDtoH", rc);
  return rc == 0;
}

}  // namespace mesh::gin
