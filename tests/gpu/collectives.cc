// SPDX-License-Identifier: Apache-2.0
#include "collectives.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "kernels.h"
#include "reference.h"
#include "values.h"

namespace e2e {
namespace {

// Bytes of sentinel behind every output: a collective that writes past its count is caught.
constexpr size_t kGuardBytes = 256;

struct Case {
  Coll coll = Coll::kAllReduce;
  Op op = Op::kNone;
  Elt elt = Elt::kFloat32;
  size_t count = 0;
  bool inPlace = false;
  int root = 0;
  uint32_t seed = 0;
  std::string label;
};

// FNV-1a. Seeds and roots derive from the case's label rather than from a running counter, so
// ranks agree on them even after taking different paths (a rank left out of a split skips the
// cases run on that split).
uint32_t hashLabel(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 16777619u;
  }
  return h;
}

// `root` < 0: derived from the seed, so every rank gets to be a root somewhere in the matrix.
Case makeCase(const Comm& c, const std::string& section, Coll coll, Op op, Elt elt, size_t count,
              bool inPlace, int root = -1) {
  Case k;
  k.coll = coll;
  k.op = op;
  k.elt = elt;
  k.count = count;
  k.inPlace = inPlace;
  std::string label = section + "/" + collName(coll);
  if (collReduces(coll)) label += std::string("/") + opName(op);
  label += std::string("/") + eltName(elt) + "/n" + std::to_string(count);
  label += inPlace ? "/inplace" : "/outofplace";
  k.seed = hashLabel(label);
  if (collHasRoot(coll)) {
    k.root = root >= 0 ? root : static_cast<int>(k.seed % static_cast<uint32_t>(c.nranks));
    label += "/root" + std::to_string(k.root);
  }
  k.label = label;
  return k;
}

// The buffers of one case. Grouped cases keep several alive at once, one slot each.
struct Slot {
  DeviceBuffer main;  // receive buffer, or the only buffer of an in-place case
  DeviceBuffer send;  // send buffer of an out-of-place case
  HostBuffer host;    // output + guard, copied back
  char* sendPtr = nullptr;
  char* recvPtr = nullptr;
  char* guardPtr = nullptr;
  size_t outBytes = 0;
};

class Suite {
 public:
  Suite(const RankSetup& setup, std::FILE* results) : setup_(setup), results_(results) {}

  int failures() const { return failures_; }
  int cases() const { return cases_; }

  // Every collective x dtype x op x in/out-of-place at one element count.
  void runMatrix(const Comm& c, const std::string& section, size_t count) {
    for (Elt elt : kAllElts) {
      for (Coll coll : kAllColls) {
        for (Op op : opsFor(coll)) {
          for (bool inPlace : {false, true}) {
            if (inPlace && !collAllowsInPlace(coll)) continue;
            if (!inPlace && collOnlyInPlace(coll)) continue;
            runSingle(c, makeCase(c, section, coll, op, elt, count, inPlace));
          }
        }
      }
    }
  }

  // A few representative cases whose largest buffer is about `bytes`. The counts are a few
  // elements short of a round number so that chunking code meets a ragged tail. From 64 MiB on
  // only the picks marked `huge` run: each costs a second or more of transfer plus host-side
  // checking, and nine process sets must fit the run's time budget.
  void runLarge(const Comm& c, size_t bytes) {
    struct Pick {
      Coll coll;
      Op op;
      Elt elt;
      bool inPlace;
      bool huge;
    };
    static constexpr Pick kPicks[] = {
        {Coll::kAllReduce, Op::kSum, Elt::kFloat32, false, true},
        {Coll::kAllReduce, Op::kMax, Elt::kBfloat16, true, false},
        {Coll::kBroadcast, Op::kNone, Elt::kFloat64, false, true},
        {Coll::kReduce, Op::kSum, Elt::kInt32, false, false},
        {Coll::kAllGather, Op::kNone, Elt::kInt8, false, true},
        {Coll::kReduceScatter, Op::kSum, Elt::kFloat32, true, true},
        {Coll::kAlltoAll, Op::kNone, Elt::kInt32, false, true},
        {Coll::kGather, Op::kNone, Elt::kFloat16, false, false},
        {Coll::kScatter, Op::kNone, Elt::kFloat16, false, false},
        {Coll::kSendRecvRing, Op::kNone, Elt::kFloat32, false, false},
        {Coll::kSendRecvAllPairs, Op::kNone, Elt::kInt64, false, false},
    };
    for (const Pick& p : kPicks) {
      if (bytes >= (64u << 20) && !p.huge) continue;
      const size_t biggest =
          std::max(sendElems(p.coll, 1, c.nranks), recvElems(p.coll, 1, c.nranks));
      size_t count = bytes / eltBytes(p.elt) / biggest;
      if (count > 64) count -= 3;
      runSingle(c, makeCase(c, "large", p.coll, p.op, p.elt, count, p.inPlace));
    }
  }

