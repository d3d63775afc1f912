// SPDX-License-Identifier: Apache-2.0
#include "loader/loader_emulation.h"

#include <dlfcn.h>
#include <link.h>
#include <strings.h>

#include <cstring>

namespace loader {

const Flavor* find_flavor(const std::string& name) {
  static const Flavor kFlavors[] = {
      {"nccl-2.28", "libnccl-net", {11, 10, 9, 8, 7, 6}},
      {"nccl-2.30", "libnccl-net", {12, 11, 10, 9, 8, 7, 6}},
      {"rccl", "librccl-net", {12, 11, 10, 9, 8, 7, 6}},
  };
  for (const Flavor& f : kFlavors) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::vector<std::string> plugin_list(const Flavor& flavor, const char* env) {
  if (env == nullptr) return {flavor.prefix + ".so"};
  if (strcasecmp(env, "none") == 0) return {};
  std::vector<std::string> out;
  std::string item;
  const std::string value = env;
  for (size_t i = 0; i <= value.size(); ++i) {
    if (i == value.size() || value[i] == ',') {
      if (!item.empty() && out.size() < 14) out.push_back(item);  // 16 slots minus IB and Socket
      item.clear();
    } else {
      item += value[i];
    }
  }
  return out;
}

namespace {

void* try_open(const std::string& name, std::vector<std::string>* log) {
  // NCCL: strncasecmp(name, "STATIC_PLUGIN", strlen(name)) == 0 -> dlopen(NULL).
  const bool static_plugin = strncasecmp(name.c_str(), "STATIC_PLUGIN", name.size()) == 0;
  void* lib = dlopen(static_plugin ? nullptr : name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    log->push_back("try " + name + ": " + (why != nullptr ? why : "dlopen failed"));
  } else {
    log->push_back("try " + name + ": opened");
  }
  return lib;
}

bool is_full_library_name(const std::string& s) {
  return s.compare(0, 3, "lib") == 0 && s.size() >= 3 &&
         s.compare(s.size() - std::min<size_t>(3, s.size()), 3, ".so") == 0;
}

}  // namespace

Opened open_entry(const Flavor& flavor, const std::string& entry, std::vector<std::string>* log) {
  Opened out;
  out.lib = try_open(entry, log);
  if (out.lib == nullptr && entry.find('/') == std::string::npos && !is_full_library_name(entry)) {
    out.lib = try_open(flavor.prefix + "-" + entry + ".so", log);
  }
  if (out.lib == nullptr) return out;
  link_map* map = nullptr;
  if (dlinfo(out.lib, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr) out.path = map->l_name;
  for (int v : flavor.versions) {
    const std::string symbol = "ncclNetPlugin_v" + std::to_string(v);
    out.table = dlsym(out.lib, symbol.c_str());
    if (out.table != nullptr) {
      out.version = v;
      return out;
    }
  }
  log->push_back("unsupported " + (out.path.empty() ? entry : out.path) +
                 ": no ncclNetPlugin_v<N> this loader knows");
  dlclose(out.lib);
  out.lib = nullptr;
  return out;
}

}  // namespace loader
