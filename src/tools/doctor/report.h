// SPDX-License-Identifier: Apache-2.0
// The doctor's output: a human-readable report (default) or one JSON document (--json), both
// made from the same data.
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <vector>

#include "tools/doctor/checks.h"
#include "tools/doctor/inventory.h"
#include "tools/doctor/model.h"
#include "tools/doctor/peers.h"

namespace mesh::doctor {

struct Report {
  const Inventory& inv;
  const Model& model;
  const Findings& findings;
  bool peer_mode = false;
  bool probed = false;
  const std::vector<PeerRoute>& routes;
  const std::vector<PeerLink>& links;
};

void print_text(std::ostream& out, const Report& r);
nlohmann::json to_json(const Report& r);

// The settings table (`--settings`): the plugin's own setting_table() as a markdown table, the
// form the README uses.
void print_settings_table(std::ostream& out);

// 0 when no finding failed, 1 otherwise (warnings do not fail).
int exit_code(const Findings& findings);

}  // namespace mesh::doctor
