// SPDX-License-Identifier: Apache-2.0
// Loads the plugin the way NCCL does (dlopen RTLD_NOW|RTLD_LOCAL, dlsym of ncclNetPlugin_vN) and
// wraps each exported ABI version behind one C++ interface, so every test is written once and run
// against v6 ... v12. The adapters reproduce what NCCL's own per-version shims do (int sizes for
// v6-v8, no device handles for v6, config passed to connect for v10, init once per process before
// v11, ...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nccl/net.h"

namespace conformance {

inline constexpr int kVersions[] = {6, 7, 8, 9, 10, 11, 12};
// Requests a comm must accept in flight: NCCL_NET_MAX_REQUESTS of the NCCL releases that use the
// version (8 for v6, NCCL 2.13-2.18; 32 from v7 on).
inline constexpr int max_requests(int version) {
  return version == 6 ? NCCL_NET_MAX_REQUESTS_V6 : NCCL_NET_MAX_REQUESTS;
}
inline constexpr size_t kHandleBytes = NCCL_NET_HANDLE_MAXSIZE;
// The value NCCL may store in *request before irecv (v9+): completion is optional.
inline void* const kOptionalRecvCompletion =
    reinterpret_cast<void*>(static_cast<uintptr_t>(NCCL_NET_OPTIONAL_RECV_COMPLETION));

// getProperties of any version, widened to one struct. Fields a version lacks are flagged.
struct DeviceProps {
  const char* name = nullptr;  // as returned: NCCL keeps the pointer
  const char* pci_path = nullptr;
  uint64_t guid = 0;
  int ptr_support = 0;
  int reg_is_global = 0;
  int speed = 0;
  int port = 0;
  float latency = 0;
  int max_comms = 0;
  int max_recvs = 0;
  bool has_device_type = false;  // v7+: netDeviceType, netDeviceVersion
  int net_device_type = -1;
  int net_device_version = -1;
  bool has_v9_fields = false;  // forceFlush, vProps, maxP2pBytes, maxCollBytes
  int force_flush = 0;
  ncclNetVDeviceProps_v12_t vprops{};  // the widest (v12: 8 devices); v9-v11 fill 4
  size_t max_p2p_bytes = 0;
  size_t max_coll_bytes = 0;
  bool has_max_multi_request_size = false;  // v11+
  int max_multi_request_size = 0;
  bool has_rail_and_plane = false;  // v12
  int rail_id = 0;
  int plane_id = 0;
};

class NetApi {
 public:
  virtual ~NetApi() = default;

  virtual int version() const = 0;
  virtual const char* name() const = 0;

  // v11+: creates one context (NCCL: once per communicator). v6-v10: runs the plugin's init the
  // first time this version is initialised in the process (NCCL's shim does it once per process)
  // and returns its result again afterwards; *ctx is set to nullptr.
  virtual ncclResult_t init(uint64_t comm_id, void** ctx) = 0;
  // v11+ finalize(ctx); a no-op returning ncclSuccess before v11 (NCCL never finalizes those).
  virtual ncclResult_t finalize(void* ctx) = 0;

  virtual ncclResult_t devices(int* ndev) = 0;
  virtual ncclResult_t get_properties(int dev, DeviceProps* props) = 0;

  // `ctx` is ignored before v11; `dev_comm` is not passed to v6 (its connect/accept have none).
  virtual ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) = 0;
  virtual ncclResult_t connect(void* ctx, int dev, void* handle, void** send_comm,
                               ncclNetDeviceHandle_v11_t** dev_comm) = 0;
  virtual ncclResult_t accept(void* listen_comm, void** recv_comm,
                              ncclNetDeviceHandle_v11_t** dev_comm) = 0;

  virtual ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  virtual ncclResult_t dereg_mr(void* comm, void* mhandle) = 0;

  virtual ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                             void** request) = 0;
  // A single receive (n = 1). *request holds NCCL's input value on entry: nullptr, or
  // kOptionalRecvCompletion for v9+ (the v6-v8 adapters clear it, as NCCL's shims do).
  virtual ncclResult_t irecv(void* recv_comm, void* data, size_t capacity, int tag, void* mhandle,
                             void** request) = 0;
  virtual ncclResult_t test(void* request, int* done, int* sizes) = 0;
  // One received buffer (n = 1), as NCCL flushes GPU receives before the kernel reads them.
  virtual ncclResult_t iflush(void* recv_comm, void* data, int size, void* mhandle,
                              void** request) = 0;

  virtual ncclResult_t close_send(void* send_comm) = 0;
  virtual ncclResult_t close_recv(void* recv_comm) = 0;
  virtual ncclResult_t close_listen(void* listen_comm) = 0;
};

// dlopens `plugin_path` (once per process; never closed, like a nodelete plugin) and returns the
// adapter for `version`, or nullptr with *error set when the library or symbol is missing.
std::unique_ptr<NetApi> open_net(const std::string& plugin_path, int version, std::string* error);

// The raw exported table, for tests that check the table itself (name, NULL members).
const void* find_table(const std::string& plugin_path, int version, std::string* error);

const char* result_name(ncclResult_t rc);

}  // namespace conformance
