// SPDX-License-Identifier: Apache-2.0
#include "gin_rank.h"

#include <cstdlib>

namespace gintest {

std::string plugin_path() {
  const char* p = std::getenv("MESH_GIN_PLUGIN");
  return p != nullptr && *p != '\0' ? p : MESH_PLUGIN_PATH;
}

bool GinRank::ok(ncclResult_t rc, const std::string& what) {
  if (rc == ncclSuccess) return true;
  return env.fail(what + " returned " + std::to_string(rc) + " (" + api.symbol() + ")");
}

bool GinRank::listen_and_gather(int version, std::vector<void*>* handles) {
  std::string why;
  if (!api.open(plugin_path(), version, &why)) return env.fail("open: " + why);
  if (!ok(api.init(&ctx, env.shared().comm_id), "init")) return false;
  int ndev = 0;
  if (!ok(api.devices(&ndev), "devices")) return false;
  if (ndev < 1) return env.fail("no device");
  uint8_t handle[128] = {};
  if (!ok(api.listen(ctx, 0, handle, &listen), "listen")) return false;
  handles->assign(static_cast<size_t>(env.nranks()), nullptr);
  return env.allgather_handles(handle, handles->data());
}

bool GinRank::setup(int version, int n_contexts) {
  contexts = n_contexts;
  std::vector<void*> handles;
  if (!listen_and_gather(version, &handles)) return false;
  if (!ok(api.connect(ctx, handles.data(), env.nranks(), env.rank(), listen, &comm), "connect"))
    return false;
  if (!ok(api.close_listen(listen), "closeListen")) return false;
  listen = nullptr;
  return ok(api.make_target(comm, contexts, &target), "createContext");
}

bool GinRank::teardown() {
  if (!env.barrier()) return false;
  bool has_error = true;
  if (!ok(api.query_last_error(target, &has_error), "queryLastError")) return false;
  if (has_error) return env.fail("queryLastError reports an error at teardown");
  if (!ok(api.release_target(comm, target), "destroyContext")) return false;
  if (!ok(api.close_coll(comm), "closeColl")) return false;
  return ok(api.finalize(ctx), "finalize");
}

int registration_type() {
  const char* m = std::getenv("MESH_GIN_MEMORY");
  return m != nullptr && std::string(m) == "cuda" ? NCCL_PTR_CUDA : NCCL_PTR_HOST;
}

bool GinRank::reg(void* data, size_t size, void** mh, uint64_t flags) {
  return ok(api.reg(comm, data, size, registration_type(), flags, mh), "regMrSym");
}

bool GinRank::dereg(void* mh) {
  return ok(api.dereg(comm, mh), "deregMrSym");
}

}  // namespace gintest
