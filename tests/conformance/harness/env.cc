#include "harness/env.h"

#include <cstdlib>
#include <string>

#include "harness/timing.h"

namespace conformance {

void set_plugin_environment() {
  // Overwrite unconditionally: traffic must stay on loopback whatever the caller's environment.
  setenv("NCCL_MESH_IFNAME", "lo", 1);
  setenv("NCCL_MESH_CONNECT_TIMEOUT_MS", std::to_string(kConnectTimeoutMs).c_str(), 1);
}

}  // namespace conformance
