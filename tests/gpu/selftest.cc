// SPDX-License-Identifier: Apache-2.0
#include "selftest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "reference.h"
#include "values.h"

namespace e2e {
namespace {

int g_failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    ++g_failures;
    std::printf("selftest FAIL: %s\n", what);
  }
}

void checkDecoders() {
  expect(decodeFloat16(0x3c00) == 1.0, "float16 1.0");
  expect(decodeFloat16(0xc000) == -2.0, "float16 -2.0");
  expect(decodeFloat16(0x7bff) == 65504.0, "float16 max");
  expect(decodeFloat16(0x0001) == std::ldexp(1.0, -24), "float16 smallest subnormal");
  expect(decodeFloat16(0x5140) == 42.0, "float16 42");
  expect(std::isnan(decodeFloat16(0x7f7f)), "float16 sentinel is NaN");
  expect(decodeBfloat16(0x3f80) == 1.0, "bfloat16 1.0");
  expect(decodeBfloat16(0xc040) == -3.0, "bfloat16 -3.0");
  expect(decodeBfloat16(0x4270) == 60.0, "bfloat16 60");
}

// The ranges values.h promises, and that every reduction over up to 5 ranks stays exact in the
// narrowest types: |x| <= 127 for int8, integers up to 256 for bfloat16's 8-bit significand.
void checkValueRanges() {
  for (int n = 1; n <= 5; ++n) {
    for (uint32_t seed : {1u, 77u, 0xdeadbeefu}) {
      for (uint64_t i = 0; i < 20000; ++i) {
        double sum = 0, prod = 1, avgSum = 0;
        for (int r = 0; r < n; ++r) {
          const int g = inputValue(ValueKind::kGeneral, seed, r, n, i);
          const int p = inputValue(ValueKind::kProduct, seed, r, n, i);
          const int a = inputValue(ValueKind::kAverage, seed, r, n, i);
          if (g < -15 || g > 15 || (p != 1 && p != -1 && p != 2 && p != -2) || a % n != 0 ||
              std::abs(a) > 3 * n) {
            expect(false, "input value out of its documented range");
            return;
          }
          sum += g;
          prod *= p;
          avgSum += a;
        }
        if (std::fabs(sum) > 75 || std::fabs(prod) > 32 || std::fabs(avgSum) > 75) {
          expect(false, "reduction leaves the exact range of int8/bfloat16");
          return;
        }
      }
    }
  }
  // Neighbouring indices must not repeat with a short period (a misplaced chunk would hide).
  int same = 0;
  for (uint64_t i = 0; i < 4096; ++i) {
    same += inputValue(ValueKind::kGeneral, 5, 0, 2, i) ==
            inputValue(ValueKind::kGeneral, 5, 0, 2, i + 1024);
  }
  expect(same < 4096 / 8, "values repeat at a 1024-element distance");
}

double fold(Op op, double acc, double v) {
  switch (op) {
    case Op::kProd:
      return acc * v;
    case Op::kMax:
      return std::max(acc, v);
    case Op::kMin:
      return std::min(acc, v);
    default:
      return acc + v;
  }
}

