// SPDX-License-Identifier: Apache-2.0
// The plugin as NCCL sees it: dlopen(RTLD_NOW | RTLD_LOCAL) of the .so, dlsym of
// ncclNetPlugin_v11, and calls through that table only. Every call is checked; a non-success
// result becomes the "ERROR rank R peer P: <call> returned <code>" failure (exit code 3).
// `peer` arguments only label those errors.
#pragma once

#include <string>
#include <vector>

#include "nccl/net.h"

namespace mesh::bench {

// Where the plugin is looked for when --plugin is not given, in order: the installed layout
// (<exe>/../<libdir>/ and <exe>/../lib/), then the copy in the build tree the bench was built in.
std::vector<std::string> default_plugin_candidates();

// cli_path when given (it must be readable), else the first existing candidate. Throws a setup
// error listing what was tried.
std::string resolve_plugin_path(const std::string& cli_path);

// The logger Plugin::init hands to the plugin; the GIN patterns give the GIN table the same one.
ncclDebugLogger_t plugin_logger();

class Plugin {
 public:
  // Resolves (cli_path or the candidates), dlopens and checks the table. Throws setup errors.
  explicit Plugin(const std::string& cli_path);
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;
  // Deliberately no dlclose: the plugin is linked -z nodelete and its threads may still be
  // winding down when the bench exits, exactly as inside NCCL.
  ~Plugin() = default;

  const std::string& path() const { return path_; }
  // The dlopen handle, for the other tables of the same library (gin_put.cc).
  void* library() const { return lib_; }
  std::string name() const;

  // init(&ctx, commId 0, &{trafficClass -1}, logger, no profiler).
  void init();
  int devices();
  ncclNetProperties_v11_t properties(int dev);
  void* listen(int dev, void* handle, int peer);
  // NULL: not connected yet, call again with the same handle buffer. `log`, when given, gets
  // every line the plugin logs during the call (route_log.h reads the route from them).
  void* connect(int dev, void* handle, int peer, std::vector<std::string>* log = nullptr);
  void* accept(void* listen_comm, int peer, std::vector<std::string>* log = nullptr);
  void* reg_mr(void* comm, void* data, size_t size, int peer);
  void dereg_mr(void* comm, void* mhandle, int peer);
  // NULL: the plugin cannot post now (e.g. 32 in flight), retry later.
  void* isend(void* comm, void* data, size_t size, int tag, void* mhandle, int peer);
  void* irecv(void* comm, void* data, size_t size, int tag, void* mhandle, int peer);
  // True when done; *size gets the size the plugin reports (received bytes for receives).
  bool test(void* request, int* size, int peer);
  void close_send(void* comm, int peer);
  void close_recv(void* comm, int peer);
  void close_listen(void* comm, int peer);
  void finalize();

 private:
  std::string path_;
  void* lib_ = nullptr;
  const ncclNet_v11_t* net_ = nullptr;
  void* ctx_ = nullptr;
  bool initialized_ = false;
};

}  // namespace mesh::bench
