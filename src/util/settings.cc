// SPDX-License-Identifier: Apache-2.0
#include "util/settings.h"

#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <type_traits>

#include "util/log.h"

namespace mesh {
namespace {

// Integers accept an optional K, M or G suffix (powers of 1024) for sizes.
bool parse_int(const std::string& text, int64_t lo, int64_t hi, int64_t* out, std::string* why) {
  if (text.empty()) {
    *why = "empty value";
    return false;
  }
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str()) {
    *why = "'" + text + "' is not an integer";
    return false;
  }
  long long mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1LL << 10;
  if (*end == 'M' || *end == 'm') mult = 1LL << 20;
  if (*end == 'G' || *end == 'g') mult = 1LL << 30;
  if (mult != 1) ++end;
  if (*end != '\0') {
    *why = "'" + text + "' has trailing characters";
    return false;
  }
  if (v != 0 && (v > hi / mult || v < lo / mult - 1)) {
    *why = "'" + text + "' is outside " + std::to_string(lo) + ".." + std::to_string(hi);
    return false;
  }
  v *= mult;
  if (v < lo || v > hi) {
    *why = "'" + text + "' is outside " + std::to_string(lo) + ".." + std::to_string(hi);
    return false;
  }
  *out = v;
  return true;
}

// "auto, rdma, tcp" (range column) or "auto, rdma or tcp" (error text).
template <typename E>
std::string enum_values(const char* last_separator) {
  const auto& names = SettingEnum<E>::names;
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) {
    s += i == 0 ? "" : (i + 1 == names.size() ? last_separator : ", ");
    s += names[i];
  }
  return s;
}

template <typename T>
bool assign(T* field, const std::string& text, int64_t lo, int64_t hi, std::string* why) {
  if constexpr (std::is_enum_v<T>) {
    (void)lo;
    (void)hi;
    const auto& names = SettingEnum<T>::names;
    for (size_t i = 0; i < names.size(); ++i) {
      if (text == names[i]) {
        *field = static_cast<T>(i);
        return true;
      }
    }
    *why = "'" + text + "' is not " + enum_values<T>(" or ");
    return false;
  } else if constexpr (std::is_same_v<T, std::string>) {
    (void)lo;
    (void)hi;
    (void)why;
    *field = text;
    return true;
  } else {
    return parse_int(text, lo, hi, field, why);
  }
}

}  // namespace

bool parse_setting(const std::string& env, const std::string& text, Settings* s, std::string* why) {
#define MESH_SETTINGS_PARSE(type, field, name, def, lo, hi, help) \
  if (env == name) return assign<type>(&s->field, text, lo, hi, why);
  MESH_SETTINGS(MESH_SETTINGS_PARSE)
#undef MESH_SETTINGS_PARSE
  *why = "unknown setting " + env;
  return false;
}

Settings load_settings(const char* (*getenv_fn)(const char*), std::vector<std::string>* warnings) {
  Settings s;
  for (const SettingInfo& info : setting_table()) {
    const char* v = getenv_fn(info.env);
    if (v == nullptr) continue;
    std::string why;
    if (!parse_setting(info.env, v, &s, &why)) {
      s.malformed.emplace_back(info.env);
      warnings->push_back(std::string(info.env) + ": " + why + "; using the default " +
                          (info.default_value.empty() ? "(empty)" : info.default_value));
    }
  }
  return s;
}

const Settings& settings() {
  static const Settings s = [] {
    std::vector<std::string> warnings;
    Settings loaded =
        load_settings([](const char* n) -> const char* { return std::getenv(n); }, &warnings);
    for (const std::string& w : warnings) MESH_WARN("ignoring %s", w.c_str());
    return loaded;
  }();
  return s;
}

namespace {
template <typename T, typename D>
SettingInfo make_info(const char* env, D def, int64_t lo, int64_t hi, const char* help) {
  if constexpr (std::is_enum_v<T>) {
    (void)lo;
    (void)hi;
    return {env, "enum", SettingEnum<T>::names[static_cast<size_t>(def)], enum_values<T>(", "),
            help};
  } else if constexpr (std::is_same_v<T, std::string>) {
    return {env, "string", std::string(def), "", help};
  } else {
    return {env, "integer", std::to_string(def), std::to_string(lo) + ".." + std::to_string(hi),
            help};
  }
}
}  // namespace

std::vector<SettingInfo> setting_table() {
  std::vector<SettingInfo> table;
#define MESH_SETTINGS_INFO(type, field, name, def, lo, hi, help) \
  table.push_back(make_info<type>(name, def, lo, hi, help));
  MESH_SETTINGS(MESH_SETTINGS_INFO)
#undef MESH_SETTINGS_INFO
  return table;
}

}  // namespace mesh
