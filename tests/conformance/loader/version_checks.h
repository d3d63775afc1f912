// SPDX-License-Identifier: Apache-2.0
// What the loader test asserts of every table a library exports, as NCCL or RCCL would meet it
// right after loading: the name is "Mesh"; init, devices and getProperties work; a loopback
// connection can be made through listen/connect/accept; and connect/accept never write through the
// device-handle pointer they are given (v7+), whether it points at NULL (NCCL, host plugin) or at a
// live handle (RCCL on AMD AINIC). Each problem is one line in `problems`.
#pragma once

#include <string>
#include <vector>

namespace loader {

// `lib`: a dlopen handle of the plugin. Checks ncclNetPlugin_v<version>; false if it failed.
bool check_version(void* lib, int version, std::vector<std::string>* problems);

}  // namespace loader
