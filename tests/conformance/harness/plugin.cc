// SPDX-License-Identifier: Apache-2.0
#include "harness/plugin.h"

#include <dlfcn.h>

#include <climits>
#include <cstring>
#include <map>
#include <mutex>

#include "harness/log_capture.h"
#include "harness/table_of.h"

namespace conformance {
namespace {

void* open_library(const std::string& path, std::string* error) {
  static std::mutex mu;
  static std::map<std::string, void*> opened;
  std::lock_guard<std::mutex> lock(mu);
  auto it = opened.find(path);
  if (it != opened.end()) return it->second;
  // NCCL's flags: every dependency must resolve now, and nothing leaks into the global namespace.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    *error = "dlopen(" + path + "): " + (why != nullptr ? why : "unknown error");
    return nullptr;
  }
  opened.emplace(path, lib);
  return lib;
}

using mesh_test::TableOf;

template <int V>
class NetAdapter final : public NetApi {
 public:
  using Table = typename TableOf<V>::Table;
  using Props = typename TableOf<V>::Props;

  explicit NetAdapter(const Table* table) : t_(table) {}

  int version() const override { return V; }
  const char* name() const override { return t_->name; }

  ncclResult_t init(uint64_t comm_id, void** ctx) override {
    if constexpr (V >= 11) {
      // NCCL passes a pointer to a stack config; the plugin must copy what it keeps.
      typename TableOf<V>::Config config{-1};
      return t_->init(ctx, comm_id, &config, conformance_log, nullptr);
    } else {
      (void)comm_id;
      *ctx = nullptr;
      // One result per process and version: NCCL's shim calls the plugin's init only once.
      static const ncclResult_t first = [this] {
        if constexpr (V == 10) {
          return t_->init(conformance_log, nullptr);
        } else {
          return t_->init(conformance_log);
        }
      }();
      return first;
    }
  }

  ncclResult_t finalize(void* ctx) override {
    if constexpr (V >= 11) {
      return t_->finalize(ctx);
    } else {
      (void)ctx;
      return ncclSuccess;
    }
  }

  ncclResult_t devices(int* ndev) override { return t_->devices(ndev); }

  ncclResult_t get_properties(int dev, DeviceProps* out) override {
    Props p;
    std::memset(&p, 0, sizeof(p));
    const ncclResult_t rc = t_->getProperties(dev, &p);
    *out = DeviceProps{};
    out->name = p.name;
    out->pci_path = p.pciPath;
    out->guid = p.guid;
    out->ptr_support = p.ptrSupport;
    out->speed = p.speed;
    out->port = p.port;
    out->latency = p.latency;
    out->max_comms = p.maxComms;
    out->max_recvs = p.maxRecvs;
    if constexpr (V >= 7) {
      out->has_device_type = true;
      out->net_device_type = p.netDeviceType;
      out->net_device_version = p.netDeviceVersion;
    }
    if constexpr (V >= 8) out->reg_is_global = p.regIsGlobal;
    if constexpr (V >= 9) {
      out->has_v9_fields = true;
      out->force_flush = p.forceFlush;
      static_assert(sizeof(p.vProps.devs) <= sizeof(out->vprops.devs));
      out->vprops.ndevs = p.vProps.ndevs;
      std::memcpy(out->vprops.devs, p.vProps.devs, sizeof(p.vProps.devs));
      out->max_p2p_bytes = p.maxP2pBytes;
      out->max_coll_bytes = p.maxCollBytes;
    }
    if constexpr (V >= 11) {
      out->has_max_multi_request_size = true;
      out->max_multi_request_size = p.maxMultiRequestSize;
    }
    if constexpr (V >= 12) {
      out->has_rail_and_plane = true;
      out->rail_id = p.railId;
      out->plane_id = p.planeId;
    }
    return rc;
  }

  ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) override {
    if constexpr (V >= 11) {
      return t_->listen(ctx, dev, handle, listen_comm);
    } else {
      (void)ctx;
      return t_->listen(dev, handle, listen_comm);
    }
  }

  ncclResult_t connect(void* ctx, int dev, void* handle, void** send_comm,
                       ncclNetDeviceHandle_v11_t** dev_comm) override {
    if constexpr (V >= 11) {
      return t_->connect(ctx, dev, handle, send_comm, dev_comm);
    } else if constexpr (V == 10) {
      (void)ctx;
      // NCCL's v10 shim passes the communicator's config (a per-comm allocation) on every call.
      return t_->connect(dev, &config_, handle, send_comm, dev_comm);
    } else if constexpr (V >= 7) {
      (void)ctx;
      return t_->connect(dev, handle, send_comm, dev_comm);
    } else {
      (void)ctx;
      (void)dev_comm;  // NCCL's v6 shim drops the device handle
      return t_->connect(dev, handle, send_comm);
    }
  }

