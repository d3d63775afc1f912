// SPDX-License-Identifier: Apache-2.0
#include "cpu_pin.h"

#include <sched.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <string>

namespace mesh::bench {
namespace {

constexpr int kMaxCpuNumber = 1023;  // the kernel's default cpu_set_t holds CPUs 0..1023
constexpr size_t kMaxCpuListEntries = 1024;

bool cpu_list_error(std::string* why, std::string text) {
  if (why != nullptr) *why = std::move(text);
  return false;
}

}  // namespace

std::optional<std::vector<int>> parse_cpu_list(std::string_view text, std::string* why) {
  std::vector<int> cpus;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string_view item =
        text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    int cpu = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), cpu);
    if (item.empty() || ec != std::errc() || end != item.data() + item.size() || cpu < 0 ||
        cpu > kMaxCpuNumber) {
      std::string msg = "'";
      msg.append(item).append("' is not a CPU number (0..").append(std::to_string(kMaxCpuNumber));
      cpu_list_error(why, msg.append(")"));
      return std::nullopt;
    }
    if (cpus.size() == kMaxCpuListEntries) {
      cpu_list_error(why, "more than " + std::to_string(kMaxCpuListEntries) + " CPUs listed");
      return std::nullopt;
    }
    cpus.push_back(cpu);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return cpus;
}

int cpu_for_rank(const std::vector<int>& cpus, int rank) {
  return cpus[static_cast<size_t>(rank) % cpus.size()];
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string text;
  for (const int cpu : cpus) {
    if (!text.empty()) text.push_back(',');
    text.append(std::to_string(cpu));
  }
  return text;
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c <= kMaxCpuNumber; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

bool pin_to_cpu(int cpu, std::string* why) {
  if (cpu < 0 || cpu > kMaxCpuNumber)
    return cpu_list_error(why, "CPU " + std::to_string(cpu) + " is out of range");
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    return cpu_list_error(
        why, "sched_setaffinity(CPU " + std::to_string(cpu) + "): " + std::strerror(errno));
  }
  return true;
}

}  // namespace mesh::bench
