// SPDX-License-Identifier: Apache-2.0
// The relay layer's decoders and route search report why they refuse: one helper for all.
#pragma once

#include <string>

namespace mesh::relay {

inline bool fail(std::string* why, const std::string& text) {
  if (why != nullptr) *why = text;
  return false;
}

}  // namespace mesh::relay
