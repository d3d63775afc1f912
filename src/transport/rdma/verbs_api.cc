// SPDX-License-Identifier: Apache-2.0
#include "transport/rdma/verbs_api.h"

#include <dlfcn.h>

#include <mutex>

namespace mesh::rdma {
namespace {

template <typename Fn>
bool resolve(void* lib, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, name));
  if (*out == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
  return *out != nullptr;
}

}  // namespace

const VerbsApi* load_verbs(std::string* why) {
  static std::once_flag once;
  static VerbsApi api;
  static const VerbsApi* loaded = nullptr;
  static std::string error;
  std::call_once(once, [] {
    // RTLD_LOCAL: nothing of rdma-core leaks into NCCL's namespace. The library stays loaded
    // for the life of the process (providers keep state in it).
    void* lib = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      error = std::string("libibverbs.so.1 cannot be loaded (") + dlerror() +
              "); install rdma-core (Debian: libibverbs1 ibverbs-providers) for RDMA";
      return;
    }
    std::string missing;
    resolve(lib, "ibv_get_device_list", &api.get_device_list, &missing);
    resolve(lib, "ibv_free_device_list", &api.free_device_list, &missing);
    resolve(lib, "ibv_get_device_name", &api.get_device_name, &missing);
    resolve(lib, "ibv_open_device", &api.open_device, &missing);
    resolve(lib, "ibv_close_device", &api.close_device, &missing);
    resolve(lib, "ibv_query_device", &api.query_device, &missing);
    resolve(lib, "ibv_query_port", &api.query_port, &missing);
    resolve(lib, "ibv_query_gid", &api.query_gid, &missing);
    resolve(lib, "ibv_alloc_pd", &api.alloc_pd, &missing);
    resolve(lib, "ibv_dealloc_pd", &api.dealloc_pd, &missing);
    resolve(lib, "ibv_reg_mr", &api.reg_mr, &missing);
    resolve(lib, "ibv_dereg_mr", &api.dereg_mr, &missing);
    resolve(lib, "ibv_create_cq", &api.create_cq, &missing);
    resolve(lib, "ibv_destroy_cq", &api.destroy_cq, &missing);
    resolve(lib, "ibv_create_qp", &api.create_qp, &missing);
    resolve(lib, "ibv_modify_qp", &api.modify_qp, &missing);
    resolve(lib, "ibv_destroy_qp", &api.destroy_qp, &missing);
    resolve(lib, "ibv_get_async_event", &api.get_async_event, &missing);
    resolve(lib, "ibv_ack_async_event", &api.ack_async_event, &missing);
    resolve(lib, "ibv_wc_status_str", &api.wc_status_str, &missing);
    resolve(lib, "ibv_event_type_str", &api.event_type_str, &missing);
    if (!missing.empty()) {
      error = "libibverbs.so.1 lacks " + missing + " (rdma-core too old?)";
      return;
    }
    std::string optional;
    resolve(lib, "ibv_reg_dmabuf_mr", &api.reg_dmabuf_mr, &optional);  // absent before rdma-core 34
    loaded = &api;
  });
  if (loaded == nullptr && why != nullptr) *why = error;
  return loaded;
}

}  // namespace mesh::rdma
