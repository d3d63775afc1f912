// SPDX-License-Identifier: Apache-2.0
// The few CUDA driver calls GIN over TCP needs to move bytes between the network and GPU
// memory, found at run time with dlopen("libcuda.so.1"): the plugin has no link-time CUDA
// dependency and loads on hosts without a GPU. Without the driver, GIN advertises host memory
// only (one INFO says so) and refuses NCCL_PTR_CUDA registrations.
//
// Threads: load() once (call_once) from any thread; a Device is made on NCCL's thread at
// registration and used by the GIN engine thread (copies make its context current first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace mesh::gin {

class CudaDriver {
 public:
  // The process's driver, loaded on first use; available() is false when it is absent or
  // cuInit fails (the reason in why()).
  static CudaDriver& instance();
  bool available() const { return available_; }
  const std::string& why() const { return why_; }

  // For a registration: true when `ptr` is device memory of this process; fills the device's
  // primary context (retained; release_context(*device) gives it back).
  bool context_of(const void* ptr, void** context, int* device, std::string* why);
  void release_context(int device);
  // Copies on the calling thread with `context` current. False with *why on a driver error.
  bool to_device(void* context, void* dst, const void* src, size_t n, std::string* why);
  bool to_host(void* context, void* dst, const void* src, size_t n, std::string* why);

 private:
  CudaDriver();
  bool load(const char* library);

  bool available_ = false;
  std::string why_;
  void* lib_ = nullptr;
  // int (*)(...) as the driver declares them (CUresult is an int enum; CUdeviceptr 64 bits).
  int (*init_)(unsigned) = nullptr;
  int (*pointer_attribute_)(void*, int, unsigned long long) = nullptr;
  int (*device_get_)(int*, int) = nullptr;
  int (*primary_retain_)(void**, int) = nullptr;
  int (*primary_release_)(int) = nullptr;
  int (*ctx_set_current_)(void*) = nullptr;
  int (*htod_)(unsigned long long, const void*, size_t) = nullptr;
  int (*dtoh_)(void*, unsigned long long, size_t) = nullptr;
};

}  // namespace mesh::gin