  // Several collectives inside one ncclGroupStart/ncclGroupEnd, as frameworks issue them.
  void runGroups(const Comm& c, size_t count) {
    const int last = c.nranks - 1;
    for (Elt elt : kAllElts) {
      const std::string section = std::string("group-mixed-") + eltName(elt);
      std::vector<Case> cases = {
          makeCase(c, section, Coll::kAllReduce, Op::kSum, elt, count, false),
          makeCase(c, section, Coll::kAllGather, Op::kNone, elt, count, true),
          makeCase(c, section, Coll::kReduceScatter, Op::kMax, elt, count, false),
          makeCase(c, section, Coll::kBroadcast, Op::kNone, elt, count + 1, false, last),
          makeCase(c, section, Coll::kReduce, Op::kMin, elt, count, true, 0),
          makeCase(c, section, Coll::kAlltoAll, Op::kNone, elt, count, false),
          makeCase(c, section, Coll::kSendRecvRing, Op::kNone, elt, count + 2, false),
      };
      runGroup(c, cases);
    }
    // Gradient buckets: many all-reduces of mixed dtypes and sizes in one group, like DDP.
    std::vector<Case> buckets;
    for (int i = 0; i < 8; ++i) {
      const Elt elt = kAllElts[static_cast<size_t>(i) % std::size(kAllElts)];
      const Op op = (i % 2) ? Op::kAvg : Op::kSum;
      const size_t n = (count >> (i % 4)) + static_cast<size_t>(i);
      buckets.push_back(makeCase(c, "group-buckets-" + std::to_string(i), Coll::kAllReduce, op, elt,
                                 n, i % 3 == 0));
    }
    runGroup(c, buckets);
  }

  // A short mixed set for communicators other than the world one.
  void runSmoke(const Comm& c, const std::string& section) {
    runSingle(c, makeCase(c, section, Coll::kAllReduce, Op::kSum, Elt::kInt32, 4099, false));
    runSingle(c, makeCase(c, section, Coll::kAllReduce, Op::kAvg, Elt::kBfloat16, 70001, true));
    runSingle(c, makeCase(c, section, Coll::kAllGather, Op::kNone, Elt::kFloat32, 1025, false));
    runSingle(c, makeCase(c, section, Coll::kReduceScatter, Op::kProd, Elt::kFloat16, 333, false));
    runSingle(c, makeCase(c, section, Coll::kBroadcast, Op::kNone, Elt::kInt8, 100, true));
    runSingle(c, makeCase(c, section, Coll::kAlltoAll, Op::kNone, Elt::kBfloat16, 513, false));
    runSingle(c, makeCase(c, section, Coll::kSendRecvRing, Op::kNone, Elt::kFloat64, 777, false));
    runSingle(
        c, makeCase(c, section, Coll::kAllReduce, Op::kSum, Elt::kFloat32, (4u << 20) + 1, false));
  }

  // ncclCommSplit twice: without the last rank (NCCL_SPLIT_NOCOLOR), and all ranks in reverse
  // order sharing the parent's resources (so the plugin context is reused, not re-initialised).
  void runSplits(const Comm& world) {
    const int rank = world.rank;
    const int n = world.nranks;

    Comm dropLast;
    dropLast.name = "split-nocolor";
    const int color = (rank == n - 1) ? NCCL_SPLIT_NOCOLOR : 0;
    E2E_NCCL(world.comm, ncclCommSplit(world.comm, color, rank, &dropLast.comm, nullptr));
    if (rank == n - 1) {
      recordShape("split-nocolor/shape", dropLast.comm == nullptr, "NOCOLOR rank got a comm");
    } else {
      expectShape(dropLast, "split-nocolor/shape", rank, n - 1);
    }

    Comm reversed;
    reversed.name = "split-reversed-shared";
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.splitShare = 1;
    E2E_NCCL(world.comm, ncclCommSplit(world.comm, 0, n - 1 - rank, &reversed.comm, &config));
    expectShape(reversed, "split-reversed-shared/shape", n - 1 - rank, n);

    if (dropLast.comm != nullptr) {
      E2E_CUDA(cudaStreamCreateWithFlags(&dropLast.stream, cudaStreamNonBlocking));
      runSmoke(dropLast, "split-nocolor");
    }
    E2E_CUDA(cudaStreamCreateWithFlags(&reversed.stream, cudaStreamNonBlocking));
    runSmoke(reversed, "split-reversed-shared");
    // The parent stays usable while its children exist.
    runSingle(world, makeCase(world, "split-parent", Coll::kAllReduce, Op::kMin, Elt::kInt64, 12345,
                              false));
    destroyComm(reversed);
    destroyComm(dropLast);
  }

