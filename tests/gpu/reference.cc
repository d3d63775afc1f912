// SPDX-License-Identifier: Apache-2.0
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <thread>
#include <vector>

namespace e2e {

const char* eltName(Elt elt) {
  switch (elt) {
    case Elt::kInt8:
      return "int8";
    case Elt::kInt32:
      return "int32";
    case Elt::kInt64:
      return "int64";
    case Elt::kFloat16:
      return "float16";
    case Elt::kBfloat16:
      return "bfloat16";
    case Elt::kFloat32:
      return "float32";
    case Elt::kFloat64:
      return "float64";
  }
  return "?";
}

size_t eltBytes(Elt elt) {
  switch (elt) {
    case Elt::kInt8:
      return 1;
    case Elt::kFloat16:
    case Elt::kBfloat16:
      return 2;
    case Elt::kInt32:
    case Elt::kFloat32:
      return 4;
    case Elt::kInt64:
    case Elt::kFloat64:
      return 8;
  }
  return 1;
}

bool eltIsFloat(Elt elt) {
  return elt == Elt::kFloat16 || elt == Elt::kBfloat16 || elt == Elt::kFloat32 ||
         elt == Elt::kFloat64;
}

const char* opName(Op op) {
  switch (op) {
    case Op::kNone:
      return "none";
    case Op::kSum:
      return "sum";
    case Op::kProd:
      return "prod";
    case Op::kMax:
      return "max";
    case Op::kMin:
      return "min";
    case Op::kAvg:
      return "avg";
  }
  return "?";
}

ValueKind valueKindFor(Op op) {
  if (op == Op::kProd) return ValueKind::kProduct;
  if (op == Op::kAvg) return ValueKind::kAverage;
  return ValueKind::kGeneral;
}

const char* collName(Coll coll) {
  switch (coll) {
    case Coll::kAllReduce:
      return "allreduce";
    case Coll::kBroadcast:
      return "broadcast";
    case Coll::kBcast:
      return "bcast";
    case Coll::kReduce:
      return "reduce";
    case Coll::kAllGather:
      return "allgather";
    case Coll::kReduceScatter:
      return "reducescatter";
    case Coll::kAlltoAll:
      return "alltoall";
    case Coll::kGather:
      return "gather";
    case Coll::kScatter:
      return "scatter";
    case Coll::kSendRecvRing:
      return "sendrecv_ring";
    case Coll::kSendRecvAllPairs:
      return "sendrecv_allpairs";
  }
  return "?";
}

bool collReduces(Coll coll) {
  return coll == Coll::kAllReduce || coll == Coll::kReduce || coll == Coll::kReduceScatter;
}

bool collHasRoot(Coll coll) {
  return coll == Coll::kBroadcast || coll == Coll::kBcast || coll == Coll::kReduce ||
         coll == Coll::kGather || coll == Coll::kScatter;
}

bool collAllowsInPlace(Coll coll) {
  // ncclAlltoAll documents no in-place form; point-to-point has none either.
  return coll != Coll::kAlltoAll && coll != Coll::kSendRecvRing && coll != Coll::kSendRecvAllPairs;
}

bool collOnlyInPlace(Coll coll) {
  return coll == Coll::kBcast;
}

size_t sendElems(Coll coll, size_t count, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  switch (coll) {
    case Coll::kReduceScatter:
    case Coll::kScatter:
    case Coll::kAlltoAll:
    case Coll::kSendRecvAllPairs:
      return n * count;
    default:
      return count;
  }
}

size_t recvElems(Coll coll, size_t count, int nranks) {
  const size_t n = static_cast<size_t>(nranks);
  switch (coll) {
    case Coll::kAllGather:
    case Coll::kGather:
    case Coll::kAlltoAll:
    case Coll::kSendRecvAllPairs:
      return n * count;
    default:
      return count;
  }
}

size_t inPlaceSendOffset(Coll coll, size_t count, int rank, int root) {
  if (coll == Coll::kAllGather) return static_cast<size_t>(rank) * count;
  if (coll == Coll::kGather) return static_cast<size_t>(root) * count;
  return 0;
}

size_t inPlaceRecvOffset(Coll coll, size_t count, int rank, int root) {
  if (coll == Coll::kReduceScatter) return static_cast<size_t>(rank) * count;
  if (coll == Coll::kScatter) return static_cast<size_t>(root) * count;
  return 0;
}

bool rankHasInput(Coll coll, int rank, int root) {
  // Only the root's send buffer matters for a broadcast or a scatter.
  if (coll == Coll::kBroadcast || coll == Coll::kBcast || coll == Coll::kScatter) {
    return rank == root;
  }
  return true;
}

bool rankHasOutput(Coll coll, int rank, int root) {
  if (coll == Coll::kReduce || coll == Coll::kGather) return rank == root;
  return true;
}

namespace {

// Reduction of all ranks' inputs at one index, in double (exact for these small integers).
// One valueBits() call covers 8 ranks: this loop is the host's hot path for large cases.
double reduceAt(const Expectation& e, uint64_t index) {
  const ValueKind kind = valueKindFor(e.op);
  uint64_t bits = valueBits(e.seed, 0, index);
  double acc = valueFromByte(kind, rankByte(bits, 0), e.nranks);
  for (int r = 1; r < e.nranks; ++r) {
    if (r % 8 == 0) bits = valueBits(e.seed, r / 8, index);
    const double v = valueFromByte(kind, rankByte(bits, r), e.nranks);
    switch (e.op) {
      case Op::kProd:
        acc *= v;
        break;
      case Op::kMax:
        acc = std::max(acc, v);
        break;
      case Op::kMin:
        acc = std::min(acc, v);
        break;
      default:
        acc += v;
        break;  // sum and avg
    }
  }
  if (e.op == Op::kAvg) acc /= e.nranks;
  return acc;
}

double inputAt(const Expectation& e, int rank, uint64_t index) {
  return inputValue(valueKindFor(e.op), e.seed, rank, e.nranks, index);
}

}  // namespace

double expectedValue(const Expectation& e, size_t index) {
  const uint64_t count = e.count;
  const uint64_t rank = static_cast<uint64_t>(e.rank);
  switch (e.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce:
      return reduceAt(e, index);
    case Coll::kReduceScatter:
      return reduceAt(e, rank * count + index);
    case Coll::kBroadcast:
    case Coll::kBcast:
      return inputAt(e, e.root, index);
    case Coll::kAllGather:
    case Coll::kGather:
      // Block i of the output is rank i's input.
      return inputAt(e, static_cast<int>(index / count), index % count);
    case Coll::kScatter:
      return inputAt(e, e.root, rank * count + index);
    case Coll::kAlltoAll:
    case Coll::kSendRecvAllPairs:
      // Block s of the output is block `rank` of rank s's input.
      return inputAt(e, static_cast<int>(index / count), rank * count + index % count);
    case Coll::kSendRecvRing:
      return inputAt(e, (e.rank + e.nranks - 1) % e.nranks, index);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

double tolerance(Elt elt, Op op) {
  // ncclAvg on floats multiplies each input by a rounded 1/n before summing; with |inputs/n|
  // <= 3 and n <= 4 the error stays below 0.2 even in bfloat16, while the expected average is an
  // integer: any lost or duplicated contribution moves the result by at least 1.
  return (op == Op::kAvg && eltIsFloat(elt)) ? 0.25 : 0.0;
}

double decodeFloat16(uint16_t bits) {
  const int sign = (bits >> 15) ? -1 : 1;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0x1f) {
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

double decodeBfloat16(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

namespace {

// Decoders from the stored bits of each dtype to double; the compare loop is instantiated per
// dtype so the hot loop has no per-element dispatch.
struct LoadInt8 {
  static double at(const void* p, size_t i) { return static_cast<const int8_t*>(p)[i]; }
};
struct LoadInt32 {
  static double at(const void* p, size_t i) { return static_cast<const int32_t*>(p)[i]; }
};
struct LoadInt64 {
  static double at(const void* p, size_t i) {
    return static_cast<double>(static_cast<const int64_t*>(p)[i]);
  }
};
struct LoadFloat16 {
  static double at(const void* p, size_t i) {
    return decodeFloat16(static_cast<const uint16_t*>(p)[i]);
  }
};
struct LoadBfloat16 {
  static double at(const void* p, size_t i) {
    return decodeBfloat16(static_cast<const uint16_t*>(p)[i]);
  }
};
struct LoadFloat32 {
  static double at(const void* p, size_t i) { return static_cast<const float*>(p)[i]; }
};
struct LoadFloat64 {
  static double at(const void* p, size_t i) { return static_cast<const double*>(p)[i]; }
};

constexpr size_t kMaxReported = 5;

template <typename Load>
void compareRange(const Expectation& e, const void* data, size_t begin, size_t end, size_t stride,
                  size_t last, double tol, CompareResult& out) {
  char line[256];
  auto check = [&](size_t i) {
    const double want = expectedValue(e, i);
    const double got = Load::at(data, i);
    // Written so that NaN (an unwritten float16 element) counts as a mismatch.
    if (!(std::fabs(got - want) <= tol)) {
      if (out.mismatches < kMaxReported) {
        std::snprintf(line, sizeof line, "  [%zu] got %.17g expected %.17g\n", i, got, want);
        out.detail += line;
      }
      ++out.mismatches;
    }
  };
  size_t checked = 0;
  for (size_t i = begin; i < end; i += stride, ++checked) check(i);
  // Sampling must still look at the very last element: off-by-one tails are a classic.
  if (stride > 1 && last >= begin && last < end && (last - begin) % stride != 0) {
    check(last);
    ++checked;
  }
  out.checked += checked;
}

using RangeFn = void (*)(const Expectation&, const void*, size_t, size_t, size_t, size_t, double,
                         CompareResult&);

RangeFn rangeFnFor(Elt elt) {
  switch (elt) {
    case Elt::kInt8:
      return compareRange<LoadInt8>;
    case Elt::kInt32:
      return compareRange<LoadInt32>;
    case Elt::kInt64:
      return compareRange<LoadInt64>;
    case Elt::kFloat16:
      return compareRange<LoadFloat16>;
    case Elt::kBfloat16:
      return compareRange<LoadBfloat16>;
    case Elt::kFloat32:
      return compareRange<LoadFloat32>;
    case Elt::kFloat64:
      return compareRange<LoadFloat64>;
  }
  return compareRange<LoadInt8>;
}

}  // namespace

CompareResult compareOutput(const Expectation& e, Elt elt, const void* data, size_t elems,
                            size_t stride) {
  CompareResult result;
  if (elems == 0) return result;
  stride = std::max<size_t>(stride, 1);
  const double tol = tolerance(elt, e.op);
  const size_t last = elems - 1;
  const size_t samples = (elems + stride - 1) / stride;
  const RangeFn compareRange = rangeFnFor(elt);
  // Hundreds of MiB per check: split across a few threads (ranks run in parallel too).
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  const size_t nthreads = samples < (1u << 18) ? 1 : std::min<size_t>(4, hw);
  if (nthreads == 1) {
    compareRange(e, data, 0, elems, stride, last, tol, result);
    return result;
  }
  std::vector<CompareResult> parts(nthreads);
  std::vector<std::thread> threads;
  const size_t perThread = (samples + nthreads - 1) / nthreads;
  for (size_t t = 0; t < nthreads; ++t) {
    const size_t begin = std::min(elems, t * perThread * stride);
    const size_t end = std::min(elems, (t + 1) * perThread * stride);
    threads.emplace_back(
        [&, t, begin, end] { compareRange(e, data, begin, end, stride, last, tol, parts[t]); });
  }
  for (auto& th : threads) th.join();
  for (auto& p : parts) {
    result.checked += p.checked;
    if (result.mismatches < kMaxReported) result.detail += p.detail;
    result.mismatches += p.mismatches;
  }
  return result;
}

bool sentinelIntact(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  return std::all_of(p, p + bytes, [](uint8_t b) { return b == kSentinelByte; });
}

}  // namespace e2e
