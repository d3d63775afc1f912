// SPDX-License-Identifier: Apache-2.0
// Checks of the environment NCCL and the plugin read: anything that would make NCCL bypass the
// plugin, and NCCL_MESH_* values the plugin would reject.
#include <strings.h>

#include <algorithm>
#include <set>

#include "tools/doctor/checks.h"

namespace mesh::doctor {
namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? comma : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// NCCL loads NCCL_NET_PLUGIN=<x> as libnccl-net-<x>.so, or <x> itself when that fails, so
// "mesh", "libnccl-net-mesh.so" and any path to it (or to RCCL's name) select this plugin.
bool names_mesh_plugin(const std::string& entry) {
  if (strcasecmp(entry.c_str(), "mesh") == 0) return true;
  const size_t slash = entry.rfind('/');
  const std::string base = slash == std::string::npos ? entry : entry.substr(slash + 1);
  return base.find("nccl-net-mesh") != std::string::npos ||
         base.find("rccl-net-mesh") != std::string::npos;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> known_mesh_variables() {
  std::vector<std::string> names;
  for (const SettingInfo& info : setting_table()) names.emplace_back(info.env);
  names.emplace_back(kGidIndexEnv);
  return names;
}

}  // namespace

Findings check_nccl_env(const Inventory& inv) {
  const char* id = "nccl-env";
  Findings out;
  const auto net = inv.getenv("NCCL_NET");
  const bool net_is_mesh = net && strcasecmp(net->c_str(), "Mesh") == 0;
  if (!net) {
    out.push_back({id, Verdict::kWarn, "NCCL_NET",
                   "not set: if the plugin fails to load, NCCL silently falls back to its own "
                   "IB or Socket transport",
                   "export NCCL_NET=Mesh  (a load failure then stops NCCL with an error)"});
  } else if (!net_is_mesh) {
    out.push_back({id, Verdict::kFail, "NCCL_NET=" + *net,
                   "selects another transport than the plugin (NCCL compares it with each "
                   "transport's name, case-insensitively; the plugin's is \"Mesh\")",
                   "export NCCL_NET=Mesh"});
  }

  const auto plugin = inv.getenv("NCCL_NET_PLUGIN");
  if (!plugin) {
    out.push_back({id, Verdict::kWarn, "NCCL_NET_PLUGIN",
                   "not set: NCCL then loads libnccl-net.so, which is not this plugin unless it "
                   "was installed under that name",
                   "export NCCL_NET_PLUGIN=mesh  (the package puts libnccl-net-mesh.so where ld.so "
                   "finds it; a build tree's lib/ needs LD_LIBRARY_PATH) or the full path of "
                   "libnccl-net-mesh.so"});
  } else {
    const std::vector<std::string> entries = split_commas(*plugin);
    const bool mesh = std::any_of(entries.begin(), entries.end(), names_mesh_plugin);
    if (!mesh) {
      out.push_back({id, Verdict::kFail, "NCCL_NET_PLUGIN=" + *plugin,
                     strcasecmp(plugin->c_str(), "none") == 0
                         ? "disables external network plugins"
                         : "does not name libnccl-net-mesh.so, so another plugin (or none) loads",
                     "export NCCL_NET_PLUGIN=mesh  (or the full path of libnccl-net-mesh.so)"});
    } else if (!names_mesh_plugin(entries.front()) && !net_is_mesh) {
      // NCCL tries the list in order and keeps the first plugin that loads and initializes.
      out.push_back({id, Verdict::kWarn, "NCCL_NET_PLUGIN=" + *plugin,
                     "the mesh plugin is not the first entry: an earlier plugin that loads wins",
                     "put mesh first, or export NCCL_NET=Mesh (NCCL then skips other plugins)"});
    } else if (inv.net_plugin_file_exists == false) {
      out.push_back({id, Verdict::kFail, "NCCL_NET_PLUGIN=" + *plugin,
                     "the file does not exist: NCCL cannot load the plugin",
                     "point it at the installed library, e.g. "
                     "/opt/nccl-mesh/lib/libnccl-net-mesh.so (cmake --install build)"});
    }
  }

  if (const auto hca = inv.getenv("NCCL_IB_HCA"); hca && !net_is_mesh) {
    out.push_back({id, Verdict::kWarn, "NCCL_IB_HCA=" + *hca,
                   "configures NCCL's built-in IB transport, which is what runs whenever "
                   "NCCL_NET is not Mesh; the plugin does not read it",
                   "export NCCL_NET=Mesh and choose interfaces with NCCL_MESH_IFNAME instead"});
  }
  if (out.empty()) {
    out.push_back({id, Verdict::kOk, "NCCL_NET=" + *net + ", NCCL_NET_PLUGIN=" + *plugin,
                   "NCCL will load the plugin and use it", ""});
  }
  return out;
}

Findings check_mesh_settings(const Inventory& inv) {
  const char* id = "mesh-settings";
  Findings out;
  const std::vector<std::string> known = known_mesh_variables();
  int good = 0;
  for (const auto& [name, value] : inv.env) {
    if (name.rfind("NCCL_MESH_", 0) != 0) continue;
    std::string why;
    if (name == kGidIndexEnv) {
      if (parse_gid_index(value, &why)) {
        ++good;
        continue;
      }
      out.push_back({id, Verdict::kFail, name + "=" + value,
                     why + ": the RDMA transport would ignore it and choose the GID itself",
                     "export " + name + "=<index from the roce-gid line>  (or unset it)"});
      continue;
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string best;
      size_t best_d = 4;  // suggest only close names
      for (const std::string& k : known) {
        const size_t d = edit_distance(name, k);
        if (d < best_d) {
          best_d = d;
          best = k;
        }
      }
      out.push_back({id, Verdict::kWarn, name, "not a setting of this plugin: it has no effect",
                     best.empty() ? "see nccl-mesh-doctor --settings for the known settings"
                                  : "did you mean " + best + "?"});
      continue;
    }
    Settings scratch;
    if (parse_setting(name, value, &scratch, &why)) {
      ++good;
      continue;
    }
    std::string def, range;
    for (const SettingInfo& info : setting_table()) {
      if (name != info.env) continue;
      def = info.default_value;
      range = info.range;
    }
    out.push_back({id, Verdict::kFail, name + "=" + value,
                   why + ": the plugin ignores it and uses the default " + def,
                   "export " + name + "=<integer in " + range + ", K/M/G suffixes allowed>"});
  }
  if (out.empty()) {
    out.push_back({id, Verdict::kOk, "",
                   good == 0 ? "no NCCL_MESH_* variable set: every setting has its default"
                             : std::to_string(good) + " NCCL_MESH_* setting(s), all valid",
                   ""});
  }
  return out;
}

Findings check_ifname(const Inventory& inv, const Model& m) {
  const char* id = "ifname";
  const std::string subject = "NCCL_MESH_IFNAME=" + inv.settings.ifname;
  if (m.filter.empty()) {
    return {{id, Verdict::kOk, "",
             "NCCL_MESH_IFNAME not set: every up interface that looks like a cable is used "
             "(not the default route's, not a bridge, tunnel, VPN or container interface, not a "
             "switched subnet; \"Plugin selection\" lists what was left out and why)",
             ""}};
  }
  std::set<std::string> names;
  for (const Netdev& n : inv.netdevs) names.insert(n.name);
  for (const topology::Interface& i : inv.interfaces) names.insert(i.name);
  std::vector<std::string> unmatched, matched;
  for (const std::string& entry : m.filter.names()) {
    const auto one = topology::IfnameFilter::parse(m.filter.exact() ? "=" + entry : entry);
    bool any = false;
    for (const std::string& n : names) {
      if (one.accepts(n)) {
        any = true;
        if (std::find(matched.begin(), matched.end(), n) == matched.end()) matched.push_back(n);
      }
    }
    if (!any) unmatched.push_back(entry);
  }
  std::string have;
  for (const std::string& n : names) have += (have.empty() ? "" : ", ") + n;
  if (m.filter.exclude()) {
    // An exclusion that matches nothing excludes nothing: harmless, but probably a typo.
    if (unmatched.empty())
      return {{id, Verdict::kOk, subject,
               "excludes " + matched.front() + (matched.size() > 1 ? " and others" : ""), ""}};
    return {{id, Verdict::kWarn, subject,
             "excluded name(s) match no interface: " + unmatched.front() +
                 (unmatched.size() > 1 ? ", ..." : "") + " (interfaces: " + have + ")",
             "check the spelling; prefixes match unless the list starts with '=' (after '^')"}};
  }
  if (matched.empty()) {
    // Suggest a real cable candidate: the first non-loopback interface with an address.
    std::string example = "enp1s0f0np0";
    for (const topology::Interface& i : inv.interfaces) {
      if (!i.loopback) {
        example = i.name;
        break;
      }
    }
    return {{id, Verdict::kFail, subject,
             "matches no interface, so the plugin has nothing to use (interfaces: " + have + ")",
             "export NCCL_MESH_IFNAME=<prefixes of the cable interfaces>, e.g. " + example}};
  }
  if (!unmatched.empty()) {
    std::string list;
    for (const std::string& u : unmatched) list += (list.empty() ? "" : ", ") + u;
    return {{id, Verdict::kWarn, subject,
             "entries " + list + " match no interface (interfaces: " + have + ")",
             "remove or correct them; a missing cable interface is not used"}};
  }
  std::string list;
  for (const std::string& n : matched) list += (list.empty() ? "" : ", ") + n;
  return {{id, Verdict::kOk, subject, "matches " + list, ""}};
}

}  // namespace mesh::doctor
