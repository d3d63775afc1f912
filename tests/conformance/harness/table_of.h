// SPDX-License-Identifier: Apache-2.0
// NCCL's types for each ncclNet ABI version, by version number: the table, its properties and
// (v11+) its communicator config. Shared by the harness's per-version adapters and the loader
// probe, which both drive every table v6..v12 through one template.
#pragma once

#include "nccl/net.h"

namespace mesh_test {

template <int V>
struct TableOf;
template <>
struct TableOf<6> {
  using Table = ncclNet_v6_t;
  using Props = ncclNetProperties_v6_t;
};
template <>
struct TableOf<7> {
  using Table = ncclNet_v7_t;
  using Props = ncclNetProperties_v7_t;
};
template <>
struct TableOf<8> {
  using Table = ncclNet_v8_t;
  using Props = ncclNetProperties_v8_t;
};
template <>
struct TableOf<9> {
  using Table = ncclNet_v9_t;
  using Props = ncclNetProperties_v9_t;
};
template <>
struct TableOf<10> {
  using Table = ncclNet_v10_t;
  using Props = ncclNetProperties_v10_t;
};
template <>
struct TableOf<11> {
  using Table = ncclNet_v11_t;
  using Props = ncclNetProperties_v11_t;
  using Config = ncclNetCommConfig_v11_t;
};
template <>
struct TableOf<12> {
  using Table = ncclNet_v12_t;
  using Props = ncclNetProperties_v12_t;
  using Config = ncclNetCommConfig_v12_t;
};

}  // namespace mesh_test
