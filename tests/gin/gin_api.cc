// SPDX-License-Identifier: Apache-2.0
#include "gin_api.h"

#include <dlfcn.h>

namespace gintest {

const char* GinApi::symbol() const {
  switch (version_) {
    case 11:
      return "ncclGinPlugin_v11";
    case 12:
      return "ncclGinPlugin_v12";
    case 13:
      return "ncclGinPlugin_v13";
    case 14:
      return "ncclRmaPlugin_v14";
    case 15:
      return "ncclRmaPlugin_v15";
    default:
      return "?";
  }
}

bool GinApi::open(const std::string& library, int version, std::string* why) {
  version_ = version;
  lib_ = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) {
    *why = dlerror();
    return false;
  }
  void* t = dlsym(lib_, symbol());
  if (t == nullptr) {
    *why = std::string(symbol()) + " not exported";
    return false;
  }
  v11_ = version == 11 ? static_cast<ncclGin_v11_t*>(t) : nullptr;
  v12_ = version == 12 ? static_cast<ncclGin_v12_t*>(t) : nullptr;
  v13_ = version == 13 ? static_cast<ncclGin_v13_t*>(t) : nullptr;
  v14_ = version == 14 ? static_cast<ncclRma_v14_t*>(t) : nullptr;
  v15_ = version == 15 ? static_cast<ncclRma_v15_t*>(t) : nullptr;
  return true;
}

// Calls `member` on whichever table is open: every version has it with the same arguments.
#define GIN_ALL(member, ...)          \
  (v11_   ? v11_->member(__VA_ARGS__) \
   : v12_ ? v12_->member(__VA_ARGS__) \
   : v13_ ? v13_->member(__VA_ARGS__) \
   : v14_ ? v14_->member(__VA_ARGS__) \
          : v15_->member(__VA_ARGS__))