 private:
  static std::vector<Op> opsFor(Coll coll) {
    if (collReduces(coll)) return {std::begin(kAllReduceOps), std::end(kAllReduceOps)};
    return {Op::kNone};
  }

  Slot& slot(size_t i) {
    while (slots_.size() <= i) slots_.push_back(std::make_unique<Slot>());
    return *slots_[i];
  }

  // Sentinel over the output (and guard), then the inputs, all queued on c.stream.
  void prepare(const Comm& c, const Case& k, Slot& s) {
    const size_t eb = eltBytes(k.elt);
    const size_t sendBytes = sendElems(k.coll, k.count, c.nranks) * eb;
    const size_t recvBytes = recvElems(k.coll, k.count, c.nranks) * eb;
    s.outBytes = recvBytes;
    if (k.inPlace) {
      const size_t mainBytes = std::max(sendBytes, recvBytes);
      char* base = s.main.reserve(mainBytes + kGuardBytes);
      s.sendPtr = base + inPlaceSendOffset(k.coll, k.count, c.rank, k.root) * eb;
      s.recvPtr = base + inPlaceRecvOffset(k.coll, k.count, c.rank, k.root) * eb;
      s.guardPtr = base + mainBytes;
      E2E_CUDA(cudaMemsetAsync(base, kSentinelByte, mainBytes + kGuardBytes, c.stream));
    } else {
      s.recvPtr = s.main.reserve(recvBytes + kGuardBytes);
      s.sendPtr = s.send.reserve(sendBytes + kGuardBytes);
      s.guardPtr = s.recvPtr + recvBytes;
      E2E_CUDA(cudaMemsetAsync(s.recvPtr, kSentinelByte, recvBytes + kGuardBytes, c.stream));
    }
    if (rankHasInput(k.coll, c.rank, k.root)) {
      E2E_CUDA(launchFill(s.sendPtr, k.elt, sendBytes / eb, valueKindFor(k.op), k.seed, c.rank,
                          c.nranks, 0, c.stream));
    }
  }

  void enqueueReadback(const Comm& c, Slot& s) {
    char* host = s.host.reserve(s.outBytes + kGuardBytes);
    if (s.outBytes > 0) {
      E2E_CUDA(cudaMemcpyAsync(host, s.recvPtr, s.outBytes, cudaMemcpyDeviceToHost, c.stream));
    }
    E2E_CUDA(cudaMemcpyAsync(host + s.outBytes, s.guardPtr, kGuardBytes, cudaMemcpyDeviceToHost,
                             c.stream));
  }

  void verify(const Comm& c, const Case& k, Slot& s) {
    std::string detail;
    bool ok = true;
    if (rankHasOutput(k.coll, c.rank, k.root)) {
      Expectation e;
      e.coll = k.coll;
      e.op = k.op;
      e.seed = k.seed;
      e.rank = c.rank;
      e.nranks = c.nranks;
      e.root = k.root;
      e.count = k.count;
      const size_t elems = s.outBytes / eltBytes(k.elt);
      const CompareResult r = compareOutput(e, k.elt, s.host.data(), elems);
      if (r.mismatches > 0) {
        ok = false;
        detail += std::to_string(r.mismatches) + " of " + std::to_string(r.checked) +
                  " elements wrong\n" + r.detail;
      }
    }
    // Non-root ranks of reduce/gather have no defined output, but nobody may write past it.
    if (!sentinelIntact(s.host.data() + s.outBytes, kGuardBytes)) {
      ok = false;
      detail += "guard bytes behind the output were overwritten\n";
    }
    record(k.label, ok, detail);
  }

  void runSingle(const Comm& c, const Case& k) {
    Slot& s = slot(0);
    prepare(c, k, s);
    issueCollective(c, k.coll, k.op, k.elt, s.sendPtr, s.recvPtr, k.count, k.root);
    enqueueReadback(c, s);
    waitStream(setup_, c, k.label.c_str());
    verify(c, k, s);
  }

