// SPDX-License-Identifier: Apache-2.0
// The logger the suite hands to the plugin's init: it records every WARN line so a test can assert
// that a failure was reported to the user, not only returned as an error code.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "nccl/net.h"

extern "C" void conformance_log(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

namespace conformance {

// Number of WARN lines logged so far in this process.
size_t warn_count();
// WARN lines with index >= `first` (indices count from the start of the process).
std::vector<std::string> warns_since(size_t first);
// The plugin's INFO lines for each connection it made or accepted ("NET/Mesh : connected: ..."
// and "... accepted: ...", which name the transport), counted and indexed like the WARN lines.
size_t connection_count();
std::vector<std::string> connections_since(size_t first);
// Prefix for lines echoed to stderr ("test" or "peer <pid>").
void set_log_prefix(const std::string& prefix);

// WARN lines are echoed to stderr so a failing run shows why. A test that provokes hundreds of
// expected WARNs (malformed handles) silences the echo for its scope; the lines are still recorded.
class QuietWarnings {
 public:
  QuietWarnings();
  ~QuietWarnings();
  QuietWarnings(const QuietWarnings&) = delete;
  QuietWarnings& operator=(const QuietWarnings&) = delete;

 private:
  bool previous_;
};

}  // namespace conformance
