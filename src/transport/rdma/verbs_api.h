// SPDX-License-Identifier: Apache-2.0
// libibverbs loaded at run time: the plugin links nothing from rdma-core, so the same .so loads
// and runs over TCP on machines without it. Only the entry points that are real exported
// functions are resolved here; the data-path calls (ibv_post_send, ibv_post_recv, ibv_poll_cq)
// are inline in <infiniband/verbs.h> and dispatch through the provider's context ops.
#pragma once

#include <infiniband/verbs.h>

#include <string>

namespace mesh::rdma {

struct VerbsApi {
  ibv_device** (*get_device_list)(int* num_devices) = nullptr;
  void (*free_device_list)(ibv_device** list) = nullptr;
  const char* (*get_device_name)(ibv_device* device) = nullptr;
  ibv_context* (*open_device)(ibv_device* device) = nullptr;
  int (*close_device)(ibv_context* context) = nullptr;
  int (*query_device)(ibv_context* context, ibv_device_attr* attr) = nullptr;
  int (*query_port)(ibv_context* context, uint8_t port, ibv_port_attr* attr) = nullptr;
  int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = nullptr;
  ibv_pd* (*alloc_pd)(ibv_context* context) = nullptr;
  int (*dealloc_pd)(ibv_pd* pd) = nullptr;
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access) = nullptr;
  ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                           int access) = nullptr;  // optional (rdma-core >= 34)
  int (*dereg_mr)(ibv_mr* mr) = nullptr;
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                       int comp_vector) = nullptr;
  int (*destroy_cq)(ibv_cq* cq) = nullptr;
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr) = nullptr;
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask) = nullptr;
  int (*destroy_qp)(ibv_qp* qp) = nullptr;
  int (*get_async_event)(ibv_context* context, ibv_async_event* event) = nullptr;
  void (*ack_async_event)(ibv_async_event* event) = nullptr;
  const char* (*wc_status_str)(ibv_wc_status status) = nullptr;
  const char* (*event_type_str)(ibv_event_type event) = nullptr;
};

// Loads libibverbs.so.1 once per process. Returns nullptr (and sets *why, e.g. "libibverbs.so.1
// not found: install rdma-core") when it is absent or lacks a required symbol.
const VerbsApi* load_verbs(std::string* why);

}  // namespace mesh::rdma
