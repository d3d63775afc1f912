// SPDX-License-Identifier: Apache-2.0
#include "report.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace e2e {
namespace {

constexpr const char* kReportedColls[] = {"all_reduce", "all_gather", "reduce_scatter", "alltoall"};
constexpr size_t kBigBytes = kLargeMessageBytes;  // "large message" threshold of the targets
constexpr double kBusBwTarget = 2.5;              // plugin busbw / Socket busbw at >= 64 MiB
constexpr size_t kSmallBytes = 1u << 10;          // the latency target: 1 KiB all_reduce

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string jsonStrings(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + jsonString(v[i]);
  return out + "]";
}

std::string jsonNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string jsonInts(const std::vector<int>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

// The fields every set has, as JSON members (no braces).
std::string setMembers(const SetOutcome& s) {
  std::ostringstream j;
  j << "\"name\": " << jsonString(s.spec.name) << ", \"nranks\": " << s.spec.nranks
    << ", \"net\": " << jsonString(s.spec.net) << ", \"proto\": " << jsonString(s.spec.proto)
    << ", \"passed\": " << (s.passed ? "true" : "false")
    << ", \"seconds\": " << jsonNumber(s.seconds) << ", \"exit_codes\": " << jsonInts(s.exitCodes)
    << ", \"timed_out\": " << (s.timedOut ? "true" : "false")
    << ", \"via_net_lines\": " << s.viaLines << ", \"nccl_version\": " << jsonString(s.ncclVersion)
    << ", \"dir\": " << jsonString(s.dir) << ", \"problems\": " << jsonStrings(s.problems)
    << ", \"nccl_warnings\": " << jsonStrings(s.warnings)
    << ", \"emulate\": " << jsonString(s.spec.emulate)
    << ", \"tuner\": " << jsonString(s.spec.tuner)
    << ", \"tuner_loaded_ranks\": " << s.tunerLoadedRanks
    << ", \"tuner_decisions\": " << jsonStrings(s.tunerDecisions)
    << ", \"relayed_connect_lines\": " << s.relayedLines
    << ", \"unreachable_peer\": " << jsonString(s.unreachablePeer);
  return j.str();
}

bool writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    return false;
  }
  std::printf("JSON report: %s\n", path.c_str());
  return true;
}

std::string humanBytes(size_t b) {
  char buf[32];
  if (b >= (1u << 20) && b % (1u << 20) == 0) {
    std::snprintf(buf, sizeof buf, "%zuM", b >> 20);
  } else if (b >= (1u << 10) && b % (1u << 10) == 0) {
    std::snprintf(buf, sizeof buf, "%zuK", b >> 10);
  } else {
    std::snprintf(buf, sizeof buf, "%zu", b);
  }
  return buf;
}

std::string ratioCell(double r) {
  if (r <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", r);
  return buf;
}

}  // namespace

double busBwFactor(const std::string& coll, int nranks) {
  const double n = nranks;
  if (nranks <= 1) return 0;
  if (coll == "all_reduce") return 2 * (n - 1) / n;
  return (n - 1) / n;  // all_gather, reduce_scatter, alltoall
}

std::vector<BenchRow> readBenchRows(const std::string& tsvPath) {
  std::vector<BenchRow> rows;
  std::ifstream in(tsvPath);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    BenchRow r;
    int ok = 0;
    if (f >> r.coll >> r.bytes >> r.count >> r.iters >> r.timeUs >> r.algbw >> r.busbw >> ok) {
      r.ok = ok != 0;
      rows.push_back(r);
    }
  }
  return rows;
}

BusBwRatio largeMessageBusBwRatio(const std::vector<BenchRow>& num,
                                  const std::vector<BenchRow>& den, const std::string& coll,
                                  size_t minBytes) {
  double numSum = 0;
  double denSum = 0;
  BusBwRatio r;
  for (const BenchRow& a : num) {
    if (a.coll != coll || a.bytes < minBytes || !a.ok) continue;
    for (const BenchRow& b : den) {
      if (b.coll == coll && b.bytes == a.bytes && b.ok) {
        numSum += a.busbw;
        denSum += b.busbw;
        ++r.sizes;
        break;
      }
    }
  }
  if (r.sizes == 0 || denSum <= 0) return BusBwRatio{};
  r.ratio = numSum / denSum;
  return r;
}

