// SPDX-License-Identifier: Apache-2.0
// Where a multi-host rank learns who it is: --rank/--nranks, or the environment a launcher sets
// (Open MPI, PMI-based MPIs/hydra, Slurm). Pure functions over a getenv-like callback so the
// unit test can feed any environment.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace mesh::bench {

struct LaunchEnv {
  int rank = -1;
  int size = 0;
  std::string source;  // "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE", ...
};

using GetEnv = std::function<const char*(const char*)>;

// First complete pair of OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE, SLURM_PROCID/SLURM_NTASKS.
// nullopt when none is set; when a pair is set but malformed (not an integer, rank >= size),
// nullopt and *why says so.
std::optional<LaunchEnv> detect_launcher(const GetEnv& getenv_fn, std::string* why);

// Strict decimal integer (no sign, no junk), in [0, INT32_MAX].
std::optional<int> parse_nonneg_int(std::string_view text);

// "IP:PORT" (IPv4 dotted quad, port 1..65535). Address and port in host byte order.
struct HostPort {
  uint32_t addr = 0;
  uint16_t port = 0;
};
std::optional<HostPort> parse_host_port(std::string_view text, std::string* why);

}  // namespace mesh::bench
