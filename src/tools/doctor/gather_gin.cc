// SPDX-License-Identifier: Apache-2.0
// Facts for the `gin` check, read at run time: the plugin library's exported GIN/RMA tables,
// whether the GIN core's CUDA driver loads (the core's own decision, so the doctor cannot
// disagree with it), each GPU's VMM/GPUDirect attribute, and libnccl.so.2's version. Everything
// through dlopen: the doctor must run on hosts without CUDA or NCCL.
#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <filesystem>

#include "gin/cuda_driver.h"
#include "tools/doctor/gather.h"

namespace mesh::doctor {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPluginFile = "libnccl-net-mesh.so";
// CUdevice_attribute values from cuda.h (CUDA 12/13).
constexpr int kAttrCcMajor = 75;
constexpr int kAttrCcMinor = 76;
constexpr int kAttrVmmGdr = 110;  // CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "dlopen failed";
}

fs::path exe_dir() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p.parent_path();
}

// Where NCCL would find the plugin (NCCL_NET_PLUGIN as a path, as given, or as
// libnccl-net-<name>.so through the loader path), then where an install or this build puts it.
std::vector<std::string> plugin_candidates(const Inventory& inv) {
  std::vector<std::string> c;
  if (const auto p = inv.getenv("NCCL_NET_PLUGIN"); p && !p->empty()) {
    if (p->find('/') != std::string::npos) {
      c.push_back(*p);
    } else {
      c.push_back("libnccl-net-" + *p + ".so");
      c.push_back(*p);
    }
  }
  c.push_back(kPluginFile);
  const fs::path dir = exe_dir();
  if (!dir.empty()) {
    c.push_back((dir / ".." / "lib" / kPluginFile).string());
    c.push_back((dir / ".." / "lib" / "x86_64-linux-gnu" / kPluginFile).string());
    c.push_back((dir / ".." / "lib" / "aarch64-linux-gnu" / kPluginFile).string());
  }
#if defined(MESH_DOCTOR_BUILD_PLUGIN_REL) && defined(MESH_DOCTOR_BUILD_CACHE_REL)
  // This build's plugin, when the doctor runs from the build tree (its CMakeCache.txt is where
  // it was at build time): never from an installed doctor.
  std::error_code ec;
  if (!dir.empty() && fs::exists(dir / MESH_DOCTOR_BUILD_CACHE_REL, ec))
    c.push_back((dir / MESH_DOCTOR_BUILD_PLUGIN_REL).lexically_normal().string());
#endif
  return c;
}

void probe_plugin(Inventory& inv) {
  GinFacts& g = inv.gin;
  std::string errors;
  for (const std::string& name : plugin_candidates(inv)) {
    void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      errors += (errors.empty() ? "" : "; ") + dl_error();
      continue;
    }
    // A library named by NCCL_NET_PLUGIN that is not ours has no ncclNet_v* of Mesh's build;
    // its GIN exports (or their absence) are still what NCCL would see, so report them.
    char path[PATH_MAX] = {};
    void* any = dlsym(h, "ncclNetPlugin_v11");
    Dl_info info{};
    if (any != nullptr && dladdr(any, &info) != 0 && info.dli_fname != nullptr) {
      g.plugin_path = realpath(info.dli_fname, path) != nullptr ? path : info.dli_fname;
    } else {
      g.plugin_path = name;
    }
    for (const char* s : kGinSymbols) {
      if (dlsym(h, s) != nullptr) g.exported.push_back(s);
    }
    // Left loaded: unloading a library with running static state is riskier than keeping it
    // for the doctor's few seconds.
    return;
  }
  g.plugin_error = errors;
}

void probe_cuda(Inventory& inv) {
  GinFacts& g = inv.gin;
  gin::CudaDriver& drv = gin::CudaDriver::instance();
  g.cuda_loaded = drv.available();
  if (!g.cuda_loaded) {
    g.cuda_error = drv.why();
    return;
  }
  // The core loaded the driver; ask it (same library, already loaded) about each GPU.
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == nullptr) return;  // a stand-in library (tests): no device queries
  using CountFn = int (*)(int*);
  using GetFn = int (*)(int*, int);
  using AttrFn = int (*)(int*, int, int);
  auto count = reinterpret_cast<CountFn>(dlsym(h, "cuDeviceGetCount"));
  auto get = reinterpret_cast<GetFn>(dlsym(h, "cuDeviceGet"));
  auto attr = reinterpret_cast<AttrFn>(dlsym(h, "cuDeviceGetAttribute"));
  int n = 0;
  if (count == nullptr || get == nullptr || attr == nullptr || count(&n) != 0) return;
  for (int i = 0; i < n; ++i) {
    GpuGinFacts gpu;
    gpu.index = i;
    int dev = 0;
    if (get(&dev, i) == 0) {
      int v = 0;
      if (attr(&v, kAttrCcMajor, dev) == 0) gpu.cc_major = v;
      if (attr(&v, kAttrCcMinor, dev) == 0) gpu.cc_minor = v;
      if (attr(&v, kAttrVmmGdr, dev) == 0) gpu.vmm_gdr = v;
    }
    g.gpus.push_back(gpu);
  }
}

void probe_nccl(Inventory& inv) {
  GinFacts& g = inv.gin;
  void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    g.nccl_error = dl_error();
    return;
  }
  using VersionFn = int (*)(int*);  // ncclResult_t ncclGetVersion(int*): needs no init
  auto fn = reinterpret_cast<VersionFn>(dlsym(h, "ncclGetVersion"));
  int v = 0;
  if (fn == nullptr || fn(&v) != 0) {
    g.nccl_error = "libnccl.so.2 loaded but ncclGetVersion failed";
    return;
  }
  g.nccl_version = v;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(fn), &info) != 0 && info.dli_fname != nullptr) {
    g.nccl_path = info.dli_fname;
  }
}

}  // namespace

void gather_gin_facts(Inventory& inv) {
  probe_plugin(inv);
  probe_cuda(inv);
  probe_nccl(inv);
}

}  // namespace mesh::doctor
