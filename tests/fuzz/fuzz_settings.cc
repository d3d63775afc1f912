// SPDX-License-Identifier: Apache-2.0
// Settings come from the user's environment; parsing must never crash and must keep values in
// their documented ranges.
#include <string>

#include "util/settings.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const mesh::SettingInfo& info : mesh::setting_table()) {
    mesh::Settings s;
    std::string why;
    if (!mesh::parse_setting(info.env, text, &s, &why)) continue;
    if (s.tcp_streams < 1 || s.tcp_streams > 64 || s.connect_timeout_ms < 100 ||
        s.handshake_port < 0 || s.handshake_port > 65535) {
      __builtin_trap();
    }
  }
  return 0;
}
