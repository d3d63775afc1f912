// SPDX-License-Identifier: Apache-2.0
#include "log_checks.h"

#include <algorithm>

namespace e2e {
namespace {

bool contains(const std::string& s, const char* what) {
  return s.find(what) != std::string::npos;
}

// The plugin's tuner line (plugin/tuner_context.cc):
//   "tuner: comm 0x<id>, <n> ranks on <m> nodes: <decision> (from <b> bytes; decision <digest>;
//    ...)"
// Returns the decision, or "" when `line` is not that line.
std::string tunerDecision(const std::string& line) {
  static const std::string kMarker = " nodes: ";
  const auto t = line.find("tuner: ");
  if (t == std::string::npos) return "";
  const auto m = line.find(kMarker, t);
  if (m == std::string::npos) return "";
  std::string decision = line.substr(m + kMarker.size());
  const auto from = decision.rfind(" (from ");
  if (from != std::string::npos) decision.resize(from);
  return decision;
}

// Why a connection to a peer without a common subnet failed, from the plugin's WARN.
std::string unreachableReason(const std::string& line) {
  std::string why;
  if (contains(line, "not supported yet")) {
    why =
        "this plugin build has no relay (issue 18: relaying through a neighbour, branch relay), so "
        "ranks without a shared emulated cable cannot connect";
  } else if (contains(line, "relaying is off")) {
    why =
        "relaying is off (NCCL_MESH_RELAY=0), so ranks without a shared emulated cable cannot "
        "connect";
  } else if (contains(line, "relaying is unavailable") || contains(line, "did not start")) {
    why = "the relay agent did not start, so ranks without a shared emulated cable cannot connect";
  } else if (contains(line, "GPU memory")) {
    why =
        "a connection between ranks without a shared emulated cable would be relayed over TCP, "
        "which cannot carry the GPU buffers its device advertises";
  } else {
    why = "a connection between ranks without a shared emulated cable was refused (not relayed)";
  }
  return "no common subnet: " + why;
}

}  // namespace

std::string expectedTunerDecision(const SetSpec& spec) {
  if (spec.net != "Mesh" || spec.emulate == "none" || spec.tuner == "none") return "";
  if (spec.tuner == "off") return "off";
  if (spec.tuner == "ring") return "steering to Ring";
  // auto (plugin/tuner_policy.h): every communicator of 3 or more nodes steers, whatever the
  // wiring (one GPU per emulated host: nodes = ranks); two nodes share one cable.
  return spec.nranks >= 3 ? "steering to Ring" : "idle";
}

void scanRankLog(std::istream& in, const std::string& path, int rank, bool exitedCleanly,
                 const SetSpec& spec, SetOutcome& out) {
  const std::string who = "rank " + std::to_string(rank) + ": ";
  const std::string good = "via NET/" + spec.net + "/";
  const std::string usingNet = "Using network " + spec.net;
  const bool mesh = spec.net == "Mesh";
  const bool emulated = mesh && spec.emulate != "none";
  const std::string wantDecision = expectedTunerDecision(spec);
  int via = 0;
  int badVia = 0;
  int warns = 0;
  bool usedNet = false;
  bool loaded = !mesh;
  bool tunerLoaded = false;
  bool decisionSeen = false;
  bool emulatedAddresses = false;
  bool unreachable = false;
  std::string line;
  while (std::getline(in, line)) {
    const auto v = line.find("NCCL version ");
    if (v != std::string::npos && out.ncclVersion.empty()) {
      out.ncclVersion = line.substr(v + 13, line.find_first_of(" \t", v + 13) - (v + 13));
    }
    if (contains(line, "] via ") && (contains(line, "[send]") || contains(line, "[receive]"))) {
      if (line.find(good) != std::string::npos) {
        ++via;
      } else if (badVia++ == 0) {
        out.problems.push_back(who + "traffic not via NET/" + spec.net + ": " + line);
      }
    }
    if (line.find(usingNet) != std::string::npos) usedNet = true;
    if (contains(line, "Loaded net plugin Mesh")) loaded = true;
    // NCCL's plugin/tuner/tuner_v*.cc, when it takes the tuner from the net plugin's library.
    if (contains(line, "TUNER/Plugin: Using Mesh")) tunerLoaded = true;
    const std::string decision = tunerDecision(line);
    if (!decision.empty()) {
      if (std::find(out.tunerDecisions.begin(), out.tunerDecisions.end(), decision) ==
          out.tunerDecisions.end()) {
        out.tunerDecisions.push_back(decision);
      }
      if (!wantDecision.empty() && decision.rfind(wantDecision, 0) == 0) decisionSeen = true;
    }
    // The plugin's device line lists its addresses; emulated ones are 127.77.x.y.
    if (contains(line, "device ") && contains(line, " 127.77.")) emulatedAddresses = true;
    // The relay branch logs "connect to <peer>: relayed over TCP; <route>".
    if (contains(line, "connect to ") && contains(line, ": relayed")) ++out.relayedLines;
    // Only the WARN: with the relay, a relayed connect logs "no common subnet ...: relaying over
    // TCP through neighbours" at INFO, and that is success.
    const bool unreachableWarn = contains(line, " WARN ") && (contains(line, "no common subnet") ||
                                                              contains(line, "shares no subnet"));
    if (unreachableWarn && !unreachable) {
      unreachable = true;
      const std::string reason = unreachableReason(line);
      if (out.unreachablePeer.empty()) out.unreachablePeer = reason;
      out.problems.push_back(who + reason);
    }
    if (contains(line, "FATAL:")) out.problems.push_back(who + line);
    if (contains(line, " WARN ") && warns++ < 3) out.warnings.push_back(who + line);
  }
  out.viaLines += via;
  out.tunerLoadedRanks += tunerLoaded ? 1 : 0;
  if (spec.tuner == "none" && mesh && tunerLoaded) {
    out.problems.push_back(who + "NCCL loaded the Mesh tuner although NCCL_TUNER_PLUGIN=none");
  }
  if (!exitedCleanly) return;
  if (!loaded) out.problems.push_back(who + "no \"Loaded net plugin Mesh\" line in " + path);
  if (!usedNet) out.problems.push_back(who + "no \"" + usingNet + "\" line in " + path);
  // A single rank has no peer and so no network connection; any other set must show one.
  if (spec.nranks > 1 && via == 0) {
    out.problems.push_back(who + "no \"" + good + "\" line in " + path);
  }
  if (!emulated) return;
  if (!emulatedAddresses) {
    out.problems.push_back(who + "no plugin device line with emulated 127.77.x.y addresses in " +
                           path + " (NCCL_MESH_EMULATE not in effect?)");
  }
  if (spec.tuner != "none" && !tunerLoaded) {
    out.problems.push_back(who + "no \"TUNER/Plugin: Using Mesh\" line in " + path +
                           " (NCCL did not load the plugin's tuner)");
  }
  if (!wantDecision.empty() && !decisionSeen) {
    out.problems.push_back(who + "no plugin tuner line deciding \"" + wantDecision + "...\" in " +
                           path);
  }
}

}  // namespace e2e
