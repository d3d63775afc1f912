// SPDX-License-Identifier: Apache-2.0
// Failures and exit codes. Every failure is an exception carrying its exit code and the one line
// main() prints, so a deep wait loop can stop the whole rank without threading error codes up.
//
// Exit codes (documented in --help):
//   0 success, 1 usage or setup error, 2 data verification failed, 3 a plugin call returned an
//   error, 4 a wait ran past --timeout, 5 another rank failed (its rendezvous connection closed).
#pragma once

#include <stdexcept>
#include <string>

namespace mesh::bench {

enum ExitCode : int {
  kExitOk = 0,
  kExitSetup = 1,
  kExitVerify = 2,
  kExitPlugin = 3,
  kExitTimeout = 4,
  kExitPeerFailed = 5,
};

class BenchError : public std::runtime_error {
 public:
  BenchError(int exit_code, const std::string& line)
      : std::runtime_error(line), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

inline BenchError setup_error(const std::string& what) {
  return BenchError(kExitSetup, what);
}

}  // namespace mesh::bench