// An independent, array-based simulation of each collective from nccl.h's definitions,
// compared with expectedValue() element by element.
void checkExpectations() {
  for (int n = 1; n <= 4; ++n) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}}) {
      for (Coll coll : kAllColls) {
        std::vector<Op> ops = {Op::kNone};
        if (collReduces(coll)) ops.assign(std::begin(kAllReduceOps), std::end(kAllReduceOps));
        for (Op op : ops) {
          for (int root = 0; root < n; ++root) {
            const uint32_t seed = 1000u + static_cast<uint32_t>(root);
            std::vector<std::vector<double>> in(static_cast<size_t>(n));
            for (int r = 0; r < n; ++r) {
              for (size_t j = 0; j < sendElems(coll, count, n); ++j) {
                in[static_cast<size_t>(r)].push_back(inputValue(valueKindFor(op), seed, r, n, j));
              }
            }
            for (int rank = 0; rank < n; ++rank) {
              std::vector<double> out;
              const size_t rk = static_cast<size_t>(rank);
              switch (coll) {
                case Coll::kAllReduce:
                case Coll::kReduce:
                case Coll::kReduceScatter: {
                  const size_t base = coll == Coll::kReduceScatter ? rk * count : 0;
                  for (size_t i = 0; i < count; ++i) {
                    double acc = in[0][base + i];
                    for (size_t r = 1; r < in.size(); ++r) acc = fold(op, acc, in[r][base + i]);
                    out.push_back(op == Op::kAvg ? acc / n : acc);
                  }
                  break;
                }
                case Coll::kBroadcast:
                case Coll::kBcast:
                  out = in[static_cast<size_t>(root)];
                  break;
                case Coll::kAllGather:
                case Coll::kGather:
                  for (const auto& v : in) out.insert(out.end(), v.begin(), v.end());
                  break;
                case Coll::kScatter: {
                  const auto& v = in[static_cast<size_t>(root)];
                  out.assign(v.begin() + static_cast<long>(rk * count),
                             v.begin() + static_cast<long>((rk + 1) * count));
                  break;
                }
                case Coll::kAlltoAll:
                case Coll::kSendRecvAllPairs:
                  for (const auto& v : in) {
                    out.insert(out.end(), v.begin() + static_cast<long>(rk * count),
                               v.begin() + static_cast<long>((rk + 1) * count));
                  }
                  break;
                case Coll::kSendRecvRing:
                  out = in[static_cast<size_t>((rank + n - 1) % n)];
                  break;
              }
              expect(out.size() == recvElems(coll, count, n),
                     "recvElems disagrees with simulation");
              Expectation e;
              e.coll = coll;
              e.op = op;
              e.seed = seed;
              e.rank = rank;
              e.nranks = n;
              e.root = root;
              e.count = count;
              for (size_t i = 0; i < out.size(); ++i) {
                if (expectedValue(e, i) != out[i]) {
                  std::printf("selftest: %s/%s n=%d count=%zu root=%d rank=%d [%zu]\n",
                              collName(coll), opName(op), n, count, root, rank, i);
                  expect(false, "expectedValue disagrees with the simulation");
                  return;
                }
              }
            }
          }
        }
      }
    }
  }
}

// The comparison must catch a wrong element, an unwritten (NaN) one, and a wrong last element
// when sampling.
void checkComparison() {
  Expectation e;
  e.coll = Coll::kAllReduce;
  e.op = Op::kSum;
  e.seed = 99;
  e.nranks = 3;
  e.count = 3000001;  // large enough for the threaded path
  std::vector<float> out(e.count);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(expectedValue(e, i));
  expect(compareOutput(e, Elt::kFloat32, out.data(), out.size()).mismatches == 0,
         "correct output reported wrong");
  out[1234567] += 1;
  expect(compareOutput(e, Elt::kFloat32, out.data(), out.size()).mismatches == 1,
         "one wrong element not reported exactly once");
  out[1234567] = std::numeric_limits<float>::quiet_NaN();
  expect(compareOutput(e, Elt::kFloat32, out.data(), out.size()).mismatches == 1,
         "NaN element not reported");
  out[1234567] = static_cast<float>(expectedValue(e, 1234567));
  out.back() += 1;
  expect(compareOutput(e, Elt::kFloat32, out.data(), out.size(), 7).mismatches == 1,
         "sampled comparison skipped the last element");
  // Average tolerance: a float average may be off by rounding, not by a whole contribution.
  e.op = Op::kAvg;
  expect(tolerance(Elt::kBfloat16, Op::kAvg) < 0.5 && tolerance(Elt::kInt32, Op::kAvg) == 0,
         "average tolerance");
  unsigned char guard[16];
  std::memset(guard, kSentinelByte, sizeof guard);
  expect(sentinelIntact(guard, sizeof guard), "intact guard reported overwritten");
  guard[15] = 0;
  expect(!sentinelIntact(guard, sizeof guard), "overwritten guard not reported");
}

}  // namespace

int runSelftest() {
  checkDecoders();
  checkValueRanges();
  checkExpectations();
  checkComparison();
  std::printf("selftest: %s (%d failures)\n", g_failures == 0 ? "PASS" : "FAIL", g_failures);
  return g_failures == 0 ? 0 : 1;
}

}  // namespace e2e
