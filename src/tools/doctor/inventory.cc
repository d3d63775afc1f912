// SPDX-License-Identifier: Apache-2.0
#include "tools/doctor/inventory.h"

namespace mesh::doctor {

const Netdev* Inventory::netdev(const std::string& name) const {
  for (const Netdev& n : netdevs) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

std::optional<std::string> Inventory::sysctl(const std::string& key) const {
  const auto it = sysctls.find(key);
  if (it == sysctls.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Inventory::getenv(const std::string& name) const {
  const auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

Settings settings_from_env(const std::map<std::string, std::string>& env,
                           std::vector<std::string>* problems) {
  Settings s;
  for (const SettingInfo& info : setting_table()) {
    const auto it = env.find(info.env);
    if (it == env.end()) continue;
    // parse_setting leaves the field alone on failure, so the default stays, as in the plugin.
    std::string why;
    if (!parse_setting(info.env, it->second, &s, &why) && problems != nullptr) {
      problems->push_back(std::string(info.env) + ": " + why);
    }
  }
  return s;
}

}  // namespace mesh::doctor