  ncclResult_t accept(void* listen_comm, void** recv_comm,
                      ncclNetDeviceHandle_v11_t** dev_comm) override {
    if constexpr (V >= 7) {
      return t_->accept(listen_comm, recv_comm, dev_comm);
    } else {
      (void)dev_comm;
      return t_->accept(listen_comm, recv_comm);
    }
  }

  ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    if constexpr (V <= 7) {
      // NCCL's v6/v7 shims: int size, larger registrations refused before the plugin sees them.
      if (size >= (1ULL << 31)) return ncclInternalError;
      return t_->regMr(comm, data, static_cast<int>(size), type, mhandle);
    } else {
      return t_->regMr(comm, data, size, type, mhandle);
    }
  }

  ncclResult_t dereg_mr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }

  ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                     void** request) override {
    if constexpr (V <= 8) {
      if (size > static_cast<size_t>(INT_MAX)) return ncclInternalError;  // as NCCL's v6-v8 shims
      return t_->isend(send_comm, data, static_cast<int>(size), tag, mhandle, request);
    } else if constexpr (V == 9) {
      return t_->isend(send_comm, data, size, tag, mhandle, request);
    } else {
      // NCCL passes a pointer into its per-step profiler slots; the plugin may ignore it.
      return t_->isend(send_comm, data, size, tag, mhandle, &profiler_slot_, request);
    }
  }

  ncclResult_t irecv(void* recv_comm, void* data, size_t capacity, int tag, void* mhandle,
                     void** request) override {
    void* datas[1] = {data};
    int tags[1] = {tag};
    void* mhandles[1] = {mhandle};
    if constexpr (V <= 8) {
      if (capacity > static_cast<size_t>(INT_MAX)) return ncclInternalError;
      // NCCL's v6-v8 shims never forward NCCL_NET_OPTIONAL_RECV_COMPLETION.
      if (*request == kOptionalRecvCompletion) *request = nullptr;
      int sizes[1] = {static_cast<int>(capacity)};
      return t_->irecv(recv_comm, 1, datas, sizes, tags, mhandles, request);
    } else {
      size_t sizes[1] = {capacity};
      if constexpr (V == 9) {
        return t_->irecv(recv_comm, 1, datas, sizes, tags, mhandles, request);
      } else {
        void* phandles[1] = {&profiler_slot_};
        return t_->irecv(recv_comm, 1, datas, sizes, tags, mhandles, phandles, request);
      }
    }
  }

  ncclResult_t test(void* request, int* done, int* sizes) override {
    return t_->test(request, done, sizes);
  }

  ncclResult_t iflush(void* recv_comm, void* data, int size, void* mhandle,
                      void** request) override {
    void* datas[1] = {data};
    int sizes[1] = {size};
    void* mhandles[1] = {mhandle};
    return t_->iflush(recv_comm, 1, datas, sizes, mhandles, request);
  }

  ncclResult_t close_send(void* c) override { return t_->closeSend(c); }
  ncclResult_t close_recv(void* c) override { return t_->closeRecv(c); }
  ncclResult_t close_listen(void* c) override { return t_->closeListen(c); }

 private:
  const Table* t_;
  ncclNetCommConfig_v10_t config_{-1};
  void* profiler_slot_ = nullptr;
};

}  // namespace

const void* find_table(const std::string& plugin_path, int version, std::string* error) {
  void* lib = open_library(plugin_path, error);
  if (lib == nullptr) return nullptr;
  const std::string symbol = "ncclNetPlugin_v" + std::to_string(version);
  void* table = dlsym(lib, symbol.c_str());
  if (table == nullptr) *error = plugin_path + " does not export " + symbol;
  return table;
}

std::unique_ptr<NetApi> open_net(const std::string& plugin_path, int version, std::string* error) {
  const void* table = find_table(plugin_path, version, error);
  if (table == nullptr) return nullptr;
  switch (version) {
    case 6:
      return std::make_unique<NetAdapter<6>>(static_cast<const ncclNet_v6_t*>(table));
    case 7:
      return std::make_unique<NetAdapter<7>>(static_cast<const ncclNet_v7_t*>(table));
    case 8:
      return std::make_unique<NetAdapter<8>>(static_cast<const ncclNet_v8_t*>(table));
    case 9:
      return std::make_unique<NetAdapter<9>>(static_cast<const ncclNet_v9_t*>(table));
    case 10:
      return std::make_unique<NetAdapter<10>>(static_cast<const ncclNet_v10_t*>(table));
    case 11:
      return std::make_unique<NetAdapter<11>>(static_cast<const ncclNet_v11_t*>(table));
    case 12:
      return std::make_unique<NetAdapter<12>>(static_cast<const ncclNet_v12_t*>(table));
    default:
      *error = "unsupported ABI version " + std::to_string(version);
      return nullptr;
  }
}

const char* result_name(ncclResult_t rc) {
  switch (rc) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult(?)";
  }
}

}  // namespace conformance
