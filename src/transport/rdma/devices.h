// SPDX-License-Identifier: Apache-2.0
// RDMA devices as the transport uses them: which RDMA port (and GID) serves each mesh
// interface, and the opened devices (verbs context, protection domain, registration cache,
// async-event thread). Devices are opened on first use and closed when the plugin shuts down.
//
// Threads: bind_interfaces() runs once at init under the plugin mutex. open() and the
// registration cache are used from NCCL's proxy service thread and from the handshake service
// thread (the listener creates its QPs there), so they take the registry's / cache's mutex.
// Each opened device has one async-event thread that marks connections failed (FailureLatch).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "topology/interface.h"
#include "topology/rdma_sysfs.h"
#include "transport/failure_latch.h"
#include "transport/rdma/verbs_api.h"

namespace mesh::rdma {

// The RDMA port behind one mesh interface, as chosen from sysfs.
struct PortBinding {
  bool usable = false;
  std::string device;  // "rxe_ab", "mlx5_0"
  int port = 1;
  int gid_index = -1;  // -1 with use_lid (InfiniBand)
  topology::Gid gid{};
  bool use_lid = false;
  std::string why;  // why usable or not (for INFO/WARN lines and nccl-mesh-doctor)
};

// One entry per interface of `used`, same order. `gid_override` is NCCL_MESH_GID_INDEX (< 0:
// automatic). `sysfs_root` is "/sys" except in tests.
std::vector<PortBinding> bind_interfaces(const std::vector<topology::Interface>& used,
                                         int gid_override, const std::string& sysfs_root = "/sys");

// A page-aligned registration shared by every overlapping regMr of the same memory.
struct CachedMr {
  uintptr_t start = 0;
  uintptr_t end = 0;
  ibv_mr* mr = nullptr;
  int refs = 0;
};

class VerbsDevice {
 public:
  VerbsDevice(const VerbsApi* api, std::string name, ibv_context* ctx, ibv_pd* pd);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  const std::string& name() const { return name_; }
  ibv_context* context() const { return ctx_; }
  ibv_pd* pd() const { return pd_; }
  const VerbsApi* api() const { return api_; }

  // Registers [addr, addr+size) (rounded out to pages) or reuses a registration covering it.
  CachedMr* acquire_mr(void* addr, size_t size, std::string* why);
  // Registers a dma-buf (GPU memory); not cached (NCCL registers each dma-buf once).
  CachedMr* acquire_dmabuf_mr(void* addr, size_t size, uint64_t offset, int fd, std::string* why);
  void release_mr(CachedMr* mr);
  bool dmabuf_supported();

  // The async thread reports QP events to the connection's latch registered for the QP number.
  void watch_qp(uint32_t qpn, std::weak_ptr<FailureLatch> latch);
  void unwatch_qp(uint32_t qpn);
  // The same for a completion queue (IBV_EVENT_CQ_ERR: every connection on it fails).
  void watch_cq(const ibv_cq* cq, std::weak_ptr<FailureLatch> latch);
  void unwatch_cq(const ibv_cq* cq);

 private:
  void async_loop();

  const VerbsApi* api_;
  std::string name_;
  ibv_context* ctx_;
  ibv_pd* pd_;
  std::mutex mr_mu_;
  std::vector<std::unique_ptr<CachedMr>> mrs_;
  std::optional<bool> dmabuf_;
  std::mutex watch_mu_;
  std::map<uint32_t, std::weak_ptr<FailureLatch>> watched_;
  std::map<const ibv_cq*, std::weak_ptr<FailureLatch>> watched_cqs_;
  std::atomic<bool> stop_{false};
  std::thread async_;
};

class DeviceRegistry {
 public:
  // Loads libibverbs; false (with *why) when it is absent.
  bool available(std::string* why);
  // The opened device `name`, opening it on first use.
  VerbsDevice* open(const std::string& name, std::string* why);
  // Closes every device; the caller guarantees no connection uses them any more.
  void close_all();

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<VerbsDevice>> devices_;
};

}  // namespace mesh::rdma
