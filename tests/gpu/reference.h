// SPDX-License-Identifier: Apache-2.0
// Host-side reference: what each collective must leave in each rank's output, computed from the
// inputs in values.h, and the comparison of a rank's output against it.
//
// Nothing here includes NCCL or CUDA: the reference decodes float16/bfloat16 bits itself, so a
// wrong conversion on the device side cannot hide behind the same wrong conversion here.
#ifndef NCCL_MESH_TESTS_GPU_REFERENCE_H
#define NCCL_MESH_TESTS_GPU_REFERENCE_H

#include <cstddef>
#include <cstdint>
#include <string>

#include "values.h"

namespace e2e {

enum class Elt : uint8_t { kInt8, kInt32, kInt64, kFloat16, kBfloat16, kFloat32, kFloat64 };
inline constexpr Elt kAllElts[] = {Elt::kInt8,     Elt::kInt32,   Elt::kInt64,  Elt::kFloat16,
                                   Elt::kBfloat16, Elt::kFloat32, Elt::kFloat64};
const char* eltName(Elt elt);
size_t eltBytes(Elt elt);
bool eltIsFloat(Elt elt);

enum class Op : uint8_t { kNone, kSum, kProd, kMax, kMin, kAvg };
inline constexpr Op kAllReduceOps[] = {Op::kSum, Op::kProd, Op::kMax, Op::kMin, Op::kAvg};
const char* opName(Op op);
ValueKind valueKindFor(Op op);

enum class Coll : uint8_t {
  kAllReduce,
  kBroadcast,
  kBcast,  // the deprecated in-place ncclBcast
  kReduce,
  kAllGather,
  kReduceScatter,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecvRing,      // send to rank+1, receive from rank-1, in one group
  kSendRecvAllPairs,  // send to and receive from every rank (self included), in one group
};
inline constexpr Coll kAllColls[] = {
    Coll::kAllReduce, Coll::kBroadcast,     Coll::kBcast,           Coll::kReduce,
    Coll::kAllGather, Coll::kReduceScatter, Coll::kAlltoAll,        Coll::kGather,
    Coll::kScatter,   Coll::kSendRecvRing,  Coll::kSendRecvAllPairs};
const char* collName(Coll coll);
bool collReduces(Coll coll);
bool collHasRoot(Coll coll);
// Whether NCCL defines an in-place form (and, for kBcast, whether it is the only form).
bool collAllowsInPlace(Coll coll);
bool collOnlyInPlace(Coll coll);

// Per-rank buffer sizes in elements, for NCCL's `count` argument of that collective.
size_t sendElems(Coll coll, size_t count, int nranks);
size_t recvElems(Coll coll, size_t count, int nranks);
// In-place layout: offsets (elements) of the send and receive views inside one buffer of
// max(sendElems, recvElems) elements, as nccl.h defines in-place for each collective.
size_t inPlaceSendOffset(Coll coll, size_t count, int rank, int root);
size_t inPlaceRecvOffset(Coll coll, size_t count, int rank, int root);
// Whether this rank's send buffer carries data, and whether its output is defined.
bool rankHasInput(Coll coll, int rank, int root);
bool rankHasOutput(Coll coll, int rank, int root);

// One rank's view of one case: enough to know every element its output must hold.
struct Expectation {
  Coll coll = Coll::kAllReduce;
  Op op = Op::kNone;
  uint32_t seed = 0;
  int rank = 0;
  int nranks = 1;
  int root = 0;
  size_t count = 0;
};

// Expected value of output element `index` (exact small integer, as a double).
double expectedValue(const Expectation& e, size_t index);
// Allowed |got - expected|: 0 except for float averages (see values.h).
double tolerance(Elt elt, Op op);

struct CompareResult {
  size_t checked = 0;
  size_t mismatches = 0;
  std::string detail;  // the first few mismatches, human readable
};

// Compares `elems` elements of `data` (host memory, dtype `elt`) with the reference. With
// stride > 1 only every stride-th element (and the last) is checked: the benchmark's sampling.
CompareResult compareOutput(const Expectation& e, Elt elt, const void* data, size_t elems,
                            size_t stride = 1);

// Whether `bytes` bytes at `data` still hold the sentinel (nothing wrote past the output).
bool sentinelIntact(const void* data, size_t bytes);

// Host decoders, exposed for the self-test in main's --selftest.
double decodeFloat16(uint16_t bits);
double decodeBfloat16(uint16_t bits);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_REFERENCE_H