void printSetLine(const SetOutcome& s) {
  std::string cases;
  if (s.cases > 0) {
    cases =
        std::to_string(s.cases) + " cases, " + std::to_string(s.failedCases.size()) + " failed, ";
  }
  std::string extra;
  if (s.spec.net == "Mesh" && s.spec.emulate != "none") {
    extra = ", tuner loaded on " + std::to_string(s.tunerLoadedRanks) + "/" +
            std::to_string(s.spec.nranks) + " ranks, " + std::to_string(s.relayedLines) +
            " relayed connects";
  }
  std::printf("[%s] %-24s %s%d via-NET/%s lines%s, NCCL %s, %.1f s\n", s.passed ? "PASS" : "FAIL",
              s.spec.name.c_str(), cases.c_str(), s.viaLines, s.spec.net.c_str(), extra.c_str(),
              s.ncclVersion.empty() ? "?" : s.ncclVersion.c_str(), s.seconds);
  // The one failure that needs no log reading: a pair without a shared emulated cable and no
  // relay to carry it.
  if (!s.unreachablePeer.empty()) std::printf("       relay: %s\n", s.unreachablePeer.c_str());
  size_t shown = 0;
  for (const auto& p : s.problems) {
    if (shown++ < 8) std::printf("       problem: %s\n", p.c_str());
  }
  for (const auto& f : s.failedCases) {
    if (shown++ < 16) std::printf("       failed case: %s\n", f.c_str());
  }
  if (!s.passed) {
    for (const auto& w : s.warnings) std::printf("       nccl: %s\n", w.c_str());
    std::printf("       logs: %s/rank*.log\n", s.dir.c_str());
  }
  std::fflush(stdout);
}

int writeCheckReport(const Options& o, const std::vector<SetOutcome>& sets) {
  int failedSets = 0;
  size_t cases = 0;
  size_t failedCases = 0;
  std::ostringstream j;
  j << "{\n  \"mode\": \"check\",\n  \"plugin\": " << jsonString(o.plugin)
    << ",\n  \"matrix_counts\": \"" << joinSizes(o.matrixCounts) << "\",\n  \"large_bytes\": \""
    << joinSizes(o.largeBytes) << "\",\n  \"sets\": [\n";
  for (size_t i = 0; i < sets.size(); ++i) {
    const SetOutcome& s = sets[i];
    failedSets += s.passed ? 0 : 1;
    cases += s.cases;
    failedCases += s.failedCases.size();
    j << "    {" << setMembers(s) << ", \"cases\": " << s.cases
      << ", \"failed_cases\": " << jsonStrings(s.failedCases) << "}"
      << (i + 1 < sets.size() ? ",\n" : "\n");
  }
  j << "  ],\n  \"sets_passed\": " << sets.size() - static_cast<size_t>(failedSets)
    << ",\n  \"sets_failed\": " << failedSets << ",\n  \"cases_total\": " << cases
    << ",\n  \"cases_failed\": " << failedCases << "\n}\n";
  writeFile(o.jsonPath, j.str());
  std::printf("SUMMARY check: %zu/%zu process sets passed, %zu/%zu cases passed\n",
              sets.size() - static_cast<size_t>(failedSets), sets.size(), cases - failedCases,
              cases);
  return failedSets;
}

