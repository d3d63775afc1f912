// SPDX-License-Identifier: Apache-2.0
// ncclGinPlugin_v13 (NCCL 2.30.3/2.30.4; NCCL 2.30.7 takes it as RMA v13 too): the data path
// takes createContext's ginCtx and a context index. In proxy mode NCCL passes devHandle NULL.
#include "abi/gin_entry.h"

namespace mesh::abi::gin_abi {
namespace {

ncclResult_t create_context_v13(void* comm, ncclGinConfig_v13_t* config, void** gin_ctx,
                                ncclNetDeviceHandle_v11_t** dev_handle) {
  if (dev_handle != nullptr) *dev_handle = nullptr;
  return create_context(comm, config != nullptr ? config->nContexts : 1, gin_ctx);
}

}  // namespace
}  // namespace mesh::abi::gin_abi

extern "C" {
__attribute__((visibility("default"))) ncclGin_v13_t ncclGinPlugin_v13 = {
    .name = "Mesh",
    .init = mesh::abi::gin_abi::init,
    .devices = mesh::abi::gin_abi::devices,
    .getProperties = mesh::abi::gin_abi::get_properties<ncclNetProperties_v12_t>,
    .listen = mesh::abi::gin_abi::listen,
    .connect = mesh::abi::gin_abi::connect,
    .createContext = mesh::abi::gin_abi::create_context_v13,
    .regMrSym = mesh::abi::gin_abi::reg_mr_sym_gin,
    .regMrSymDmaBuf = mesh::abi::gin_abi::reg_mr_sym_dmabuf_gin,
    .deregMrSym = mesh::abi::gin_abi::dereg_mr_sym,
    .destroyContext = mesh::abi::gin_abi::destroy_context,
    .closeColl = mesh::abi::gin_abi::close_coll,
    .closeListen = mesh::abi::gin_abi::close_listen,
    .iput = mesh::abi::gin_abi::iput,
    .iputSignal = mesh::abi::gin_abi::iput_signal,
    .iget = mesh::abi::gin_abi::iget,
    .iflush = mesh::abi::gin_abi::iflush,
    .test = mesh::abi::gin_abi::test,
    .ginProgress = mesh::abi::gin_abi::progress,
    .queryLastError = mesh::abi::gin_abi::query_last_error,
    .finalize = mesh::abi::gin_abi::finalize,
};
}  // extern "C"