  void runGroup(const Comm& c, const std::vector<Case>& cases) {
    for (size_t i = 0; i < cases.size(); ++i) prepare(c, cases[i], slot(i));
    E2E_NCCL(c.comm, ncclGroupStart());
    for (size_t i = 0; i < cases.size(); ++i) {
      const Case& k = cases[i];
      issueCollective(c, k.coll, k.op, k.elt, slot(i).sendPtr, slot(i).recvPtr, k.count, k.root);
    }
    E2E_NCCL(c.comm, ncclGroupEnd());
    for (size_t i = 0; i < cases.size(); ++i) enqueueReadback(c, slot(i));
    waitStream(setup_, c, cases.front().label.c_str());
    for (size_t i = 0; i < cases.size(); ++i) verify(c, cases[i], slot(i));
  }

  // Checks the split comm's rank and size, and sets c's fields from what NCCL reports (they
  // drive the reference for the cases run on it).
  void expectShape(Comm& c, const std::string& label, int wantRank, int wantCount) {
    int gotRank = -1;
    int gotCount = -1;
    if (c.comm != nullptr) {
      E2E_NCCL(c.comm, ncclCommUserRank(c.comm, &gotRank));
      E2E_NCCL(c.comm, ncclCommCount(c.comm, &gotCount));
    }
    c.rank = gotRank;
    c.nranks = gotCount;
    const bool ok = gotRank == wantRank && gotCount == wantCount;
    recordShape(label, ok,
                "rank " + std::to_string(gotRank) + " of " + std::to_string(gotCount) +
                    ", expected rank " + std::to_string(wantRank) + " of " +
                    std::to_string(wantCount));
  }

  void recordShape(const std::string& label, bool ok, const std::string& why) {
    record(label, ok, ok ? std::string() : why + "\n");
  }

  void record(const std::string& label, bool ok, const std::string& detail) {
    ++cases_;
    std::fprintf(results_, "%s %s\n", label.c_str(), ok ? "PASS" : "FAIL");
    if (!ok) {
      ++failures_;
      std::printf("FAIL %s\n%s", label.c_str(), detail.c_str());
      std::fflush(stdout);
    }
  }

  const RankSetup& setup_;
  std::FILE* results_;
  std::vector<std::unique_ptr<Slot>> slots_;
  int cases_ = 0;
  int failures_ = 0;
};

// Runs one section and prints how long it took, so slow protocols show up in the logs.
template <typename F>
void timed(const RankSetup& setup, const Suite& suite, const std::string& what, F&& body) {
  const auto start = std::chrono::steady_clock::now();
  const int casesBefore = suite.cases();
  const int failuresBefore = suite.failures();
  body();
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("e2e rank %d: %-28s %5d cases, %d failed, %.2f s\n", setup.rank, what.c_str(),
              suite.cases() - casesBefore, suite.failures() - failuresBefore, secs);
  std::fflush(stdout);
}

}  // namespace

int runCorrectness(const RankSetup& setup, const CheckPlan& plan) {
  const std::string path = setup.dir + "/results-rank" + std::to_string(setup.rank) + ".txt";
  std::FILE* results = std::fopen(path.c_str(), "w");
  if (results == nullptr) fatal("cannot create %s", path.c_str());
  // Line-buffered: a rank that dies mid-run still leaves the verdicts it reached.
  std::setvbuf(results, nullptr, _IOLBF, 0);
  Suite suite(setup, results);

  Comm world = createWorldComm(setup, 0, "world");
  for (size_t count : plan.matrixCounts) {
    timed(setup, suite, "matrix n=" + std::to_string(count),
          [&] { suite.runMatrix(world, "matrix", count); });
  }
  for (size_t bytes : plan.largeBytes) {
    timed(setup, suite, "large " + std::to_string(bytes >> 20) + " MiB",
          [&] { suite.runLarge(world, bytes); });
  }
  for (size_t count : plan.groupCounts) {
    timed(setup, suite, "groups n=" + std::to_string(count),
          [&] { suite.runGroups(world, count); });
  }
  timed(setup, suite, "split", [&] { suite.runSplits(world); });

  // Destroy every communicator, then build a new one: NCCL finalizes the plugin when its last
  // comm goes (abi doc 5.5), so this is the path a re-initialising job takes.
  timed(setup, suite, "destroy + re-create", [&] {
    destroyComm(world);
    world = createWorldComm(setup, 1, "recreated");
    suite.runSmoke(world, "recreated");
  });
  destroyComm(world);

  std::fclose(results);
  std::printf("e2e rank %d: SUMMARY cases=%d failed=%d\n", setup.rank, suite.cases(),
              suite.failures());
  std::fflush(stdout);
  return suite.failures();
}

}  // namespace e2e