ncclResult_t GinApi::init(void** ctx, uint64_t comm_id) {
  return GIN_ALL(init, ctx, comm_id, nullptr);
}
ncclResult_t GinApi::devices(int* ndev) {
  return GIN_ALL(devices, ndev);
}
ncclResult_t GinApi::properties(int dev, int* device_type, int* ptr_support, std::string* name) {
  ncclResult_t rc;
  if (v11_ || v12_) {
    ncclNetProperties_v11_t p{};
    rc = v11_ ? v11_->getProperties(dev, &p) : v12_->getProperties(dev, &p);
    *device_type = p.netDeviceType;
    *ptr_support = p.ptrSupport;
    *name = p.name != nullptr ? p.name : "";
  } else {
    ncclNetProperties_v12_t p{};
    rc = v13_   ? v13_->getProperties(dev, &p)
         : v14_ ? v14_->getProperties(dev, &p)
                : v15_->getProperties(dev, &p);
    *device_type = p.netDeviceType;
    *ptr_support = p.ptrSupport;
    *name = p.name != nullptr ? p.name : "";
  }
  return rc;
}
ncclResult_t GinApi::listen(void* ctx, int dev, void* handle, void** listen_comm) {
  return GIN_ALL(listen, ctx, dev, handle, listen_comm);
}
ncclResult_t GinApi::connect(void* ctx, void** handles, int nranks, int rank, void* listen_comm,
                             void** comm) {
  // NCCL 2.28.9 passes its net context, not init()'s: pass something else to prove it is unused.
  (void)ctx;
  void* foreign = reinterpret_cast<void*>(0x1);
  if (v12_) return v12_->connect(foreign, handles, nranks, rank, 4, 32, listen_comm, comm);
  if (v11_) return v11_->connect(foreign, handles, nranks, rank, listen_comm, comm);
  if (v13_) return v13_->connect(foreign, handles, nranks, rank, listen_comm, comm);
  if (v14_) return v14_->connect(foreign, handles, nranks, rank, listen_comm, comm);
  return v15_->connect(foreign, handles, nranks, rank, listen_comm, comm);
}
ncclResult_t GinApi::make_target(void* comm, int contexts, void** target) {
  if (v11_ || v12_) {
    *target = comm;
    return ncclSuccess;
  }
  if (v13_) {
    ncclGinConfig_v13_t cfg{};
    cfg.nSignals = 64;
    cfg.nCounters = 64;
    cfg.nContexts = contexts;
    cfg.queueDepth = 32;
    cfg.trafficClass = -1;
    return v13_->createContext(comm, &cfg, target, nullptr);
  }
  ncclRmaConfig_v14_t cfg{contexts, -1, 1};
  return v14_ ? v14_->createContext(comm, &cfg, target) : v15_->createContext(comm, &cfg, target);
}
ncclResult_t GinApi::release_target(void* comm, void* target) {
  if (target == comm) return ncclSuccess;
  return GIN_ALL(destroyContext, target);
}
ncclResult_t GinApi::reg(void* comm, void* data, size_t size, int type, uint64_t flags, void** mh) {
  void* gin_handle = nullptr;
  ncclResult_t rc;
  if (v11_)
    rc = v11_->regMrSym(comm, data, size, type, flags, mh, &gin_handle);
  else if (v12_)
    rc = v12_->regMrSym(comm, data, size, type, flags, mh, &gin_handle);
  else if (v13_)
    rc = v13_->regMrSym(comm, data, size, type, flags, mh, &gin_handle);
  else
    return v14_ ? v14_->regMrSym(comm, data, size, type, flags, mh)
                : v15_->regMrSym(comm, data, size, type, flags, mh);
  // NCCL's proxy uses the ginHandle on the data path: it must be the same object.
  if (rc == ncclSuccess && gin_handle != *mh) return ncclInternalError;
  return rc;
}
ncclResult_t GinApi::dereg(void* comm, void* mh) {
  return GIN_ALL(deregMrSym, comm, mh);
}
ncclResult_t GinApi::iput(void* target, int context, uint64_t src_off, void* src, size_t size,
                          uint64_t dst_off, void* dst, uint32_t rank, void** request) {
  if (v11_) {
    if (context != 0) return ncclInvalidUsage;
    return v11_->iput(target, src_off, src, size, dst_off, dst, rank, request);
  }
  if (v12_) return v12_->iput(target, src_off, src, size, dst_off, dst, rank, context, request);
  if (v13_) return v13_->iput(target, context, src_off, src, size, dst_off, dst, rank, request);
  if (v14_) return v14_->iput(target, context, src_off, src, size, dst_off, dst, rank, request);
  return v15_->iput(target, context, src_off, src, size, dst_off, dst, rank, 1u, request);
}
ncclResult_t GinApi::iput_signal(void* target, int context, uint64_t src_off, void* src,
                                 size_t size, uint64_t dst_off, void* dst, uint32_t rank,
                                 uint64_t signal_off, void* signal, uint64_t value, uint32_t op,
                                 bool strong, void** request) {
  if (v11_) {
    if (context != 0) return ncclInvalidUsage;
    return v11_->iputSignal(target, src_off, src, size, dst_off, dst, rank, signal_off, signal,
                            value, op, request);
  }
  if (v12_)
    return v12_->iputSignal(target, src_off, src, size, dst_off, dst, rank, signal_off, signal,
                            value, op, context, request);
  if (v13_)
    return v13_->iputSignal(target, context, src_off, src, size, dst_off, dst, rank, signal_off,
                            signal, value, op, request);
  if (v14_)
    return v14_->iputSignal(target, context, src_off, src, size, dst_off, dst, rank, signal_off,
                            signal, value, op, strong, request);
  return v15_->iputSignal(target, context, src_off, src, size, dst_off, dst, rank, signal_off,
                          signal, value, op, strong, 1u, request);
}
ncclResult_t GinApi::iget(void* target, int context, uint64_t remote_off, void* remote, size_t size,
                          uint64_t local_off, void* local, uint32_t rank, void** request) {
  if (v13_)
    return v13_->iget(target, context, remote_off, remote, size, local_off, local, rank, request);
  if (v14_)
    return v14_->iget(target, context, remote_off, remote, size, local_off, local, rank, request);
  if (v15_)
    return v15_->iget(target, context, remote_off, remote, size, local_off, local, rank, 0u,
                      request);
  return ncclInvalidUsage;
}
ncclResult_t GinApi::iflush(void* target, int context, void* mh, uint32_t rank, void** request) {
  if (v13_) return v13_->iflush(target, context, mh, rank, request);
  if (v14_) return v14_->iflush(target, context, mh, rank, request);
  if (v15_) return v15_->iflush(target, context, mh, rank, request);
  return ncclInvalidUsage;
}
ncclResult_t GinApi::test(void* comm, void* request, int* done) {
  return GIN_ALL(test, comm, request, done);
}
ncclResult_t GinApi::progress(void* target) {
  if (v11_) return v11_->ginProgress(target);
  if (v12_) return v12_->ginProgress(target);
  if (v13_) return v13_->ginProgress(target);
  return v14_ ? v14_->rmaProgress(target) : v15_->rmaProgress(target);
}
ncclResult_t GinApi::query_last_error(void* target, bool* has_error) {
  return GIN_ALL(queryLastError, target, has_error);
}
ncclResult_t GinApi::close_coll(void* comm) {
  return GIN_ALL(closeColl, comm);
}
ncclResult_t GinApi::close_listen(void* listen_comm) {
  return GIN_ALL(closeListen, listen_comm);
}
ncclResult_t GinApi::finalize(void* ctx) {
  return GIN_ALL(finalize, ctx);
}

}  // namespace gintest
