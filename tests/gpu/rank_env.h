// SPDX-License-Identifier: Apache-2.0
// The environment of one rank: the launcher's own, with the NCCL settings that make the rank its
// own "host", route its traffic through the chosen network and, for an emulated ring or line,
// give it only the loopback addresses of its own emulated cables. Pure (no process state), so
// the selftest checks it without a GPU.
#ifndef NCCL_MESH_TESTS_GPU_RANK_ENV_H
#define NCCL_MESH_TESTS_GPU_RANK_ENV_H

#include <string>
#include <vector>

#include "launcher.h"

namespace e2e {

// "KEY=value" strings, as execve takes them.
class Environment {
 public:
  explicit Environment(std::vector<std::string> vars) : vars_(std::move(vars)) {}
  const char* get(const std::string& key) const;
  void set(const std::string& key, const std::string& value);
  void unset(const std::string& key);
  const std::vector<std::string>& vars() const { return vars_; }

 private:
  std::vector<std::string> vars_;
};

// This process's environment (environ), copied.
std::vector<std::string> inheritedEnvironment();

// The value NCCL_MESH_EMULATE gets for `rank` of the set ("" when the set is not emulated).
std::string emulateValue(const SetSpec& spec, int rank);

// Rank `rank` of `spec`: `inherited` with NCCL_HOSTID=host<rank>, NCCL_SOCKET_IFNAME=lo, the
// debug settings the log checks need, NCCL_PROTO, and per net:
//   Mesh:   NCCL_NET_PLUGIN=<plugin>, NCCL_NET=Mesh; the tuner per spec.tuner; full mesh:
//           NCCL_MESH_IFNAME=lo, NCCL_MESH_EMULATE unset; emulated: NCCL_MESH_EMULATE=
//           <shape>:<n>:<rank> and NCCL_MESH_IFNAME unset (the plugin's interfaces are then the
//           emulated ones, all named "lo"; a filter inherited from the caller, e.g. eth0, would
//           exclude them all).
//   Socket: NCCL_NET_PLUGIN=none, NCCL_NET=Socket, no NCCL_MESH_EMULATE.
Environment rankEnvironment(const SetSpec& spec, int rank, const std::string& plugin,
                            std::vector<std::string> inherited);

}  // namespace e2e

#endif  // NCCL_MESH_TESTS_GPU_RANK_ENV_H
