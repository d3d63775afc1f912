#include "abi/entry_points.h"

namespace mesh::abi {

ncclResult_t devices(int* ndev) {
  return guard("devices", [&] { return core().devices(ndev); });
}

ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v11_t** /*dev*/) {
  // Host plugin: the device handle NCCL passes stays untouched (it is only for UNPACK/GIN).
  return guard("accept", [&] { return core().accept(listen_comm, recv_comm); });
}

ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  return guard("regMr", [&] { return core().reg_mr(comm, data, size, type, mhandle); });
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

ncclResult_t isend_v10plus(void* comm, void* data, size_t size, int tag, void* mhandle,
                           void* /*phandle*/, void** request) {
  return guard("isend", [&] { return core().isend(comm, data, size, tag, mhandle, request); });
}

ncclResult_t irecv_v10plus(void* comm, int n, void** data, size_t* sizes, int* tags,
                           void** mhandles, void** /*phandles*/, void** request) {
  return guard("irecv",
               [&] { return core().irecv(comm, n, data, sizes, tags, mhandles, request); });
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

}  // namespace mesh::abi
