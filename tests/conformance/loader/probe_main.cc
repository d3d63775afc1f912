// SPDX-License-Identifier: Apache-2.0
// mesh_loader_probe: finds and opens a net plugin as NCCL 2.28, NCCL 2.30 or RCCL would
// (loader_emulation.h), from this process's NCCL_NET_PLUGIN, NCCL_NET and library search path,
// then checks the table the loader picked, and with --check-all every table v6..v12
// (version_checks.h). Run by loader_test.cc in a fresh process per case, so that nothing a
// previous case opened can satisfy a dlopen by name.
//
//   mesh_loader_probe --flavor nccl-2.28|nccl-2.30|rccl [--check-all]
//
// Prints one line per step; exit 0: a plugin was assigned and every check passed, 1: a check
// failed, 2: no plugin assigned, 3: usage.
#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "loader/loader_emulation.h"
#include "loader/version_checks.h"

namespace {

bool report(bool ok, int version, const std::vector<std::string>& problems) {
  if (ok) {
    std::printf("check v%d: ok\n", version);
  } else {
    for (const std::string& p : problems) std::printf("check v%d: FAIL %s\n", version, p.c_str());
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  const loader::Flavor* flavor = nullptr;
  bool check_all = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--flavor") == 0 && i + 1 < argc) {
      flavor = loader::find_flavor(argv[++i]);
    } else if (std::strcmp(argv[i], "--check-all") == 0) {
      check_all = true;
    } else {
      flavor = nullptr;
      break;
    }
  }
  if (flavor == nullptr) {
    std::fprintf(stderr, "usage: %s --flavor nccl-2.28|nccl-2.30|rccl [--check-all]\n", argv[0]);
    return 3;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* net = std::getenv("NCCL_NET");
  for (const std::string& entry : loader::plugin_list(*flavor, std::getenv("NCCL_NET_PLUGIN"))) {
    std::printf("entry %s\n", entry.c_str());
    std::vector<std::string> log;
    const loader::Opened o = loader::open_entry(*flavor, entry, &log);
    for (const std::string& l : log) std::printf("%s\n", l.c_str());
    if (o.lib == nullptr) continue;
    const char* name = *static_cast<const char* const*>(o.table);  // every table starts with it
    if (net != nullptr && (name == nullptr || strcasecmp(net, name) != 0)) {
      std::printf("skip %s: table name %s is not NCCL_NET=%s\n", o.path.c_str(),
                  name != nullptr ? name : "NULL", net);
      continue;
    }
    std::printf("assigned %s v%d\n", o.path.c_str(), o.version);
    std::vector<std::string> problems;
    bool ok = report(loader::check_version(o.lib, o.version, &problems), o.version, problems);
    if (check_all) {
      for (int v = 6; v <= 12; ++v) {
        if (v == o.version) continue;
        problems.clear();
        ok = report(loader::check_version(o.lib, v, &problems), v, problems) && ok;
      }
    }
    return ok ? 0 : 1;
  }
  std::printf("no plugin assigned\n");
  return 2;
}
