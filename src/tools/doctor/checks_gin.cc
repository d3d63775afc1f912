// SPDX-License-Identifier: Apache-2.0
// The `gin` check: whether NCCL can use this library's GIN/RMA tables on this host, over which
// transport and memory, and what would stop it. Facts and gates from docs/gin.md and
// shared/reference/gin-rma.md (1.1 timeline, 1.4 gates); nothing here fails merely because the
// host has no GPU: a host without one still runs the net plugin.
#include <algorithm>

#include "tools/doctor/checks.h"

namespace mesh::doctor {
namespace {

constexpr const char* kId = "gin";
constexpr int k2_28_7 = 22807;
constexpr int k2_29_7 = 22907;
constexpr int k2_30_3 = 23003;
constexpr int k2_30_7 = 23007;
constexpr int k2_31_0 = 23100;
constexpr int k2_32_0 = 23200;

const char* kVersionMap =
    "NCCL 2.28.7-2.29.3 takes ncclGinPlugin_v11 (only from the net plugin's library), 2.29.7 "
    "ncclGinPlugin_v12, 2.30.3/2.30.4 ncclGinPlugin_v13, 2.30.7 ncclRmaPlugin_v14 (or "
    "ncclGinPlugin_v13 as RMA v13), 2.31 ncclRmaPlugin_v15";

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The symbols NCCL would find: the inspected plugin's when it loaded, else this build's list
// (the doctor ships with the plugin it belongs to).
std::vector<std::string> offered(const GinFacts& g) {
  if (!g.plugin_path.empty()) return g.exported;
  return {std::begin(kGinSymbols), std::end(kGinSymbols)};
}

Finding exports_finding(const GinFacts& g) {
  if (g.plugin_path.empty()) {
    return {kId, Verdict::kWarn, "exports",
            "could not load the plugin library (" + g.plugin_error +
                "), so which GIN tables NCCL would find is not verified; this doctor's build "
                "exports " +
                join(offered(g)),
            "set NCCL_NET_PLUGIN to the full path of libnccl-net-mesh.so (or put its folder on "
            "LD_LIBRARY_PATH) and run the doctor again"};
  }
  std::vector<std::string> missing;
  for (const char* s : kGinSymbols) {
    if (!contains(g.exported, s)) missing.push_back(s);
  }
  if (g.exported.empty()) {
    return {kId, Verdict::kWarn, "exports",
            g.plugin_path +
                " exports no GIN or RMA table (an nccl-mesh build older than GIN support, or "
                "another library), so NCCL has no GIN with it (device-API kernels fail)",
            "install the libnccl-net-mesh.so built with this doctor"};
  }
  if (!missing.empty()) {
    return {kId, Verdict::kWarn, "exports",
            g.plugin_path + " exports " + join(g.exported) + " but not " + join(missing) +
                " (a different build than this doctor's); " + kVersionMap,
            "install the libnccl-net-mesh.so built with this doctor"};
  }
  return {kId, Verdict::kOk, "exports",
          g.plugin_path + " exports " + join(g.exported) + ": " + kVersionMap +
              "; NCCL 2.32's ncclRmaPlugin_v16/_v17 are not exported",
          ""};
}

Finding memory_finding(const Inventory& inv) {
  const GinFacts& g = inv.gin;
  if (g.cuda_loaded) {
    return {kId, Verdict::kOk, "memory",
            "libcuda.so.1 loads: GIN over TCP can target GPU memory (NCCL_PTR_CUDA, moved by the "
            "driver's copies, never by CPU loads) and host memory; dma-buf is not advertised",
            ""};
  }
  const bool nvidia = inv.modules.count("nvidia") != 0 || !inv.nvidia_driver.empty();
  if (nvidia) {
    // NCCL's GIN registers GPU memory (its signal array is cuMem memory), so host-only GIN on a
    // GPU host means every GIN registration of a device-API kernel is refused.
    return {kId, Verdict::kWarn, "memory",
            "an NVIDIA driver is loaded but libcuda.so.1 does not load (" + g.cuda_error +
                "): GIN advertises host memory only and refuses NCCL's GPU registrations",
            "install the driver's user-space library (libcuda.so.1, the package of the NVIDIA "
            "driver) or add its folder to LD_LIBRARY_PATH; in a container use the NVIDIA "
            "container toolkit"};
  }
  return {kId, Verdict::kOk, "memory",
          "no CUDA driver here (" + g.cuda_error +
              ") so GIN over TCP advertises host memory only (NCCL_PTR_HOST); a host without a "
              "GPU runs no device-API kernels anyway",
          ""};
}

Findings gpu_findings(const GinFacts& g) {
  Findings out;
  if (!g.cuda_loaded) return out;
  if (g.gpus.empty()) {
    out.push_back({kId, Verdict::kOk, "gpus",
                   "the CUDA driver reports no GPU: no VMM/GPUDirect gate to check", ""});
    return out;
  }
  // NCCL before 2.29.7 does not read the attribute, so a known older NCCL makes 0 harmless.
  const bool gated = !g.nccl_version || *g.nccl_version >= k2_29_7;
  for (const GpuGinFacts& gpu : g.gpus) {
    const std::string subject = "gpu " + std::to_string(gpu.index);
    const std::string cc = std::to_string(gpu.cc_major) + "." + std::to_string(gpu.cc_minor);
    if (gpu.cc_major >= 0 && gpu.cc_major < 7) {
      out.push_back({kId, Verdict::kWarn, subject,
                     "compute capability " + cc + ": NCCL's GIN skips GPUs below 7.0",
                     "run device-API (GIN) kernels on GPUs of compute capability 7.0 or later"});
      continue;
    }
    if (!gpu.vmm_gdr) {
      out.push_back({kId, Verdict::kWarn, subject,
                     "could not read CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED "
                     "(NCCL 2.29.7+ needs it to be 1 on every GPU for GIN)",
                     "check the driver with nvidia-smi; the attribute needs a recent driver"});
      continue;
    }
    if (*gpu.vmm_gdr == 1) {
      out.push_back({kId, Verdict::kOk, subject,
                     "compute capability " + cc +
                         ", CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 1: "
                         "NCCL's GIN gate passes on this GPU",
                     ""});
      continue;
    }
    out.push_back(
        {kId, gated ? Verdict::kWarn : Verdict::kOk, subject,
         "CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = " +
             std::to_string(*gpu.vmm_gdr) +
             (gated ? ": NCCL 2.29.7 and later set the GIN type to NONE on this host whatever "
                      "plugin is installed (reported for DGX Spark GB10)"
                    : ": the NCCL found here (" + nccl_version_text(*g.nccl_version) +
                          ") does not check it; NCCL 2.29.7 and later would turn GIN off"),
         gated ? "no plugin can lift this gate; NCCL 2.28.7-2.29.3 does not have it (with "
                 "NCCL_NET_PLUGIN=mesh it takes ncclGinPlugin_v11)"
               : ""});
  }
  return out;
}

Finding transport_finding(const Inventory& inv) {
  const bool rdma_usable =
      !inv.rdma_ports.empty() && inv.libibverbs_loadable && inv.uverbs_devices > 0;
  std::string how;
  if (inv.settings.transport == TransportMode::kTcp) {
    how = "TCP on every cable (NCCL_MESH_TRANSPORT=tcp)";
  } else if (rdma_usable) {
    how =
        "RDMA one-sided (RDMA WRITE, atomic FETCH_AND_ADD signals, READ on GIN's own QP per "
        "rank pair, no CPU on the data path) on cables where both ends have an RDMA port with "
        "atomics, TCP messages on the others";
  } else {
    how = "TCP (no usable RDMA device here)";
  }
  return {kId, Verdict::kOk, "transport",
          "GIN rides the plugin's own net connections: " + how +
              "; peers without a cable only with NCCL_MESH_RELAY=1 (through the relay)",
          ""};
}

Finding nccl_finding(const GinFacts& g) {
  if (!g.nccl_version) {
    return {kId, Verdict::kOk, "nccl",
            "could not tell the NCCL version (libnccl.so.2 did not load: " + g.nccl_error +
                "; an NCCL inside a Python environment is not on the loader path); " + kVersionMap,
            ""};
  }
  const std::string v = nccl_version_text(*g.nccl_version);
  const std::string at = g.nccl_path.empty() ? "" : " (" + g.nccl_path + ")";
  const NcclGinLookup look = nccl_gin_lookup(*g.nccl_version);
  if (!look.known) {
    return {kId, Verdict::kWarn, "nccl",
            "NCCL " + v + at +
                " is newer than the releases this library was checked against: " + look.where,
            "use NCCL 2.28.7-2.31 for GIN through this library"};
  }
  if (look.symbols.empty()) {
    return {kId, Verdict::kWarn, "nccl", "NCCL " + v + at + " " + look.where,
            "NCCL 2.28.7 or later is needed for GIN through a plugin"};
  }
  const std::vector<std::string> have = offered(g);
  for (const std::string& s : look.symbols) {
    if (!contains(have, s)) continue;
    return {kId, Verdict::kOk, "nccl",
            "NCCL " + v + at + " looks up " + join(look.symbols) + " in " + look.where +
                "; it will take " + s + " from this library. It also needs: " + look.gate,
            ""};
  }
  return {kId, Verdict::kWarn, "nccl",
          "NCCL " + v + at + " looks up " + join(look.symbols) +
              ", none of which the plugin "
              "exports: no GIN with this library",
          "install the libnccl-net-mesh.so built with this doctor"};
}

// NCCL_* settings that turn GIN off or steer NCCL away from this library's tables.
Findings settings_findings(const Inventory& inv) {
  Findings out;
  const auto is = [&inv](const char* name, const char* value) {
    const auto v = inv.getenv(name);
    return v && *v == value;
  };
  if (is("NCCL_GIN_ENABLE", "0")) {
    out.push_back({kId, Verdict::kWarn, "NCCL_GIN_ENABLE", "NCCL_GIN_ENABLE=0 turns GIN off",
                   "unset NCCL_GIN_ENABLE"});
  }
  if (is("NCCL_CUMEM_ENABLE", "0")) {
    out.push_back({kId, Verdict::kWarn, "NCCL_CUMEM_ENABLE",
                   "NCCL_CUMEM_ENABLE=0 (common in switchless recipes) disables symmetric memory "
                   "and with it GIN",
                   "unset NCCL_CUMEM_ENABLE where device-API kernels run"});
  }
  if (is("NCCL_WIN_ENABLE", "0")) {
    out.push_back({kId, Verdict::kWarn, "NCCL_WIN_ENABLE",
                   "NCCL_WIN_ENABLE=0 disables symmetric windows and with them GIN",
                   "unset NCCL_WIN_ENABLE"});
  }
  if (const auto t = inv.getenv("NCCL_GIN_TYPE"); t && *t != "2" && *t != "-1") {
    out.push_back({kId, Verdict::kWarn, "NCCL_GIN_TYPE",
                   "NCCL_GIN_TYPE=" + *t +
                       ": NCCL skips every GIN plugin of another type, and this library's is "
                       "proxy (2)",
                   "export NCCL_GIN_TYPE=2 (or unset it)"});
  }
  for (const char* name : {"NCCL_GIN_PLUGIN", "NCCL_RMA_PLUGIN"}) {
    const auto v = inv.getenv(name);
    if (!v) continue;
    if (*v == "none") {
      out.push_back({kId, Verdict::kWarn, name,
                     std::string(name) + "=none: NCCL 2.29.7 and later load no external " +
                         (name[5] == 'G' ? "GIN" : "RMA") + " plugin",
                     std::string("unset ") + name});
    } else if (v->find("mesh") == std::string::npos) {
      out.push_back({kId, Verdict::kWarn, name,
                     std::string(name) + "=" + *v +
                         ": NCCL 2.29.7 and later try this list before the net plugin's "
                         "library, so another plugin's tables may be taken",
                     std::string("unset ") + name + " or name the mesh plugin in it"});
    }
  }
  if (out.empty()) {
    out.push_back({kId, Verdict::kOk, "settings",
                   "no NCCL_* setting turns GIN off here (NCCL_GIN_ENABLE, NCCL_CUMEM_ENABLE, "
                   "NCCL_WIN_ENABLE, NCCL_GIN_TYPE, NCCL_GIN_PLUGIN, NCCL_RMA_PLUGIN); on hosts "
                   "with mlx5 NICs NCCL_GIN_TYPE=2 keeps NCCL 2.30.7 from trying its own GDAKI "
                   "backend first",
                   ""});
  }
  return out;
}

}  // namespace

std::string nccl_version_text(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

NcclGinLookup nccl_gin_lookup(int code) {
  NcclGinLookup l;
  l.known = code < k2_32_0;
  const std::string net_lib = "the net plugin's library only (NCCL_NET_PLUGIN=mesh)";
  const std::string gin_libs =
      "the NCCL_GIN_PLUGIN list, else libnccl-gin.so, else the net plugin's library";
  const std::string vmm =
      "CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED = 1 on every GPU, symmetric "
      "memory (NCCL_CUMEM_ENABLE, NCCL_WIN_ENABLE on), NCCL_GIN_ENABLE=1, the same GIN type on "
      "every rank";
  if (code < k2_28_7) {
    l.where = "has no GIN plugin interface (it appeared in NCCL 2.28.7)";
  } else if (code < k2_29_7) {
    l.symbols = {"ncclGinPlugin_v11"};
    l.where = net_lib;
    l.gate =
        "GIN activated: more than one node, or ginForceEnable, or GIN signals/counters "
        "requested by the device communicator (no VMM attribute gate)";
  } else if (code < k2_30_3) {
    l.symbols = {"ncclGinPlugin_v12", "ncclGinPlugin_v11"};
    l.where = gin_libs;
    l.gate = vmm;
  } else if (code < k2_30_7) {
    l.symbols = {"ncclGinPlugin_v13", "ncclGinPlugin_v12", "ncclGinPlugin_v11"};
    l.where = gin_libs;
    l.gate = vmm;
  } else if (code < k2_31_0) {
    l.symbols = {"ncclRmaPlugin_v14", "ncclRmaPlugin_v13", "ncclGinPlugin_v13"};
    l.where =
        "the NCCL_RMA_PLUGIN list, libnccl-rma.so, the GIN plugin's library, the net plugin's "
        "library (NCCL's own GIN proxy runs on top)";
    l.gate = vmm;
  } else if (code < k2_32_0) {
    l.symbols = {"ncclRmaPlugin_v15"};
    l.where = "the same libraries as 2.30.7";
    l.gate = vmm;
  } else {
    l.where =
        "NCCL 2.32 looks up ncclRmaPlugin_v16/_v17, which this library does not export; whether "
        "it still takes ncclRmaPlugin_v15 is not known here, so GIN could not be told";
  }
  return l;
}

Findings check_gin(const Inventory& inv) {
  Findings out;
  out.push_back(exports_finding(inv.gin));
  out.push_back(memory_finding(inv));
  for (Finding& f : gpu_findings(inv.gin)) out.push_back(std::move(f));
  out.push_back(transport_finding(inv));
  out.push_back(nccl_finding(inv.gin));
  for (Finding& f : settings_findings(inv)) out.push_back(std::move(f));
  return out;
}

}  // namespace mesh::doctor
