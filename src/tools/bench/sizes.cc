// SPDX-License-Identifier: Apache-2.0
#include "sizes.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace mesh::bench {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

void set_why(std::string* why, std::string text) {
  if (why != nullptr) *why = std::move(text);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace

std::optional<uint64_t> parse_size(std::string_view text, std::string* why) {
  const std::string_view s = trim(text);
  size_t digits = 0;
  uint64_t value = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) {
    const uint64_t d = static_cast<uint64_t>(s[digits] - '0');
    if (value > (UINT64_MAX - d) / 10) {
      set_why(why, "size '" + std::string(text) + "' is too large");
      return std::nullopt;
    }
    value = value * 10 + d;
    ++digits;
  }
  if (digits == 0) {
    set_why(why, "size '" + std::string(text) + "' does not start with a number");
    return std::nullopt;
  }
  const std::string_view suffix = trim(s.substr(digits));
  unsigned shift = 0;
  if (suffix.empty() || iequals(suffix, "B")) {
    shift = 0;
  } else {
    const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0])));
    const std::string_view rest = suffix.substr(1);
    if (unit == 'K') {
      shift = 10;
    } else if (unit == 'M') {
      shift = 20;
    } else if (unit == 'G') {
      shift = 30;
    } else if (unit == 'T') {
      shift = 40;
    } else {
      set_why(why, "size '" + std::string(text) + "': unknown unit (use K, M, G)");
      return std::nullopt;
    }
    if (!(rest.empty() || iequals(rest, "B") || iequals(rest, "iB"))) {
      set_why(why, "size '" + std::string(text) + "': unknown unit (use K, M, G)");
      return std::nullopt;
    }
  }
  if (shift > 0 && value > (UINT64_MAX >> shift)) {
    set_why(why, "size '" + std::string(text) + "' is too large");
    return std::nullopt;
  }
  return value << shift;
}

std::optional<std::vector<uint64_t>> parse_size_list(std::string_view text, std::string* why) {
  std::vector<uint64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string_view::npos ? text.size() : comma;
    const auto v = parse_size(text.substr(start, end - start), why);
    if (!v) return std::nullopt;
    out.push_back(*v);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<uint64_t> power_of_two_sweep(uint64_t min_bytes, uint64_t max_bytes) {
  std::vector<uint64_t> out;
  if (min_bytes == 0) return out;
  for (uint64_t s = min_bytes; s <= max_bytes; s *= 2) {
    out.push_back(s);
    if (s > UINT64_MAX / 2) break;
  }
  return out;
}

std::string format_size(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned unit = 0;
  uint64_t whole = bytes;
  while (unit < 4 && whole >= 1024 && whole % 1024 == 0) {
    whole /= 1024;
    ++unit;
  }
  char buf[64];
  if (unit == 0 && bytes >= 1024) {
    // Not a multiple of 1 KiB: show one decimal in the largest unit that fits.
    double v = static_cast<double>(bytes);
    unsigned u = 0;
    while (u < 4 && v >= 1024.0) {
      v /= 1024.0;
      ++u;
    }
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%llu %s", static_cast<unsigned long long>(whole), kUnits[unit]);
  return buf;
}

IterPlan plan_iterations(uint64_t bytes, int iters, int warmup, uint64_t iter_bytes) {
  IterPlan plan{std::max(iters, 1), std::max(warmup, 0)};
  if (bytes == 0 || iter_bytes == 0) return plan;
  const uint64_t cap = iter_bytes / bytes;
  const int floor = std::min(plan.iters, 4);
  if (cap < static_cast<uint64_t>(plan.iters)) {
    plan.iters = std::max(floor, static_cast<int>(cap));
  }
  if (plan.warmup > 0) plan.warmup = std::min(plan.warmup, std::max(1, plan.iters / 4));
  return plan;
}

int plan_window(uint64_t bytes, int window, uint64_t buffer_bytes) {
  const int w = std::max(window, 1);
  if (bytes == 0) return w;
  const uint64_t fit = buffer_bytes / bytes;
  if (fit < 1) return 1;
  return fit < static_cast<uint64_t>(w) ? static_cast<int>(fit) : w;
}

size_t nccl_slice_floats(size_t chunk_floats) {
  // prims_simple.h: max(divUp(nelem, 16 * SlicePerChunk) * 16, sliceSize / 32) elements.
  const size_t half = (chunk_floats + 31) / 32 * 16;
  const size_t least = static_cast<size_t>(kNcclMinSliceBytes / 4);
  return std::min(std::max(half, least), static_cast<size_t>(kNcclMaxSliceBytes / 4));
}

}  // namespace mesh::bench
