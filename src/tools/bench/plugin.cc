// SPDX-License-Identifier: Apache-2.0
#include "plugin.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "errors.h"
#include "wait.h"

#ifndef MESH_BENCH_BUILD_PLUGIN_REL
#define MESH_BENCH_BUILD_PLUGIN_REL ""
#endif
#ifndef MESH_BENCH_INSTALL_LIBDIR
#define MESH_BENCH_INSTALL_LIBDIR "lib"
#endif
#ifndef MESH_BENCH_DEB_LIBDIR
#define MESH_BENCH_DEB_LIBDIR "lib"
#endif

namespace mesh::bench {
namespace {

constexpr const char* kPluginFile = "libnccl-net-mesh.so";

// NCCL_DEBUG decides what the plugin's log lines show, as inside NCCL (default: warnings).
int log_threshold() {
  static const int threshold = [] {
    const char* v = std::getenv("NCCL_DEBUG");
    if (v == nullptr) return static_cast<int>(NCCL_LOG_WARN);
    const std::string s(v);
    if (s == "VERSION") return static_cast<int>(NCCL_LOG_VERSION);
    if (s == "INFO") return static_cast<int>(NCCL_LOG_INFO);
    if (s == "TRACE") return static_cast<int>(NCCL_LOG_TRACE);
    if (s == "NONE") return static_cast<int>(NCCL_LOG_NONE);
    return static_cast<int>(NCCL_LOG_WARN);
  }();
  return threshold;
}

// Set while this thread runs a connect() or accept() that keeps its log lines (route_log.h).
thread_local std::vector<std::string>* t_capture = nullptr;

// Keeps the lines a plugin call logs on this thread, for the duration of the call.
class CaptureScope {
 public:
  explicit CaptureScope(std::vector<std::string>* into) : prev_(t_capture) { t_capture = into; }
  ~CaptureScope() { t_capture = prev_; }
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;

