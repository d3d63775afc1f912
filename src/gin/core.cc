// SPDX-License-Identifier: Apache-2.0
#include "gin/core.h"

#include <mutex>
#include <unordered_set>

#include "gin/comm.h"
#include "gin/cuda_driver.h"
#include "gin/objects.h"
#include "plugin/plugin.h"
#include "util/log.h"

namespace mesh::gin {

namespace {

// Every object handed to NCCL and not yet closed. Checked before a pointer is dereferenced.
std::mutex g_mu;
std::unordered_set<const void*>& live() {
  static auto* set = new std::unordered_set<const void*>;  // never destroyed (exit-safe)
  return *set;
}

void add_live(const void* p) {
  std::lock_guard<std::mutex> lock(g_mu);
  live().insert(p);
}
void remove_live(const void* p) {
  std::lock_guard<std::mutex> lock(g_mu);
  live().erase(p);
}

// The object behind `p` if it is live and carries `tag`, else null.
template <typename T>
T* as(void* p, GinTag tag) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (p == nullptr || live().count(p) == 0) return nullptr;
  auto* t = static_cast<T*>(p);
  return t->tag == tag ? t : nullptr;
}

Comm* comm_of(void* p, const char* what) {
  Comm* c = as<Comm>(p, GinTag::kComm);
  if (c == nullptr) MESH_WARN("GIN %s: %p is not an open GIN comm", what, p);
  return c;
}

// The comm of a live GinContext whose comm is still open, else null.
Comm* comm_of_context(GinContext* ctx) {
  std::lock_guard<std::mutex> lock(g_mu);
  return live().count(ctx->comm) != 0 ? ctx->comm : nullptr;
}

// A data-path target: a comm (context index as given) or a GinContext (index below its count).
Comm* target_of(void* p, int context, const char* what) {
  if (GinContext* ctx = as<GinContext>(p, GinTag::kContext)) {
    if (comm_of_context(ctx) == nullptr) {
      MESH_WARN("GIN %s: context %p belongs to a closed comm", what, p);
      return nullptr;
    }
    if (context < 0 || context >= ctx->contexts) {
      MESH_WARN("GIN %s: context %d out of range (createContext made %d)", what, context,
                ctx->contexts);
      return nullptr;
    }
    return ctx->comm;
  }
  return comm_of(p, what);
}

}  // namespace

int pointer_support() {
  static std::once_flag once;
  CudaDriver& cuda = CudaDriver::instance();
  std::call_once(once, [&] {
    if (cuda.available()) {
      MESH_INFO(NCCL_INIT | NCCL_NET,
                "GIN: host and CUDA memory (GPU memory is copied through "
                "the CUDA driver on the GIN engine thread)");
    } else {
      MESH_INFO(NCCL_INIT | NCCL_NET, "GIN: host memory only: %s", cuda.why().c_str());
    }
  });
  return NCCL_PTR_HOST | (cuda.available() ? NCCL_PTR_CUDA : 0);
}

ncclResult_t init(void** ctx, uint64_t comm_id, ncclDebugLogger_t logger) {
  *ctx = nullptr;
  Context* net = nullptr;
  const ncclResult_t rc = Plugin::instance().init(logger, comm_id, -1, false, &net);
  if (rc != ncclSuccess) return rc;
  auto* inst = new Instance;
  inst->comm_id = comm_id;
  inst->net = net;
  add_live(inst);
  *ctx = inst;
  return ncclSuccess;
}

ncclResult_t finalize(void* ctx) {
  Instance* inst = as<Instance>(ctx, GinTag::kInstance);
  if (inst == nullptr) {
    MESH_WARN("GIN finalize: %p is not a GIN instance (finalized twice?)", ctx);
    return ncclInvalidArgument;
  }
  remove_live(inst);
  std::set<Comm*> left;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    left.swap(inst->comms);
    for (Comm* c : left) live().erase(c);
  }
  if (!left.empty()) {
    // Their net comms belong to the context finalize is about to close: stop the engines first.
    MESH_WARN(
        "GIN finalize: %zu collective comm(s) still open (closeColl not called); closing them",
        left.size());
    for (Comm* c : left) {
      c->close();
      c->tag = GinTag::kDead;
      delete c;
    }
  }
  const ncclResult_t rc = Plugin::instance().finalize(inst->net);
  inst->tag = GinTag::kDead;
  delete inst;
  return rc;
}

