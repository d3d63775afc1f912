// SPDX-License-Identifier: Apache-2.0
// The members ncclRmaPlugin_v14 and _v15 share (everything before the data path), and the
// createContext both use: a context count from NCCL's config; trafficClass and rankStride need
// nothing here (a rail team connects through connect's handles like any group).
#pragma once

#include "abi/gin_entry.h"

namespace mesh::abi::gin_abi {
inline ncclResult_t create_context_rma(void* comm, ncclRmaConfig_v14_t* config, void** rma_ctx) {
  return create_context(comm, config != nullptr ? config->nContexts : 1, rma_ctx);
}
}  // namespace mesh::abi::gin_abi

#define MESH_RMA_HEAD                                                                       \
  .name = "Mesh", .init = mesh::abi::gin_abi::init, .devices = mesh::abi::gin_abi::devices, \
  .getProperties = mesh::abi::gin_abi::get_properties<ncclNetProperties_v12_t>,             \
  .listen = mesh::abi::gin_abi::listen, .connect = mesh::abi::gin_abi::connect,             \
  .createContext = mesh::abi::gin_abi::create_context_rma,                                  \
  .regMrSym = mesh::abi::gin_abi::reg_mr_sym,                                               \
  .regMrSymDmaBuf = mesh::abi::gin_abi::reg_mr_sym_dmabuf,                                  \
  .deregMrSym = mesh::abi::gin_abi::dereg_mr_sym,                                           \
  .destroyContext = mesh::abi::gin_abi::destroy_context,                                    \
  .closeColl = mesh::abi::gin_abi::close_coll, .closeListen = mesh::abi::gin_abi::close_listen
