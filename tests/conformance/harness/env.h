// Process environment every process of the suite sets before it loads the plugin.
#pragma once

namespace conformance {

// Pins the plugin to loopback (NCCL_MESH_IFNAME=lo: a hard rule of this workplace, never
// overridable from outside) and sets the short connect timeout the failure tests rely on.
void set_plugin_environment();

}  // namespace conformance