int writeBenchReport(const Options& o, const std::vector<SetOutcome>& sets) {
  // (variant: Mesh, Socket, Mesh-ring, ...; nranks) -> rows
  std::map<std::pair<std::string, int>, std::vector<BenchRow>> rows;
  int failedSets = 0;
  std::ostringstream j;
  j << "{\n  \"mode\": \"bench\",\n  \"plugin\": " << jsonString(o.plugin) << ",\n  \"sets\": [\n";
  for (size_t i = 0; i < sets.size(); ++i) {
    const SetOutcome& s = sets[i];
    failedSets += s.passed ? 0 : 1;
    auto& r = rows[{variantName(s.spec), s.spec.nranks}];
    r = readBenchRows(s.dir + "/bench.tsv");
    j << "    {" << setMembers(s) << ", \"results\": [";
    for (size_t k = 0; k < r.size(); ++k) {
      j << (k ? ",\n      " : "\n      ") << "{\"coll\": " << jsonString(r[k].coll)
        << ", \"bytes\": " << r[k].bytes << ", \"count\": " << r[k].count
        << ", \"iters\": " << r[k].iters << ", \"time_us\": " << jsonNumber(r[k].timeUs)
        << ", \"algbw_GBps\": " << jsonNumber(r[k].algbw)
        << ", \"busbw_GBps\": " << jsonNumber(r[k].busbw)
        << ", \"ok\": " << (r[k].ok ? "true" : "false") << "}";
    }
    j << "]}" << (i + 1 < sets.size() ? ",\n" : "\n");
  }
  j << "  ],\n  \"comparison\": [";

  auto find = [&](const std::string& net, int n, const std::string& coll,
                  size_t bytes) -> const BenchRow* {
    auto it = rows.find({net, n});
    if (it == rows.end()) return nullptr;
    for (const auto& r : it->second) {
      if (r.coll == coll && r.bytes == bytes) return &r;
    }
    return nullptr;
  };

  std::vector<std::string> targets;
  int targetsMet = 0;
  int targetsTotal = 0;
  std::ostringstream t;
  bool firstCmp = true;
  for (int n : o.ranks) {
    for (const char* coll : kReportedColls) {
      std::set<size_t> sizes;
      for (const auto& net : o.nets) {
        auto it = rows.find({net, n});
        if (it == rows.end()) continue;
        for (const auto& r : it->second) {
          if (r.coll == coll) sizes.insert(r.bytes);
        }
      }
      if (sizes.empty()) continue;
      std::printf("\n%s, %d ranks (float32; busbw factor %.3f)\n", coll, n, busBwFactor(coll, n));
      std::printf("%10s %12s %12s %12s %12s %9s %9s\n", "size", "Mesh us", "Mesh GB/s", "Socket us",
                  "Socket GB/s", "busbw x", "time x");
      double meshBig = 0;
      double socketBig = 0;
      int big = 0;
      int compared = 0;  // sizes both nets ran, verified
      int slower = 0;    // of them, where Mesh took longer than Socket
      double worstRatio = 0;
      size_t worstBytes = 0;
      for (size_t bytes : sizes) {
        const BenchRow* m = find("Mesh", n, coll, bytes);
        const BenchRow* s = find("Socket", n, coll, bytes);
        auto cell = [](const BenchRow* r, bool time) {
          char buf[32];
          if (r == nullptr) return std::string("-");
          std::snprintf(buf, sizeof buf, time ? "%.1f%s" : "%.3f%s", time ? r->timeUs : r->busbw,
                        r->ok ? "" : "!");
          return std::string(buf);
        };
        double bwRatio = 0;
        double timeRatio = 0;
        if (m != nullptr && s != nullptr) {
          bwRatio = s->busbw > 0 ? m->busbw / s->busbw : 0;
          timeRatio = s->timeUs > 0 ? m->timeUs / s->timeUs : 0;
          j << (firstCmp ? "\n    " : ",\n    ") << "{\"nranks\": " << n
            << ", \"coll\": " << jsonString(coll) << ", \"bytes\": " << bytes
            << ", \"mesh_time_us\": " << jsonNumber(m->timeUs)
            << ", \"socket_time_us\": " << jsonNumber(s->timeUs)
            << ", \"mesh_busbw_GBps\": " << jsonNumber(m->busbw)
            << ", \"socket_busbw_GBps\": " << jsonNumber(s->busbw)
            << ", \"busbw_ratio\": " << jsonNumber(bwRatio)
            << ", \"time_ratio\": " << jsonNumber(timeRatio) << "}";
          firstCmp = false;
          if (m->ok && s->ok && s->timeUs > 0) {
            ++compared;
            if (timeRatio > 1.0) ++slower;
            if (timeRatio > worstRatio) {
              worstRatio = timeRatio;
              worstBytes = bytes;
            }
          }
          if (bytes >= kBigBytes) {
            meshBig += m->busbw;
            socketBig += s->busbw;
            ++big;
          }
        }
        std::printf("%10s %12s %12s %12s %12s %9s %9s\n", humanBytes(bytes).c_str(),
                    cell(m, true).c_str(), cell(m, false).c_str(), cell(s, true).c_str(),
                    cell(s, false).c_str(), ratioCell(bwRatio).c_str(),
                    ratioCell(timeRatio).c_str());
      }
      // Target 1: at >= 64 MiB the plugin's busbw is at least 2.5x Socket's (mean over sizes).
      if (big > 0 && socketBig > 0) {
        const double ratio = meshBig / socketBig;
        const bool met = ratio >= kBusBwTarget;
        ++targetsTotal;
        targetsMet += met ? 1 : 0;
        char buf[200];
        std::snprintf(buf, sizeof buf,
                      "%s %d ranks: busbw at >= 64 MiB %.2fx Socket (target >= %.1fx): %s", coll, n,
                      ratio, kBusBwTarget, met ? "met" : "NOT met");
        targets.push_back(buf);
        t << (t.tellp() > 0 ? ",\n    " : "\n    ")
          << "{\"target\": \"busbw_64MiB_ratio\", \"coll\": " << jsonString(coll)
          << ", \"nranks\": " << n << ", \"value\": " << jsonNumber(ratio)
          << ", \"threshold\": " << jsonNumber(kBusBwTarget)
          << ", \"met\": " << (met ? "true" : "false") << "}";
      }
      // Target 3 (issue 28): never slower than Socket at any size (time per call, every verified
      // size both nets ran).
      if (compared > 0) {
        const bool met = slower == 0;
        ++targetsTotal;
        targetsMet += met ? 1 : 0;
        char buf[240];
        std::snprintf(buf, sizeof buf,
                      "%s %d ranks: never slower than Socket at any size: %s (%d of %d sizes "
                      "slower; worst %s at %.2fx Socket's time)",
                      coll, n, met ? "met" : "NOT met", slower, compared,
                      humanBytes(worstBytes).c_str(), worstRatio);
        targets.push_back(buf);
        t << (t.tellp() > 0 ? ",\n    " : "\n    ")
          << "{\"target\": \"never_slower_than_socket\", \"coll\": " << jsonString(coll)
          << ", \"nranks\": " << n << ", \"value\": " << jsonNumber(worstRatio)
          << ", \"worst_bytes\": " << worstBytes << ", \"slower_sizes\": " << slower
          << ", \"sizes\": " << compared << ", \"threshold\": 1"
          << ", \"met\": " << (met ? "true" : "false") << "}";
      }
      // Target 2: 1 KiB all_reduce no slower than Socket.
      const BenchRow* m = find("Mesh", n, coll, kSmallBytes);
      const BenchRow* s = find("Socket", n, coll, kSmallBytes);
      if (std::string(coll) == "all_reduce" && m != nullptr && s != nullptr) {
        const bool met = m->timeUs <= s->timeUs;
        ++targetsTotal;
        targetsMet += met ? 1 : 0;
        char buf[200];
        std::snprintf(buf, sizeof buf, "all_reduce %d ranks: 1 KiB %.1f us vs Socket %.1f us: %s",
                      n, m->timeUs, s->timeUs, met ? "met" : "NOT met");
        targets.push_back(buf);
        t << (t.tellp() > 0 ? ",\n    " : "\n    ")
          << "{\"target\": \"allreduce_1KiB_time\", \"coll\": \"all_reduce\", \"nranks\": " << n
          << ", \"value\": " << jsonNumber(m->timeUs)
          << ", \"threshold\": " << jsonNumber(s->timeUs)
          << ", \"met\": " << (met ? "true" : "false") << "}";
      }
    }
  }
  // Emulated ring / line (with the tuner) vs the full mesh, same rank count, same run.
  for (int n : o.ranks) {
    for (const auto& shape : o.emulate) {
      if (shape == "none") continue;
      const std::string variant = "Mesh-" + shape;
      const auto emu = rows.find({variant, n});
      const auto full = rows.find({"Mesh", n});
      if (emu == rows.end()) continue;
      for (const char* coll : kReportedColls) {
        std::set<size_t> sizes;
        for (const auto& r : emu->second) {
          if (r.coll == coll) sizes.insert(r.bytes);
        }
        if (full != rows.end()) {
          for (const auto& r : full->second) {
            if (r.coll == coll) sizes.insert(r.bytes);
          }
        }
        if (sizes.empty()) continue;
        std::printf("\n%s, %d ranks: emulated %s (tuner %s) vs full mesh, both Mesh\n", coll, n,
                    shape.c_str(), o.tuner.c_str());
        std::printf("%10s %12s %12s %12s %12s %9s\n", "size", "full us", "full GB/s",
                    (shape + " us").c_str(), (shape + " GB/s").c_str(), "busbw x");
        for (size_t bytes : sizes) {
          const BenchRow* f = find("Mesh", n, coll, bytes);
          const BenchRow* e = find(variant, n, coll, bytes);
          auto cell = [](const BenchRow* r, bool time) {
            char buf[32];
            if (r == nullptr) return std::string("-");
            std::snprintf(buf, sizeof buf, time ? "%.1f%s" : "%.3f%s", time ? r->timeUs : r->busbw,
                          r->ok ? "" : "!");
            return std::string(buf);
          };
          const double ratio =
              f != nullptr && e != nullptr && f->busbw > 0 ? e->busbw / f->busbw : 0;
          std::printf("%10s %12s %12s %12s %12s %9s\n", humanBytes(bytes).c_str(),
                      cell(f, true).c_str(), cell(f, false).c_str(), cell(e, true).c_str(),
                      cell(e, false).c_str(), ratioCell(ratio).c_str());
        }
        if (std::string(coll) != "all_reduce") continue;
        char buf[240];
        if (full == rows.end()) {
          std::snprintf(buf, sizeof buf,
                        "all_reduce %d ranks: emulated %s vs full mesh: no full-mesh Mesh set in "
                        "this run (add none to --emulate): NOT measured",
                        n, shape.c_str());
          targets.push_back(buf);
          continue;
        }
        const BusBwRatio r =
            largeMessageBusBwRatio(emu->second, full->second, coll, kLargeMessageBytes);
        ++targetsTotal;
        const bool met = r.sizes > 0 && r.ratio >= kEmulatedVsFullTarget;
        targetsMet += met ? 1 : 0;
        if (r.sizes == 0) {
          std::snprintf(buf, sizeof buf,
                        "all_reduce %d ranks: emulated %s (tuner %s) vs full mesh: no verified "
                        "size >= 64 MiB on both (target >= %.1fx): NOT met",
                        n, shape.c_str(), o.tuner.c_str(), kEmulatedVsFullTarget);
        } else {
          std::snprintf(buf, sizeof buf,
                        "all_reduce %d ranks: emulated %s (tuner %s) busbw at >= 64 MiB %.2fx full "
                        "mesh (target >= %.1fx): %s",
                        n, shape.c_str(), o.tuner.c_str(), r.ratio, kEmulatedVsFullTarget,
                        met ? "met" : "NOT met");
        }
        targets.push_back(buf);
        t << (t.tellp() > 0 ? ",\n    " : "\n    ")
          << "{\"target\": \"emulated_vs_full_busbw_64MiB\", \"coll\": \"all_reduce\", "
          << "\"emulate\": " << jsonString(shape) << ", \"tuner\": " << jsonString(o.tuner)
          << ", \"nranks\": " << n << ", \"value\": " << jsonNumber(r.ratio)
          << ", \"sizes\": " << r.sizes << ", \"threshold\": " << jsonNumber(kEmulatedVsFullTarget)
          << ", \"met\": " << (met ? "true" : "false") << "}";
      }
    }
  }
  j << "\n  ],\n  \"targets\": [" << t.str() << "\n  ],\n  \"targets_met\": " << targetsMet
    << ",\n  \"targets_total\": " << targetsTotal
    << ",\n  \"sets_passed\": " << sets.size() - static_cast<size_t>(failedSets)
    << ",\n  \"sets_failed\": " << failedSets << "\n}\n";
  std::printf("\n");
  for (const auto& line : targets) std::printf("TARGET %s\n", line.c_str());
  writeFile(o.jsonPath, j.str());
  std::printf("SUMMARY bench: %zu/%zu process sets passed; performance targets met: %d/%d\n",
              sets.size() - static_cast<size_t>(failedSets), sets.size(), targetsMet, targetsTotal);
  return failedSets;
}

}  // namespace e2e
