// SPDX-License-Identifier: Apache-2.0
#include "topology/emulated_mesh.h"

#include <charconv>
#include <mutex>
#include <optional>

namespace mesh::topology {
namespace {

constexpr uint32_t kEmulatedBase = (127u << 24) | (77u << 16);  // 127.77.0.0

bool parse_size(std::string_view text, size_t* out) {
  if (text.empty()) return false;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

}  // namespace

bool parse_emulated_mesh(const std::string& text, EmulatedMesh* out, std::string* why) {
  const std::string usage = "expected ring:N:R (N >= 3) or line:N:R (N >= 2), R in 0..N-1";
  const size_t c1 = text.find(':');
  const size_t c2 = c1 == std::string::npos ? std::string::npos : text.find(':', c1 + 1);
  if (c2 == std::string::npos || text.find(':', c2 + 1) != std::string::npos) {
    *why = "'" + text + "': " + usage;
    return false;
  }
  const std::string shape = text.substr(0, c1);
  EmulatedMesh m;
  if (shape == "ring") {
    m.shape = EmulatedShape::kRing;
  } else if (shape == "line") {
    m.shape = EmulatedShape::kLine;
  } else {
    *why = "'" + text + "': unknown shape '" + shape + "'; " + usage;
    return false;
  }
  const std::string_view view(text);
  if (!parse_size(view.substr(c1 + 1, c2 - c1 - 1), &m.ranks) ||
      !parse_size(view.substr(c2 + 1), &m.rank)) {
    *why = "'" + text + "': N and R must be decimal numbers; " + usage;
    return false;
  }
  const size_t min_ranks = m.shape == EmulatedShape::kRing ? 3 : 2;
  if (m.ranks < min_ranks || m.ranks > kMaxEmulatedRanks || m.rank >= m.ranks) {
    *why = "'" + text + "': " + usage + ", N at most " + std::to_string(kMaxEmulatedRanks);
    return false;
  }
  *out = m;
  return true;
}

std::vector<std::pair<size_t, size_t>> emulated_cables(EmulatedShape shape, size_t ranks) {
  std::vector<std::pair<size_t, size_t>> cables;
  if (ranks < 2) return cables;
  for (size_t k = 0; k + 1 < ranks; ++k) cables.emplace_back(k, k + 1);
  if (shape == EmulatedShape::kRing && ranks >= 3) cables.emplace_back(ranks - 1, 0);
  return cables;
}

Ipv4Prefix emulated_address(size_t cable, bool second_end) {
  const auto base = static_cast<uint32_t>(kEmulatedBase + 4u * static_cast<uint32_t>(cable));
  return Ipv4Prefix{base + (second_end ? 2u : 1u), 30};
}

std::vector<Ipv4Prefix> emulated_addresses(const EmulatedMesh& mesh) {
  std::vector<Ipv4Prefix> out;
  const auto cables = emulated_cables(mesh.shape, mesh.ranks);
  for (size_t k = 0; k < cables.size(); ++k) {
    if (cables[k].first == mesh.rank) out.push_back(emulated_address(k, false));
    if (cables[k].second == mesh.rank) out.push_back(emulated_address(k, true));
  }
  return out;
}

std::vector<Interface> emulated_interfaces(const EmulatedMesh& mesh) {
  std::vector<Interface> out;
  for (const Ipv4Prefix& addr : emulated_addresses(mesh)) {
    Interface itf;
    itf.name = "lo";
    itf.addr = addr;
    itf.up = true;
    itf.loopback = false;
    out.push_back(std::move(itf));
  }
  return out;
}

bool discover_mesh_interfaces(const std::string& emulate, std::vector<Interface>* out,
                              std::string* why) {
  if (emulate.empty()) {
    // One snapshot per process: the plugin, its tuner (called once per communicator), the relay
    // agent and the bench must agree on which interfaces are cables, and the neighbour table
    // that the switch rule reads changes as traffic flows (the plugin keeps its first choice
    // for the life of the process anyway).
    static std::mutex mu;
    static std::optional<std::vector<Interface>> snapshot;
    std::lock_guard<std::mutex> lock(mu);
    if (!snapshot) snapshot = discover_interfaces();
    *out = *snapshot;
    return true;
  }
  EmulatedMesh mesh;
  if (!parse_emulated_mesh(emulate, &mesh, why)) {
    *why = "NCCL_MESH_EMULATE=" + *why;
    return false;
  }
  *out = emulated_interfaces(mesh);
  return true;
}

}  // namespace mesh::topology
