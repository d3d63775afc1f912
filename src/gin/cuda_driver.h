// SPDX-License-Identifier: Apache-2.0
// The few CUDA driver calls GIN over TCP needs to move bytes between the network and GPU
// memory, found at run time with dlopen("libcuda.so.1"): the plugin has no link-time CUDA
// dependency and loads on hosts without a GPU. Without the driver, GIN advertises host memory
// only (one INFO says so) and refuses NCCL_PTR_CUDA registrations.
//
// Why a stream of our own: NCCL's GIN kernel keeps running while it waits for the signals our
// engine writes. A synchronous driver copy (cuMemcpyHtoD/DtoH) goes to the legacy default
// stream, which waits for the work already queued in every blocking stream of the context, the
// waiting kernel included: the copy never starts and the kernel never ends (seen on an H200 with
// NCCL 2.28.9: every rank of the GIN all-to-all hung). So every copy goes to one non-blocking
// stream per primary context (CU_STREAM_NON_BLOCKING: ordered after nothing but itself) and is
// awaited on that stream alone.
//
// Threads: load() once from any thread. retain_context()/release_context() run on NCCL's thread
// at registration and deregistration; the stream is made with the first retain and destroyed
// with the last release (the context pushed and popped: NCCL's thread keeps its own current
// context). Copies run on the GIN engine threads, which make the context current first; a copy
// holds its stream's lock shared, a destroy holds it exclusively.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
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
  // primary context (retained, with its copy stream; release_context gives both back).
  bool context_of(const void* ptr, void** context, int* device, std::string* why);
  void release_context(void* context, int device);
  // Copies on the calling thread with `context` current, through the context's own
  // non-blocking stream, and returns when the bytes have arrived. False with *why on an error.
  bool to_device(void* context, void* dst, const void* src, size_t n, std::string* why);
  bool to_host(void* context, void* dst, const void* src, size_t n, std::string* why);

 private:
  CudaDriver();
  bool load(const char* library);
  // One per primary context ever retained (a handful: one per GPU); never erased, so a copy may
  // hold a pointer to it without the map's lock.
  struct ContextStream {
    std::shared_mutex mu;  // shared: a copy; exclusive: making or destroying the stream
    void* stream = nullptr;
    int retains = 0;  // registrations that hold the context (guarded by the map's lock)
  };
  ContextStream* stream_of(void* context);
  bool copy(void* context, bool to_device, void* dst, const void* src, size_t n, std::string* why);

  bool available_ = false;
  std::string why_;
  void* lib_ = nullptr;
  std::mutex streams_mu_;
  std::map<void*, std::unique_ptr<ContextStream>> streams_;
  // int (*)(...) as the driver declares them (CUresult is an int enum; CUdeviceptr 64 bits;
  // CUstream and CUcontext pointers).
  int (*init_)(unsigned) = nullptr;
  int (*pointer_attribute_)(void*, int, unsigned long long) = nullptr;
  int (*device_get_)(int*, int) = nullptr;
  int (*primary_retain_)(void**, int) = nullptr;
  int (*primary_release_)(int) = nullptr;
  int (*ctx_set_current_)(void*) = nullptr;
  int (*ctx_push_)(void*) = nullptr;
  int (*ctx_pop_)(void**) = nullptr;
  int (*stream_create_)(void**, unsigned) = nullptr;
  int (*stream_destroy_)(void*) = nullptr;
  int (*stream_sync_)(void*) = nullptr;
  int (*htod_async_)(unsigned long long, const void*, size_t, void*) = nullptr;
  int (*dtoh_async_)(void*, unsigned long long, size_t, void*) = nullptr;
};

}  // namespace mesh::gin