ncclResult_t devices(int* ndev) {
  return Plugin::instance().devices(ndev);
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) {
  *listen_comm = nullptr;
  Instance* inst = as<Instance>(ctx, GinTag::kInstance);
  if (inst == nullptr) {
    MESH_WARN("GIN listen: %p is not a GIN instance (init not called?)", ctx);
    return ncclInvalidArgument;
  }
  void* net_listen = nullptr;
  const ncclResult_t rc = Plugin::instance().listen(inst->net, dev, handle, &net_listen);
  if (rc != ncclSuccess) return rc;
  auto* l = new Listen;
  l->instance = inst;
  l->dev = dev;
  l->net_listen = net_listen;
  add_live(l);
  *listen_comm = l;
  return ncclSuccess;
}

ncclResult_t close_listen(void* listen_comm) {
  Listen* l = as<Listen>(listen_comm, GinTag::kListen);
  if (l == nullptr) {
    MESH_WARN("GIN closeListen: %p is not an open GIN listen comm", listen_comm);
    return ncclInvalidArgument;
  }
  remove_live(l);
  const ncclResult_t rc = Plugin::instance().close_listen(l->net_listen);
  l->tag = GinTag::kDead;
  delete l;
  return rc;
}

ncclResult_t connect(void* const* handles, int nranks, int rank, void* listen_comm,
                     void** coll_comm) {
  *coll_comm = nullptr;
  Listen* l = as<Listen>(listen_comm, GinTag::kListen);
  if (l == nullptr) {
    MESH_WARN("GIN connect: %p is not an open GIN listen comm", listen_comm);
    return ncclInvalidArgument;
  }
  if (handles == nullptr || nranks < 1 || nranks > 65536 || rank < 0 || rank >= nranks) {
    MESH_WARN("GIN connect: rank %d of %d ranks (handles %p) is not a valid group", rank, nranks,
              static_cast<const void*>(handles));
    return ncclInvalidArgument;
  }
  for (int j = 0; j < nranks; ++j) {
    if (handles[j] == nullptr) {
      MESH_WARN("GIN connect: the handle of rank %d is NULL", j);
      return ncclInvalidArgument;
    }
  }
  auto comm = std::make_unique<Comm>(Plugin::instance(), l->instance, l->dev, nranks, rank);
  const ncclResult_t rc = comm->connect(handles, l);
  if (rc != ncclSuccess) return rc;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    live().insert(comm.get());
    l->instance->comms.insert(comm.get());
  }
  *coll_comm = comm.release();
  return ncclSuccess;
}

ncclResult_t close_coll(void* coll_comm) {
  Comm* c = comm_of(coll_comm, "closeColl");
  if (c == nullptr) return ncclInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    live().erase(c);
    c->instance()->comms.erase(c);
  }
  c->close();
  c->tag = GinTag::kDead;
  delete c;
  return ncclSuccess;
}

ncclResult_t create_context(void* coll_comm, int contexts, void** gin_ctx) {
  *gin_ctx = nullptr;
  Comm* c = comm_of(coll_comm, "createContext");
  if (c == nullptr) return ncclInvalidArgument;
  if (contexts < 1 || static_cast<uint32_t>(contexts) > kMaxContexts) {
    MESH_WARN("GIN createContext: %d contexts (1 .. %u supported)", contexts, kMaxContexts);
    return ncclInvalidArgument;
  }
  auto* ctx = new GinContext;
  ctx->comm = c;
  ctx->contexts = contexts;
  add_live(ctx);
  *gin_ctx = ctx;
  return ncclSuccess;
}

ncclResult_t destroy_context(void* gin_ctx) {
  GinContext* ctx = as<GinContext>(gin_ctx, GinTag::kContext);
  if (ctx == nullptr) {
    MESH_WARN("GIN destroyContext: %p is not a GIN context (destroyed twice?)", gin_ctx);
    return ncclInvalidArgument;
  }
  remove_live(ctx);
  ctx->tag = GinTag::kDead;
  delete ctx;
  return ncclSuccess;
}

