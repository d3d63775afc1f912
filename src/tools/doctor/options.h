// SPDX-License-Identifier: Apache-2.0
// Command line of nccl-mesh-doctor (CLI11). --help prints a man-page-style description.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mesh::doctor {

struct Options {
  bool json = false;
  bool settings = false;

  // Peer mode.
  std::string peers;       // --peers a,b,c
  std::string hosts_file;  // --hosts FILE
  bool probe = false;
  uint16_t port = 0;  // 0 until parsed: probe::kDefaultPort
  double probe_seconds = 1.0;
  int streams = 0;  // 0: NCCL_MESH_TCP_STREAMS

  // Serve mode.
  bool serve = false;
  double serve_for = 0;  // seconds; 0 = until SIGINT/SIGTERM

  // Where the machine's state is read (tests point these at synthetic trees).
  std::string sysfs_root = "/sys";
  std::string proc_root = "/proc";
  std::string dev_root = "/dev";

  bool peer_mode() const { return !peers.empty() || !hosts_file.empty(); }
};

// Parses argv. Returns an exit code when the program should stop now (0 after --help or
// --version, 2 after a usage error, with the message printed), nullopt to go on.
std::optional<int> parse_options(int argc, char** argv, Options* opts);

}  // namespace mesh::doctor
