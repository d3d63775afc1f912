// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/devices.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "util/log.h"
#include "util/socket_util.h"

namespace mesh::rdma {

std::vector<PortBinding> bind_interfaces(const std::vector<topology::Interface>& used,
                                         int gid_override, const std::string& sysfs_root) {
  const auto ports = topology::discover_rdma_ports(sysfs_root);
  std::vector<PortBinding> out;
  for (const topology::Interface& itf : used) {
    PortBinding b;
    const auto candidates = topology::ports_for_netdev(ports, itf.name);
    if (candidates.empty()) {
      b.why = "no RDMA port on " + itf.name;
      out.push_back(b);
      continue;
    }
    std::string tried;
    for (const topology::RdmaPort* p : candidates) {
      const auto choice = topology::select_gid(
          *p, itf.addr.addr,
          gid_override >= 0 ? std::optional<int>(gid_override) : std::optional<int>());
      const std::string where = p->device + " port " + std::to_string(p->port);
      // "4: ACTIVE"; an empty state (unreadable) is left to the verbs query at open time.
      if (!p->state.empty() && p->state.find("ACTIVE") == std::string::npos) {
        tried.append(tried.empty() ? "" : "; ").append(where).append(" is ").append(p->state);
        continue;
      }
      if (!choice.use_lid && !choice.index) {
        tried.append(tried.empty() ? "" : "; ").append(where).append(": ").append(choice.why);
        continue;
      }
      b.usable = true;
      b.device = p->device;
      b.port = p->port;
      b.use_lid = choice.use_lid;
      if (choice.index) {
        b.gid_index = *choice.index;
        for (const auto& e : p->gids) {
          if (e.index == b.gid_index) b.gid = e.gid;
        }
      }
      b.why = where + ", " + choice.why;
      break;
    }
    if (!b.usable) b.why = "RDMA port of " + itf.name + " unusable: " + tried;
    out.push_back(b);
  }
  return out;
}

VerbsDevice::VerbsDevice(const VerbsApi* api, std::string name, ibv_context* ctx, ibv_pd* pd)
    : api_(api), name_(std::move(name)), ctx_(ctx), pd_(pd) {
  // Non-blocking async fd, polled with a timeout so close_all() can stop the thread.
  const int flags = fcntl(ctx_->async_fd, F_GETFL);
  fcntl(ctx_->async_fd, F_SETFL, flags | O_NONBLOCK);
  async_ = std::thread([this] { async_loop(); });
}

VerbsDevice::~VerbsDevice() {
  stop_.store(true);
  if (async_.joinable()) async_.join();
  for (auto& m : mrs_) {
    if (m->mr != nullptr) api_->dereg_mr(m->mr);
  }
  mrs_.clear();
  api_->dealloc_pd(pd_);
  api_->close_device(ctx_);
}

void VerbsDevice::async_loop() {
  while (!stop_.load()) {
    pollfd p{ctx_->async_fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    ibv_async_event ev{};
    if (api_->get_async_event(ctx_, &ev) != 0) continue;
    const char* what = api_->event_type_str != nullptr ? api_->event_type_str(ev.event_type) : "";
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_PATH_MIG_ERR: {
        const uint32_t qpn = ev.element.qp->qp_num;
        std::shared_ptr<FailureLatch> latch;
        {
          std::lock_guard<std::mutex> lock(watch_mu_);
          auto it = watched_.find(qpn);
          if (it != watched_.end()) latch = it->second.lock();
        }
        if (latch) {
          latch->fail(ncclRemoteError, "asynchronous error on " + name_ + " QP " +
                                           std::to_string(qpn) + ": " + what + " (event " +
                                           std::to_string(ev.event_type) + ")");
        }
        break;
      }
      case IBV_EVENT_CQ_ERR: {
        // A completion queue overran or failed: its QP's completions are lost, so the
        // connection on it can only hang; fail it instead.
        const ibv_cq* cq = ev.element.cq;
        std::shared_ptr<FailureLatch> latch;
        {
          std::lock_guard<std::mutex> lock(watch_mu_);
          auto it = watched_cqs_.find(cq);
          if (it != watched_cqs_.end()) latch = it->second.lock();
        }
        MESH_WARN(
            "RDMA device %s: completion queue error (%s)%s; check dmesg and the provider's "
            "completion queue depth",
            name_.c_str(), what, latch ? ": the connection on it fails" : "");
        if (latch) {
          latch->fail(ncclSystemError, "completion queue error on " + name_ + ": " + what +
                                           " (event " + std::to_string(ev.event_type) + ")");
        }
        break;
      }
      case IBV_EVENT_DEVICE_FATAL: {
        MESH_WARN(
            "RDMA device %s reported a fatal error (%s): every connection on it fails; "
            "check dmesg and the NIC firmware",
            name_.c_str(), what);
        std::lock_guard<std::mutex> lock(watch_mu_);
        for (auto& [qpn, weak] : watched_) {
          if (auto latch = weak.lock())
            latch->fail(ncclRemoteError, "RDMA device " + name_ + " fatal error");
        }
        for (auto& [cq, weak] : watched_cqs_) {
          if (auto latch = weak.lock())
            latch->fail(ncclRemoteError, "RDMA device " + name_ + " fatal error");
        }
        break;
      }
      case IBV_EVENT_PORT_ERR:
        MESH_WARN("RDMA device %s port %d went down (%s): check the cable", name_.c_str(),
                  ev.element.port_num, what);
        break;
      default:
        MESH_INFO(NCCL_NET, "RDMA device %s: async event %s", name_.c_str(), what);
        break;
    }
    api_->ack_async_event(&ev);
  }
}

void VerbsDevice::watch_qp(uint32_t qpn, std::weak_ptr<FailureLatch> latch) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  watched_[qpn] = std::move(latch);
}

