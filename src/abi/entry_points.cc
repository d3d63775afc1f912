// SPDX-License-Identifier: Apache-2.0
#include "abi/entry_points.h"

namespace mesh::abi {

ncclResult_t devices(int* ndev) {
  return guard("devices", [&] { return core().devices(ndev); });
}

ncclResult_t reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) {
  return guard("regMrDmaBuf",
               [&] { return core().reg_mr_dmabuf(comm, data, size, type, offset, fd, mhandle); });
}

ncclResult_t dereg_mr(void* comm, void* mhandle) {
  return guard("deregMr", [&] { return core().dereg_mr(comm, mhandle); });
}

ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                    void** request) {
  return guard("iflush",
               [&] { return core().iflush(recv_comm, n, data, sizes, mhandles, request); });
}

ncclResult_t test(void* request, int* done, int* sizes) {
  return guard("test", [&] { return core().test(request, done, sizes); });
}

ncclResult_t close_send(void* comm) {
  return guard("closeSend", [&] { return core().close_connection(comm, ObjectTag::kSend); });
}

ncclResult_t close_recv(void* comm) {
  return guard("closeRecv", [&] { return core().close_connection(comm, ObjectTag::kRecv); });
}

ncclResult_t close_listen(void* comm) {
  return guard("closeListen", [&] { return core().close_listen(comm); });
}

ncclResult_t legacy_init(ncclDebugLogger_t logger) {
  return guard("init", [&] {
    Context* ctx = nullptr;
    return core().init(logger, 0, -1, true, &ctx);
  });
}

ncclResult_t legacy_listen(int dev, void* handle, void** listen_comm) {
  return guard("listen",
               [&] { return core().listen(core().legacy_context(), dev, handle, listen_comm); });
}

ncclResult_t legacy_connect(int dev, void* handle, void** send_comm) {
  return guard("connect",
               [&] { return core().connect(core().legacy_context(), dev, handle, send_comm); });
}

ncclResult_t accept_v6(void* listen_comm, void** recv_comm) {
  return guard("accept", [&] { return core().accept(listen_comm, recv_comm); });
}

ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v7_t** /*dev_comm*/) {
  return accept_v6(listen_comm, recv_comm);
}

ncclResult_t isend_int(void* comm, void* data, int size, int tag, void* mhandle, void** request) {
  return guard("isend", [&] {
    if (size < 0) {
      *request = nullptr;
      MESH_WARN("isend: negative size %d", size);
      return ncclInvalidArgument;
    }
    return core().isend(comm, data, static_cast<size_t>(size), tag, mhandle, request);
  });
}

ncclResult_t irecv_int(void* comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                       void** request) {
  return guard("irecv", [&] {
    *request = nullptr;
    if (n < 1 || n > NCCL_PROXY_MAX_SUBS || sizes == nullptr) {
      MESH_WARN("irecv: invalid receive count %d", n);
      return ncclInvalidArgument;
    }
    size_t wide[NCCL_PROXY_MAX_SUBS];
    for (int i = 0; i < n; ++i) {
      if (sizes[i] < 0) {
        MESH_WARN("irecv: negative size %d", sizes[i]);
        return ncclInvalidArgument;
      }
      wide[i] = static_cast<size_t>(sizes[i]);
    }
    return core().irecv(comm, n, data, wide, tags, mhandles, request);
  });
}

ncclResult_t reg_mr_int(void* comm, void* data, int size, int type, void** mhandle) {
  return guard("regMr", [&] {
    if (size < 0) {
      if (mhandle != nullptr) *mhandle = nullptr;
      MESH_WARN("regMr: negative size %d", size);
      return ncclInvalidArgument;
    }
    return core().reg_mr(comm, data, static_cast<size_t>(size), type, mhandle);
  });
}

ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guard("regMr", [&] { return core().reg_mr(comm, data, size, type, mhandle); });
}

ncclResult_t isend_v10plus(void* comm, void* data, size_t size, int tag, void* mhandle,
                           void* /*phandle*/, void** request) {
  return guard("isend", [&] { return core().isend(comm, data, size, tag, mhandle, request); });
}

ncclResult_t irecv_v10plus(void* comm, int n, void** data, size_t* sizes, int* tags,
                           void** mhandles, void** /*phandles*/, void** request) {
  return guard("irecv",
               [&] { return core().irecv(comm, n, data, sizes, tags, mhandles, request); });
}

ncclResult_t context_init(void** ctx, uint64_t comm_id, int traffic_class,
                          ncclDebugLogger_t logger) {
  return guard("init", [&] {
    Context* c = nullptr;
    ncclResult_t rc = core().init(logger, comm_id, traffic_class, false, &c);
    *ctx = c;
    return rc;
  });
}

ncclResult_t context_finalize(void* ctx) {
  return guard("finalize", [&] { return core().finalize(ctx); });
}

ncclResult_t context_listen(void* ctx, int dev, void* handle, void** listen_comm) {
  return guard("listen", [&] { return core().listen(ctx, dev, handle, listen_comm); });
}

ncclResult_t context_connect(void* ctx, int dev, void* handle, void** send_comm,
                             ncclNetDeviceHandle_v7_t** /*dev_comm*/) {
  return guard("connect", [&] { return core().connect(ctx, dev, handle, send_comm); });
}

}  // namespace mesh::abi
