// SPDX-License-Identifier: Apache-2.0
#include "launcher_selftest.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "launcher.h"
#include "log_checks.h"
#include "rank_env.h"
#include "report.h"
#include "topology/emulated_mesh.h"
#include "topology/ifname_filter.h"
#include "topology/selection.h"

namespace e2e {
namespace {

int g_launcher_failures = 0;

void launcher_expect(bool ok, const std::string& what) {
  if (!ok) {
    ++g_launcher_failures;
    std::printf("launcher selftest FAIL: %s\n", what.c_str());
  }
}

std::string valueOr(const Environment& env, const char* key, const char* fallback) {
  const char* v = env.get(key);
  return v != nullptr ? v : fallback;
}

int occurrences(const Environment& env, const std::string& key) {
  return static_cast<int>(std::count_if(env.vars().begin(), env.vars().end(), [&](const auto& v) {
    return v.compare(0, key.size() + 1, key + "=") == 0;
  }));
}

// What a caller's shell might carry into the launcher: each of these would break a set if the
// launcher passed it on.
const std::vector<std::string> kInherited = {
    "PATH=/usr/bin",       "NCCL_MESH_IFNAME=eth0",       "NCCL_MESH_EMULATE=ring:9:8",
    "NCCL_TUNER_PLUGIN=x", "NCCL_NET_PLUGIN_EXTRA=keep",  "NCCL_DEBUG=WARN",
    "NCCL_PROTO=LL",       "NCCL_DEBUG_FILE=/tmp/x.%h.%p"};

SetSpec spec(const std::string& net, int n, const std::string& emulate,
             const std::string& tuner = "auto", const std::string& proto = "Simple") {
  SetSpec s;
  s.name = "t";
  s.nranks = n;
  s.net = net;
  s.proto = proto;
  s.emulate = emulate;
  s.tuner = tuner;
  return s;
}

void checkEnvironmentBasics() {
  Environment env({"NCCL_NET=Socket", "NCCL_NET_PLUGIN=a", "NCCL_NETX=b"});
  env.unset("NCCL_NET");
  launcher_expect(env.get("NCCL_NET") == nullptr, "unset left the key");
  launcher_expect(
      valueOr(env, "NCCL_NET_PLUGIN", "") == "a" && valueOr(env, "NCCL_NETX", "") == "b",
      "unset of NCCL_NET removed a key it is a prefix of");
  env.set("NCCL_NET_PLUGIN", "c");
  launcher_expect(
      occurrences(env, "NCCL_NET_PLUGIN") == 1 && valueOr(env, "NCCL_NET_PLUGIN", "") == "c",
      "set did not replace the value");
}

void checkRankEnvironments() {
  const std::string plugin = "/abs/libnccl-net-mesh.so";
  for (int r = 0; r < 4; ++r) {
    const Environment e = rankEnvironment(spec("Mesh", 4, "ring"), r, plugin, kInherited);
    const std::string who = "ring rank " + std::to_string(r) + ": ";
    launcher_expect(valueOr(e, "NCCL_MESH_EMULATE", "") == "ring:4:" + std::to_string(r),
                    who + "NCCL_MESH_EMULATE is " + valueOr(e, "NCCL_MESH_EMULATE", "(unset)"));
    launcher_expect(e.get("NCCL_MESH_IFNAME") == nullptr, who + "inherited NCCL_MESH_IFNAME kept");
    launcher_expect(valueOr(e, "NCCL_HOSTID", "") == "host" + std::to_string(r),
                    who + "NCCL_HOSTID");
    launcher_expect(
        valueOr(e, "NCCL_NET", "") == "Mesh" && valueOr(e, "NCCL_NET_PLUGIN", "") == plugin,
        who + "net or plugin");
    launcher_expect(e.get("NCCL_TUNER_PLUGIN") == nullptr,
                    who + "inherited NCCL_TUNER_PLUGIN kept");
    launcher_expect(valueOr(e, "NCCL_MESH_TUNER", "") == "auto", who + "NCCL_MESH_TUNER");
    launcher_expect(valueOr(e, "NCCL_PROTO", "") == "Simple", who + "NCCL_PROTO");
    launcher_expect(valueOr(e, "NCCL_DEBUG", "") == "INFO", who + "NCCL_DEBUG not raised to INFO");
    launcher_expect(e.get("NCCL_DEBUG_FILE") == nullptr, who + "NCCL_DEBUG_FILE kept");
    launcher_expect(valueOr(e, "NCCL_NET_PLUGIN_EXTRA", "") == "keep" && e.get("PATH") != nullptr,
                    who + "unrelated variables dropped");
    for (const auto& v : e.vars()) {
      const std::string key = v.substr(0, v.find('='));
      launcher_expect(occurrences(e, key) == 1, who + key + " appears more than once");
    }
  }
  const Environment line = rankEnvironment(spec("Mesh", 4, "line"), 3, plugin, kInherited);
  launcher_expect(valueOr(line, "NCCL_MESH_EMULATE", "") == "line:4:3",
                  "line rank 3: NCCL_MESH_EMULATE");

  const Environment full = rankEnvironment(spec("Mesh", 4, "none"), 1, plugin, kInherited);
  launcher_expect(full.get("NCCL_MESH_EMULATE") == nullptr,
                  "full mesh: inherited NCCL_MESH_EMULATE kept");
  launcher_expect(valueOr(full, "NCCL_MESH_IFNAME", "") == "lo",
                  "full mesh: NCCL_MESH_IFNAME is not lo");

  const Environment sock = rankEnvironment(spec("Socket", 2, "none"), 0, plugin, kInherited);
  launcher_expect(
      valueOr(sock, "NCCL_NET_PLUGIN", "") == "none" && valueOr(sock, "NCCL_NET", "") == "Socket",
      "Socket: net or plugin");
  launcher_expect(sock.get("NCCL_MESH_EMULATE") == nullptr, "Socket: NCCL_MESH_EMULATE kept");

  const Environment off = rankEnvironment(spec("Mesh", 4, "ring", "off"), 0, plugin, kInherited);
  launcher_expect(valueOr(off, "NCCL_MESH_TUNER", "") == "off", "tuner off: NCCL_MESH_TUNER");
  const Environment none = rankEnvironment(spec("Mesh", 4, "ring", "none"), 0, plugin, kInherited);
  launcher_expect(
      valueOr(none, "NCCL_TUNER_PLUGIN", "") == "none" && none.get("NCCL_MESH_TUNER") == nullptr,
      "tuner none: NCCL_TUNER_PLUGIN=none and no NCCL_MESH_TUNER");
  const Environment dflt =
      rankEnvironment(spec("Mesh", 2, "none", "auto", "default"), 0, plugin, kInherited);
  launcher_expect(dflt.get("NCCL_PROTO") == nullptr, "proto default: inherited NCCL_PROTO kept");
}

// The interfaces the plugin uses for rank r, from the environment the launcher gives it, through
// the plugin's own emulation and selection code.
std::vector<mesh::topology::Interface> pluginInterfaces(const Environment& env,
                                                        const std::string& who) {
  std::vector<mesh::topology::Interface> all;
  std::string why;
  if (!mesh::topology::discover_mesh_interfaces(valueOr(env, "NCCL_MESH_EMULATE", ""), &all,
                                                &why)) {
    launcher_expect(false, who + "the plugin rejects the emulation value: " + why);
    return {};
  }
  const auto filter = mesh::topology::IfnameFilter::parse(valueOr(env, "NCCL_MESH_IFNAME", ""));
  return mesh::topology::select_interfaces(all, filter).used;
}

bool shareSubnet(const std::vector<mesh::topology::Interface>& a,
                 const std::vector<mesh::topology::Interface>& b) {
  for (const auto& x : a) {
    for (const auto& y : b) {
      if (mesh::in_subnet(x.addr, y.addr.addr) || mesh::in_subnet(y.addr, x.addr.addr)) {
        return true;
      }
    }
  }
  return false;
}

// Under the launcher's environment the plugin of each rank uses exactly its emulated cables:
// neighbours share a subnet, everyone else does not (the relay's job).
void checkEmulatedAdjacency() {
  struct Shape {
    const char* name;
    int n;
  };
  for (const Shape shape :
       {Shape{"ring", 4}, Shape{"line", 4}, Shape{"ring", 3}, Shape{"line", 2}}) {
    const bool ring = std::strcmp(shape.name, "ring") == 0;
    std::vector<std::vector<mesh::topology::Interface>> used;
    for (int r = 0; r < shape.n; ++r) {
      const std::string who = std::string(shape.name) + ":" + std::to_string(shape.n) + " rank " +
                              std::to_string(r) + ": ";
      const Environment env =
          rankEnvironment(spec("Mesh", shape.n, shape.name), r, "/p.so", kInherited);
      used.push_back(pluginInterfaces(env, who));
      const size_t cables = ring || (r > 0 && r < shape.n - 1) ? 2 : 1;
      launcher_expect(used.back().size() == (shape.n == 2 ? 1 : cables),
                      who + "uses " + std::to_string(used.back().size()) + " interfaces");
      for (const auto& itf : used.back()) {
        launcher_expect((itf.addr.addr >> 16) == ((127u << 8) | 77u),
                        who + "address outside 127.77/16");
      }
    }
    for (int a = 0; a < shape.n; ++a) {
      for (int b = a + 1; b < shape.n; ++b) {
        const bool neighbours = b == a + 1 || (ring && a == 0 && b == shape.n - 1);
        launcher_expect(
            shareSubnet(used[static_cast<size_t>(a)], used[static_cast<size_t>(b)]) == neighbours,
            std::string(shape.name) + ":" + std::to_string(shape.n) + " ranks " +
                std::to_string(a) + " and " + std::to_string(b) +
                (neighbours ? ": neighbours without a common subnet"
                            : ": non-neighbours with a common subnet"));
      }
    }
  }
  // Why the launcher unsets NCCL_MESH_IFNAME under emulation: the caller's filter (eth0 here)
  // would leave the plugin no interface at all.
  std::vector<mesh::topology::Interface> all;
  std::string why;
  mesh::topology::discover_mesh_interfaces("ring:4:0", &all, &why);
  launcher_expect(
      mesh::topology::select_interfaces(all, mesh::topology::IfnameFilter::parse("eth0"))
          .used.empty(),
      "an eth0 filter keeps emulated interfaces (the unset would be pointless)");
}

void checkPlan() {
  Options o;
  o.mode = "check";
  o.ranks = {4};
  o.protos = {"Simple", "LL"};
  o.nets = {"Mesh", "Socket"};
  o.emulate = {"none", "ring", "line"};
  o.tuner = "ring";
  std::vector<std::string> names;
  for (const auto& s : planProcessSets(o)) names.push_back(s.name);
  const std::vector<std::string> want = {"check-Mesh-n4-Simple",      "check-Socket-n4-Simple",
                                         "check-Mesh-n4-LL",          "check-Socket-n4-LL",
                                         "check-Mesh-ring-n4-Simple", "check-Mesh-ring-n4-LL",
                                         "check-Mesh-line-n4-Simple", "check-Mesh-line-n4-LL"};
  launcher_expect(names == want, "check plan names or order");
  const auto specs = planProcessSets(o);
  launcher_expect(specs.size() == want.size() && specs[4].emulate == "ring" &&
                      specs[4].tuner == "ring" && specs[4].nranks == 4 &&
                      specs[4].proto == "Simple",
                  "check plan: emulated set fields");
  o.mode = "bench";
  o.nets = {"Mesh"};
  o.emulate = {"none", "ring"};
  names.clear();
  for (const auto& s : planProcessSets(o)) names.push_back(s.name);
  launcher_expect(names == std::vector<std::string>{"bench-Mesh-n4", "bench-Mesh-ring-n4"},
                  "bench plan");
  launcher_expect(variantName(spec("Mesh", 4, "ring")) == "Mesh-ring" &&
                      variantName(spec("Mesh", 4, "none")) == "Mesh" &&
                      variantName(spec("Socket", 4, "none")) == "Socket",
                  "variant names");
}

// Lines as NCCL 2.28.9 and the plugin print them (prefix: host:pid:tid [dev] NCCL INFO).
const char* kGoodRingLog =
    "h:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
    "h:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin Mesh (v11)\n"
    "h:1:1 [0] NCCL INFO NET/Mesh : device 0 mesh0: lo 127.77.0.1/30, lo 127.77.0.14/30, 0 Mb/s, "
    "pci (virtual)\n"
    "h:1:1 [0] NCCL INFO Using network Mesh\n"
    "h:1:1 [0] NCCL INFO TUNER/Plugin: Using Mesh (v5)\n"
    "h:1:1 [0] NCCL INFO NET/Mesh : tuner: comm 0x5e1d, 4 ranks on 4 nodes: steering to Ring "
    "(NCCL_MESH_TUNER=auto, 3 or more nodes) (from 131072 bytes; decision 1a2b3c4d; this host's 2 "
    "cable(s) are not an input)\n"
    "h:1:1 [0] NCCL INFO NET/Mesh : tuner: comm 0x5e1e, 2 ranks on 2 nodes: idle: two nodes share "
    "one cable (NCCL_MESH_TUNER=auto) (from 131072 bytes; decision 0a0b0c0d; this host's 2 "
    "cable(s) are not an input)\n"
    "h:1:1 [0] NCCL INFO Channel 00/0 : 3[0] -> 0[0] [receive] via NET/Mesh/0\n"
    "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Mesh/0\n"
    "h:1:1 [0] NCCL INFO NET/Mesh : connect: no common subnet with the peer (127.77.0.9/30): "
    "relaying over TCP through neighbours\n"
    "h:1:1 [0] NCCL INFO NET/Mesh : connect to 127.77.0.9: relayed over TCP; via 127.77.0.2\n";

SetOutcome scan(const std::string& log, const SetSpec& s, bool clean = true) {
  SetOutcome out;
  out.spec = s;
  std::istringstream in(log);
  scanRankLog(in, "rank0.log", 0, clean, s, out);
  return out;
}

bool anyProblemHas(const SetOutcome& o, const char* text) {
  return std::any_of(o.problems.begin(), o.problems.end(),
                     [&](const std::string& p) { return p.find(text) != std::string::npos; });
}

std::string without(std::string log, const char* marker) {
  const auto at = log.find(marker);
  if (at == std::string::npos) return log;
  const auto begin = log.rfind('\n', at);
  const auto end = log.find('\n', at);
  log.erase(begin == std::string::npos ? 0 : begin + 1,
            end - (begin == std::string::npos ? 0 : begin));
  return log;
}

void checkLogScan() {
  const SetSpec ring = spec("Mesh", 4, "ring");
  SetOutcome ok = scan(kGoodRingLog, ring);
  launcher_expect(ok.problems.empty(),
                  "good ring log has problems: " + (ok.problems.empty() ? "" : ok.problems[0]));
  launcher_expect(ok.viaLines == 2 && ok.tunerLoadedRanks == 1 && ok.relayedLines == 1,
                  "good ring log: via/tuner/relayed counts");
  launcher_expect(
      ok.tunerDecisions.size() == 2 &&
          ok.tunerDecisions[0] == "steering to Ring (NCCL_MESH_TUNER=auto, 3 or more nodes)",
      "tuner decision text: " + (ok.tunerDecisions.empty() ? "" : ok.tunerDecisions[0]));
  launcher_expect(ok.ncclVersion == "2.28.9+cuda13.0", "NCCL version");
  launcher_expect(anyProblemHas(scan(without(kGoodRingLog, "TUNER/Plugin"), ring), "TUNER/Plugin"),
                  "missing NCCL tuner load line not reported");
  launcher_expect(anyProblemHas(scan(without(kGoodRingLog, "steering"), ring), "steering to Ring"),
                  "missing tuner decision not reported");
  launcher_expect(anyProblemHas(scan(without(kGoodRingLog, "device 0"), ring), "127.77"),
                  "missing emulated addresses not reported");
  launcher_expect(
      anyProblemHas(scan(without(kGoodRingLog, "Loaded net plugin"), ring), "Loaded net plugin"),
      "missing plugin load line not reported");
  // A failed rank is judged by its exit status; the proof is not required of it.
  launcher_expect(scan(without(kGoodRingLog, "TUNER/Plugin"), ring, false).problems.empty(),
                  "proof required of a rank that failed");
  launcher_expect(anyProblemHas(scan(kGoodRingLog, spec("Mesh", 4, "ring", "off")), "\"off...\""),
                  "tuner off: a steering decision accepted");
  launcher_expect(
      anyProblemHas(scan(kGoodRingLog, spec("Mesh", 4, "ring", "none")), "NCCL_TUNER_PLUGIN=none"),
      "tuner none: a loaded tuner accepted");
  // The full mesh keeps its old requirements: no tuner or emulation lines needed.
  const std::string plain =
      without(without(without(kGoodRingLog, "TUNER/Plugin"), "steering"), "device 0");
  launcher_expect(scan(plain, spec("Mesh", 4, "none")).problems.empty(),
                  "full mesh needs tuner lines");
  const std::string socketVia = std::string(kGoodRingLog) +
                                "h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via "
                                "NET/Socket/0\n";
  launcher_expect(anyProblemHas(scan(socketVia, ring), "traffic not via NET/Mesh"),
                  "a Socket via line in a Mesh set not reported");

  // No relay in the build: the plugin's WARN on main, for a non-neighbour pair.
  const std::string noRelay =
      "h:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin Mesh (v11)\n"
      "h:1:1 [0] NCCL WARN NET/Mesh : connect: no common subnet with the peer (it advertises "
      "127.77.0.9/30; local subnets: 127.77.0.1/30). Check the cabling and addresses, or "
      "NCCL_MESH_IFNAME. Relaying through a neighbour is not supported yet (planned setting "
      "NCCL_MESH_RELAY): with NCCL, order ranks so ring neighbours share a cable\n";
  const SetOutcome nr = scan(noRelay, ring, false);
  launcher_expect(
      nr.unreachablePeer.find("no relay") != std::string::npos && anyProblemHas(nr, "no relay"),
      "missing relay not named: " + nr.unreachablePeer);
  const SetOutcome off = scan(
      "h:1:1 [0] NCCL WARN NET/Mesh : connect: no common subnet with the peer (it advertises x; "
      "local subnets: y) and relaying is off (NCCL_MESH_RELAY=0). Check\n",
      ring, false);
  launcher_expect(off.unreachablePeer.find("NCCL_MESH_RELAY=0") != std::string::npos,
                  "relay off not named: " + off.unreachablePeer);
  const SetOutcome gpu = scan(
      "h:1:1 [0] NCCL WARN NET/Mesh : connect: device mesh0 advertises GPU memory "
      "(NCCL_PTR_CUDA/DMABUF), but the peer (x) shares no subnet with this host, so the "
      "connection would be relayed over TCP\n",
      ring, false);
  launcher_expect(gpu.unreachablePeer.find("GPU buffers") != std::string::npos,
                  "GPU-memory relay refusal not named: " + gpu.unreachablePeer);
}

void checkBusBwRatio() {
  auto row = [](const char* coll, size_t bytes, double busbw, bool ok = true) {
    BenchRow r;
    r.coll = coll;
    r.bytes = bytes;
    r.busbw = busbw;
    r.ok = ok;
    return r;
  };
  const size_t M = 1u << 20;
  const std::vector<BenchRow> ring = {
      row("all_reduce", 16 * M, 1.0), row("all_reduce", 64 * M, 9), row("all_reduce", 128 * M, 9.5),
      row("all_reduce", 256 * M, 1.0, false), row("all_gather", 64 * M, 50)};
  const std::vector<BenchRow> full = {row("all_reduce", 16 * M, 10), row("all_reduce", 64 * M, 10),
                                      row("all_reduce", 128 * M, 10),
                                      row("all_reduce", 256 * M, 10), row("all_gather", 64 * M, 5)};
  const BusBwRatio r = largeMessageBusBwRatio(ring, full, "all_reduce", kLargeMessageBytes);
  launcher_expect(r.sizes == 2 && r.ratio > 0.924 && r.ratio < 0.926,
                  "ring/full ratio over verified sizes >= 64 MiB: " + std::to_string(r.ratio) +
                      " over " + std::to_string(r.sizes));
  launcher_expect(r.ratio < kEmulatedVsFullTarget + 0.03 && r.ratio >= kEmulatedVsFullTarget,
                  "0.925 meets the 0.9 target");
  const BusBwRatio none = largeMessageBusBwRatio(ring, {}, "all_reduce", kLargeMessageBytes);
  launcher_expect(none.sizes == 0 && none.ratio == 0, "ratio without a full mesh");
  const BusBwRatio small = largeMessageBusBwRatio({row("all_reduce", 16 * M, 1.0)}, full,
                                                  "all_reduce", kLargeMessageBytes);
  launcher_expect(small.sizes == 0, "sizes below 64 MiB counted");
}

}  // namespace

int runLauncherSelftest() {
  checkEnvironmentBasics();
  checkRankEnvironments();
  checkEmulatedAdjacency();
  checkPlan();
  checkLogScan();
  checkBusBwRatio();
  std::printf("launcher selftest: %s (%d failures)\n", g_launcher_failures == 0 ? "PASS" : "FAIL",
              g_launcher_failures);
  return g_launcher_failures == 0 ? 0 : 1;
}

}  // namespace e2e