ncclResult_t reg_mr_sym(void* coll_comm, void* data, size_t size, int type, uint64_t flags,
                        void** mhandle) {
  *mhandle = nullptr;
  Comm* c = comm_of(coll_comm, "regMrSym");
  if (c == nullptr) return ncclInvalidArgument;
  if (type == NCCL_PTR_CUDA && (pointer_support() & NCCL_PTR_CUDA) == 0) {
    MESH_WARN("GIN regMrSym: CUDA memory %p registered but GIN advertised host memory only (%s)",
              data, CudaDriver::instance().why().c_str());
    return ncclInvalidArgument;
  }
  Region* r = nullptr;
  const ncclResult_t rc = c->register_region(data, size, type, flags, &r);
  *mhandle = r;
  return rc;
}

ncclResult_t dereg_mr_sym(void* coll_comm, void* mhandle) {
  Comm* c = comm_of(coll_comm, "deregMrSym");
  if (c == nullptr) return ncclInvalidArgument;
  return c->deregister(mhandle);
}

ncclResult_t iput(void* target, int context, uint64_t src_off, void* src, size_t size,
                  uint64_t dst_off, void* dst, uint32_t rank, void** request) {
  *request = nullptr;
  Comm* c = target_of(target, context, "iput");
  if (c == nullptr) return ncclInvalidArgument;
  return c->put(context, src, src_off, size, dst, dst_off, rank, nullptr, request);
}

ncclResult_t iput_signal(void* target, int context, uint64_t src_off, void* src, size_t size,
                         uint64_t dst_off, void* dst, uint32_t rank, uint64_t signal_off,
                         void* signal, uint64_t signal_value, uint32_t signal_op, void** request) {
  *request = nullptr;
  Comm* c = target_of(target, context, "iputSignal");
  if (c == nullptr) return ncclInvalidArgument;
  Signal s;
  s.region = static_cast<const Region*>(signal);
  s.offset = signal_off;
  s.value = signal_value;
  s.op = signal_op;
  return c->put(context, src, src_off, size, dst, dst_off, rank, &s, request);
}

ncclResult_t iget(void* target, int context, uint64_t remote_off, void* remote, size_t size,
                  uint64_t local_off, void* local, uint32_t rank, void** request) {
  *request = nullptr;
  Comm* c = target_of(target, context, "iget");
  if (c == nullptr) return ncclInvalidArgument;
  return c->get(context, remote, remote_off, size, local, local_off, rank, request);
}

ncclResult_t iflush(void* target, int context, void* /*mhandle*/, uint32_t rank, void** request) {
  *request = nullptr;
  Comm* c = target_of(target, context, "iflush");
  if (c == nullptr) return ncclInvalidArgument;
  return c->flush(context, rank, request);
}

ncclResult_t test(void* coll_comm, void* request, int* done) {
  *done = 0;
  Comm* c = comm_of(coll_comm, "test");
  if (c == nullptr) return ncclInvalidArgument;
  return c->test(request, done);
}

namespace {
Comm* any_target(void* p, const char* what) {
  if (GinContext* ctx = as<GinContext>(p, GinTag::kContext)) {
    Comm* c = comm_of_context(ctx);
    if (c == nullptr) MESH_WARN("GIN %s: context %p belongs to a closed comm", what, p);
    return c;
  }
  return comm_of(p, what);
}
}  // namespace

ncclResult_t progress(void* target) {
  Comm* c = any_target(target, "progress");
  if (c == nullptr) return ncclInvalidArgument;
  return c->has_error() ? ncclRemoteError : ncclSuccess;
}

ncclResult_t query_last_error(void* target, bool* has_error) {
  *has_error = false;
  Comm* c = any_target(target, "queryLastError");
  if (c == nullptr) return ncclInvalidArgument;
  *has_error = c->has_error();
  return ncclSuccess;
}

}  // namespace mesh::gin
