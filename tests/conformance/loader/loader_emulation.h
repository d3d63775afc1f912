// SPDX-License-Identifier: Apache-2.0
// How NCCL and RCCL find and open a net plugin, reproduced for the loader test (NCCL 2.28-2.30
// src/plugin/net.cc and plugin_open.cc; RCCL's copy with the "librccl-net" prefix):
//  - NCCL_NET_PLUGIN unset: one entry, "<prefix>.so". "none" (any case): no entry. Otherwise a
//    comma list (strtok: empty items vanish), at most 14 entries.
//  - each entry: dlopen(entry, RTLD_NOW|RTLD_LOCAL) as given; if that fails and the entry has no
//    '/' and is not "lib*.so", dlopen("<prefix>-<entry>.so"). An entry that is a prefix of
//    "STATIC_PLUGIN" means dlopen(NULL) (NCCL's strncasecmp quirk).
//  - in an opened library, the first of ncclNetPlugin_v<N> for N in the loader's version list; a
//    library without any is "unsupported" and closed.
//  - NCCL_NET set: only a table whose name matches it (strcasecmp) is used.
//  - init, then devices() > 0; the first entry that passes is the plugin, the rest are skipped.
#pragma once

#include <string>
#include <vector>

namespace loader {

struct Flavor {
  std::string name;           // "nccl-2.28", "nccl-2.30", "rccl"
  std::string prefix;         // "libnccl-net" or "librccl-net"
  std::vector<int> versions;  // probed in this order
};

// nullptr for an unknown name.
const Flavor* find_flavor(const std::string& name);

// The entries NCCL_NET_PLUGIN (nullptr: unset) gives.
std::vector<std::string> plugin_list(const Flavor& flavor, const char* env);

struct Opened {
  void* lib = nullptr;  // dlopen handle, nullptr when nothing could be opened
  std::string path;     // the file the dynamic loader mapped (link map name)
  int version = 0;      // the ncclNetPlugin_v<N> found, 0 if none
  const void* table = nullptr;
};

// Opens one entry the way openPluginLib + ncclNetPluginLoad do. `log` gets one line per step
// ("try NAME: ...", "unsupported ...").
Opened open_entry(const Flavor& flavor, const std::string& entry, std::vector<std::string>* log);

}  // namespace loader