void VerbsDevice::unwatch_qp(uint32_t qpn) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  watched_.erase(qpn);
}

void VerbsDevice::watch_cq(const ibv_cq* cq, std::weak_ptr<FailureLatch> latch) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  watched_cqs_[cq] = std::move(latch);
}

void VerbsDevice::unwatch_cq(const ibv_cq* cq) {
  std::lock_guard<std::mutex> lock(watch_mu_);
  watched_cqs_.erase(cq);
}

namespace {
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
}

CachedMr* VerbsDevice::acquire_mr(void* addr, size_t size, std::string* why) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t start = a / page * page;
  const uintptr_t end = (a + std::max<size_t>(size, 1) + page - 1) / page * page;
  std::lock_guard<std::mutex> lock(mr_mu_);
  for (auto& m : mrs_) {
    if (m->mr != nullptr && m->start <= start && m->end >= end) {
      ++m->refs;
      return m.get();
    }
  }
  ibv_mr* mr = api_->reg_mr(pd_, reinterpret_cast<void*>(start), end - start, kAccess);
  if (mr == nullptr) {
    *why = "ibv_reg_mr of " + std::to_string(end - start) + " bytes on " + name_ +
           " failed: " + errno_text(errno) +
           " (check `ulimit -l`: registered memory must be lockable)";
    return nullptr;
  }
  auto m = std::make_unique<CachedMr>();
  m->start = start;
  m->end = end;
  m->mr = mr;
  m->refs = 1;
  mrs_.push_back(std::move(m));
  return mrs_.back().get();
}

CachedMr* VerbsDevice::acquire_dmabuf_mr(void* addr, size_t size, uint64_t offset, int fd,
                                         std::string* why) {
  if (api_->reg_dmabuf_mr == nullptr) {
    *why = "this libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than 34)";
    return nullptr;
  }
  ibv_mr* mr =
      api_->reg_dmabuf_mr(pd_, offset, size, reinterpret_cast<uintptr_t>(addr), fd, kAccess);
  if (mr == nullptr) {
    *why = "ibv_reg_dmabuf_mr of " + std::to_string(size) + " bytes on " + name_ +
           " failed: " + errno_text(errno);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mr_mu_);
  auto m = std::make_unique<CachedMr>();
  m->start = reinterpret_cast<uintptr_t>(addr);
  m->end = m->start + size;
  m->mr = mr;
  m->refs = 1;
  mrs_.push_back(std::move(m));
  // Never matched by acquire_mr: a dma-buf region is only reused through its own handle.
  mrs_.back()->start = mrs_.back()->end;
  return mrs_.back().get();
}

void VerbsDevice::release_mr(CachedMr* mr) {
  std::lock_guard<std::mutex> lock(mr_mu_);
  if (--mr->refs > 0) return;
  api_->dereg_mr(mr->mr);
  std::erase_if(mrs_, [mr](const std::unique_ptr<CachedMr>& m) { return m.get() == mr; });
}

bool VerbsDevice::dmabuf_supported() {
  std::lock_guard<std::mutex> lock(mr_mu_);
  if (!dmabuf_) {
    // Like NCCL's IB transport: a registration of fd -1 fails with EOPNOTSUPP/EPROTONOSUPPORT
    // when the kernel or provider cannot register dma-bufs, and with EBADF when it could.
    bool ok = false;
    if (api_->reg_dmabuf_mr != nullptr) {
      errno = 0;
      ibv_mr* mr = api_->reg_dmabuf_mr(pd_, 0, 4096, 0, -1, kAccess);
      if (mr != nullptr) api_->dereg_mr(mr);
      ok = errno != EOPNOTSUPP && errno != EPROTONOSUPPORT;
    }
    dmabuf_ = ok;
  }
  return *dmabuf_;
}

bool DeviceRegistry::available(std::string* why) {
  return load_verbs(why) != nullptr;
}

VerbsDevice* DeviceRegistry::open(const std::string& name, std::string* why) {
  const VerbsApi* api = load_verbs(why);
  if (api == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = devices_.find(name);
  if (it != devices_.end()) return it->second.get();
  int n = 0;
  ibv_device** list = api->get_device_list(&n);
  if (list == nullptr) {
    *why = "ibv_get_device_list failed: " + errno_text(errno);
    return nullptr;
  }
  ibv_context* ctx = nullptr;
  for (int i = 0; i < n; ++i) {
    if (name == api->get_device_name(list[i])) ctx = api->open_device(list[i]);
  }
  api->free_device_list(list);
  if (ctx == nullptr) {
    *why = "cannot open RDMA device " + name + " (" + errno_text(errno) +
           "); check that /dev/infiniband/uverbs* is accessible";
    return nullptr;
  }
  ibv_pd* pd = api->alloc_pd(ctx);
  if (pd == nullptr) {
    *why = "ibv_alloc_pd on " + name + " failed: " + errno_text(errno);
    api->close_device(ctx);
    return nullptr;
  }
  auto dev = std::make_unique<VerbsDevice>(api, name, ctx, pd);
  VerbsDevice* raw = dev.get();
  devices_[name] = std::move(dev);
  MESH_INFO(NCCL_INIT | NCCL_NET, "opened RDMA device %s", name.c_str());
  return raw;
}

void DeviceRegistry::close_all() {
  std::lock_guard<std::mutex> lock(mu_);
  devices_.clear();
}

}  // namespace mesh::rdma