 private:
  std::vector<std::string>* prev_;
};

// The logger handed to init(): the plugin's WARN/INFO lines on stderr, prefixed with the rank,
// and every line (whatever NCCL_DEBUG says) into the capture of the call that logged it.
extern "C" void bench_logger(ncclDebugLogLevel level, unsigned long /*flags*/, const char* file,
                             int line, const char* format, ...) {
  if (level == NCCL_LOG_NONE) return;
  const bool print = static_cast<int>(level) <= log_threshold();
  if (!print && t_capture == nullptr) return;
  const char* tag = level == NCCL_LOG_WARN    ? "WARN"
                    : level == NCCL_LOG_INFO  ? "INFO"
                    : level == NCCL_LOG_TRACE ? "TRACE"
                    : level == NCCL_LOG_ABORT ? "ABORT"
                                              : "VERSION";
  char msg[1024];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(msg, sizeof msg, format, ap);
  va_end(ap);
  if (t_capture != nullptr) t_capture->emplace_back(msg);
  if (!print) return;
  std::fprintf(stderr, "[rank %d] NCCL %s %s:%d %s\n", my_rank(), tag, file ? file : "?", line,
               msg);
}

std::string exe_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

}  // namespace

std::vector<std::string> default_plugin_candidates() {
  std::vector<std::string> out;
  const std::string dir = exe_dir();
  if (!dir.empty()) {
    // The install tree's folder, the Debian package's (/usr/lib/<triplet>), then plain lib/.
    for (const std::string& sub : {std::string(MESH_BENCH_INSTALL_LIBDIR),
                                   std::string(MESH_BENCH_DEB_LIBDIR), std::string("lib")}) {
      const std::string path = dir + "/../" + sub + "/" + kPluginFile;
      if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
    }
  }
  // The build tree: the plugin's folder relative to the bench's (src/tools/bench -> top).
  if (!dir.empty() && std::strlen(MESH_BENCH_BUILD_PLUGIN_REL) > 0) {
    out.push_back((std::filesystem::path(dir) / MESH_BENCH_BUILD_PLUGIN_REL / kPluginFile)
                      .lexically_normal()
                      .string());
  }
  return out;
}

std::string resolve_plugin_path(const std::string& cli_path) {
  if (!cli_path.empty()) {
    if (access(cli_path.c_str(), R_OK) != 0) {
      throw setup_error(fmt::format("--plugin {}: {}", cli_path, std::strerror(errno)));
    }
    return cli_path;
  }
  std::string tried;
  for (const auto& c : default_plugin_candidates()) {
    if (access(c.c_str(), R_OK) == 0) return c;
    tried += "\n  " + c;
  }
  throw setup_error("plugin not found; looked for:" + tried +
                    "\nbuild the nccl-net-mesh target or pass --plugin PATH");
}

Plugin::Plugin(const std::string& cli_path) : path_(resolve_plugin_path(cli_path)) {
  // Exactly NCCL's flags: RTLD_LOCAL keeps the plugin's symbols out of the global namespace.
  lib_ = dlopen(path_.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib_ == nullptr) throw setup_error(fmt::format("dlopen({}) failed: {}", path_, dlerror()));
  net_ = static_cast<const ncclNet_v11_t*>(dlsym(lib_, "ncclNetPlugin_v11"));
  if (net_ == nullptr) {
    std::string others;
    for (const char* sym : {"ncclNetPlugin_v10", "ncclNetPlugin_v9", "ncclNetPlugin_v8"}) {
      if (dlsym(lib_, sym) != nullptr) others += std::string(" ") + sym;
    }
    throw setup_error(fmt::format("{} has no ncclNetPlugin_v11 symbol{}; the bench drives v11 only",
                                  path_, others.empty() ? "" : " (it exports" + others + ")"));
  }
  const struct {
    const char* name;
    bool present;
  } required[] = {{"init", net_->init != nullptr},
                  {"devices", net_->devices != nullptr},
                  {"getProperties", net_->getProperties != nullptr},
                  {"listen", net_->listen != nullptr},
                  {"connect", net_->connect != nullptr},
                  {"accept", net_->accept != nullptr},
                  {"regMr", net_->regMr != nullptr},
                  {"deregMr", net_->deregMr != nullptr},
                  {"isend", net_->isend != nullptr},
                  {"irecv", net_->irecv != nullptr},
                  {"test", net_->test != nullptr},
                  {"closeSend", net_->closeSend != nullptr},
                  {"closeRecv", net_->closeRecv != nullptr},
                  {"closeListen", net_->closeListen != nullptr},
                  {"finalize", net_->finalize != nullptr}};
  for (const auto& r : required) {
    if (!r.present) {
      throw setup_error(fmt::format("{}: ncclNetPlugin_v11.{} is NULL", path_, r.name));
    }
  }
}

std::string Plugin::name() const {
  return net_->name != nullptr ? std::string(net_->name) : std::string("(null)");
}

void Plugin::init() {
  ncclNetCommConfig_v11_t config{-1};
  const ncclResult_t r = net_->init(&ctx_, 0, &config, bench_logger, nullptr);
  if (r != ncclSuccess) throw plugin_error("init", r, -1);
  initialized_ = true;
}

int Plugin::devices() {
  int n = 0;
  const ncclResult_t r = net_->devices(&n);
  if (r != ncclSuccess) throw plugin_error("devices", r, -1);
  return n;
}

ncclNetProperties_v11_t Plugin::properties(int dev) {
  ncclNetProperties_v11_t props{};
  const ncclResult_t r = net_->getProperties(dev, &props);
  if (r != ncclSuccess) throw plugin_error("getProperties", r, -1);
  return props;
}

void* Plugin::listen(int dev, void* handle, int peer) {
  void* comm = nullptr;
  const ncclResult_t r = net_->listen(ctx_, dev, handle, &comm);
  if (r != ncclSuccess) throw plugin_error("listen", r, peer);
  if (comm == nullptr) {
    throw BenchError(kExitPlugin, fmt::format("ERROR rank {} peer {}: listen returned ncclSuccess "
                                              "with a NULL listenComm",
                                              my_rank(), peer));
  }
  return comm;
}

void* Plugin::connect(int dev, void* handle, int peer, std::vector<std::string>* log) {
  const CaptureScope capture(log);
  void* comm = nullptr;
  // A host plugin must leave the device handle alone; NCCL passes a pointer to NULL.
  ncclNetDeviceHandle_v11_t* dev_handle = nullptr;
  const ncclResult_t r = net_->connect(ctx_, dev, handle, &comm, &dev_handle);
  if (r != ncclSuccess) {
    // NCCL closes a partially created comm; so do we.
    if (comm != nullptr) net_->closeSend(comm);
    throw plugin_error("connect", r, peer);
  }
  return comm;
}

void* Plugin::accept(void* listen_comm, int peer, std::vector<std::string>* log) {
  const CaptureScope capture(log);
  void* comm = nullptr;
  ncclNetDeviceHandle_v11_t* dev_handle = nullptr;
  const ncclResult_t r = net_->accept(listen_comm, &comm, &dev_handle);
  if (r != ncclSuccess) throw plugin_error("accept", r, peer);
  return comm;
}

void* Plugin::reg_mr(void* comm, void* data, size_t size, int peer) {
  void* mh = nullptr;
  const ncclResult_t r = net_->regMr(comm, data, size, NCCL_PTR_HOST, &mh);
  if (r != ncclSuccess) throw plugin_error("regMr", r, peer);
  return mh;
}

void Plugin::dereg_mr(void* comm, void* mhandle, int peer) {
  const ncclResult_t r = net_->deregMr(comm, mhandle);
  if (r != ncclSuccess) throw plugin_error("deregMr", r, peer);
}

void* Plugin::isend(void* comm, void* data, size_t size, int tag, void* mhandle, int peer) {
  void* req = nullptr;
  const ncclResult_t r = net_->isend(comm, data, size, tag, mhandle, nullptr, &req);
  if (r != ncclSuccess) throw plugin_error("isend", r, peer);
  return req;
}

void* Plugin::irecv(void* comm, void* data, size_t size, int tag, void* mhandle, int peer) {
  void* datas[1] = {data};
  size_t sizes[1] = {size};
  int tags[1] = {tag};
  void* mhandles[1] = {mhandle};
  void* phandles[1] = {nullptr};
  // NULL on input: completion is mandatory (NCCL only passes 0x1 for LL/LL128 buffers).
  void* req = nullptr;
  const ncclResult_t r = net_->irecv(comm, 1, datas, sizes, tags, mhandles, phandles, &req);
  if (r != ncclSuccess) throw plugin_error("irecv", r, peer);
  return req;
}

bool Plugin::test(void* request, int* size, int peer) {
  // NCCL hands test() an int[NCCL_PROXY_MAX_SUBS] for receives, pre-zeroed; do the same for
  // every request so a plugin that writes n entries never writes past our buffer.
  int sizes[NCCL_PROXY_MAX_SUBS] = {};
  int done = 0;
  const ncclResult_t r = net_->test(request, &done, sizes);
  if (r != ncclSuccess) throw plugin_error("test", r, peer);
  if (done != 0 && size != nullptr) *size = sizes[0];
  return done != 0;
}

void Plugin::close_send(void* comm, int peer) {
  const ncclResult_t r = net_->closeSend(comm);
  if (r != ncclSuccess) throw plugin_error("closeSend", r, peer);
}

void Plugin::close_recv(void* comm, int peer) {
  const ncclResult_t r = net_->closeRecv(comm);
  if (r != ncclSuccess) throw plugin_error("closeRecv", r, peer);
}

void Plugin::close_listen(void* comm, int peer) {
  const ncclResult_t r = net_->closeListen(comm);
  if (r != ncclSuccess) throw plugin_error("closeListen", r, peer);
}

void Plugin::finalize() {
  if (!initialized_) return;
  initialized_ = false;
  const ncclResult_t r = net_->finalize(ctx_);
  if (r != ncclSuccess) throw plugin_error("finalize", r, -1);
}

ncclDebugLogger_t plugin_logger() {
  return bench_logger;
}

}  // namespace mesh::bench
