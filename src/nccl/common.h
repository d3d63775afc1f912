// SPDX-License-Identifier: Apache-2.0
// What every version of NCCL's network-plugin ABI shares: result codes, the logger, pointer types,
// limits, and the device-offload handle (NCCL's nccl_common.h, net_device.h and the common part of
// src/include/plugin/nccl_net.h). Layers below the ABI tables include only this header; the
// per-version properties structs and tables are in net_v6.h ... net_v12.h.
//
// Values from those headers of NCCL 2.28.9 and of NCCL 2.30 (for v12); every
// size and offset NCCL depends on is checked by static_assert in src/abi/abi_layout_checks.cc.
// Plain C compatible so the conformance suite and tools can include it too.
#ifndef NCCL_MESH_NCCL_COMMON_H
#define NCCL_MESH_NCCL_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
  NCCL_INIT = 0x1,
  NCCL_COLL = 0x2,
  NCCL_P2P = 0x4,
  NCCL_SHM = 0x8,
  NCCL_NET = 0x10,
  NCCL_GRAPH = 0x20,
  NCCL_TUNING = 0x40,
  NCCL_ENV = 0x80,
  NCCL_ALLOC = 0x100,
  NCCL_CALL = 0x200,
  NCCL_PROXY = 0x400,
  NCCL_NVLS = 0x800,
  NCCL_BOOTSTRAP = 0x1000,
  NCCL_REG = 0x2000,
  NCCL_PROFILE = 0x4000,
  NCCL_RAS = 0x8000,
  NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                  int line, const char* fmt, ...);
typedef ncclResult_t (*ncclProfilerCallback_t)(void** eHandle, int type, void* pHandle,
                                               int64_t pluginId, void* extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_MAX_NET_SIZE_BYTES (1ULL * 1024 * 1024 * 1024 * 1024)  // 1 TiB
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
// Requests in flight a send or receive comm must accept (v7 and later; v6: net_v6.h).
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
// NCCL's MAX_NET_SIZE: v6-v8 pass int sizes, and NCCL's shims refuse more than 1 GiB.
#define NCCL_MESH_MAX_NET_SIZE_INT (1024LL * 1024 * 1024)
#define NCCL_MESH_MAX_COLLNET_SIZE (512LL * 1024 * 1024)
#define NCCL_PROXY_MAX_SUBS 64  // size of the int sizes[] array NCCL hands to test()

// Device offload (NCCL's net_device.h). A host plugin reports NCCL_NET_DEVICE_HOST and never
// touches the handle NCCL passes to connect/accept (v7 and later).
typedef enum {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
  NCCL_NET_DEVICE_GIN_PROXY = 2,
  NCCL_NET_DEVICE_GIN_GDAKI = 3
} ncclNetDeviceType;
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0

typedef struct {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v12_t;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NCCL_MESH_NCCL_COMMON_H
