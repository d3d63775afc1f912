// SPDX-License-Identifier: Apache-2.0
// Logging through NCCL's logger (NCCL_DEBUG / NCCL_DEBUG_SUBSYS decide what prints). Before
// init, or in the tools, a fallback logger writes to stderr, honouring NCCL_DEBUG.
// Every line carries the prefix "NET/Mesh : ".
#pragma once

#include "nccl/common.h"

namespace mesh {

// Installs NCCL's logger (may be null: then the stderr fallback is used). Thread-safe.
void set_logger(ncclDebugLogger_t logger);

void log_message(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                 const char* fmt, ...) __attribute__((format(printf, 5, 6)));

}  // namespace mesh

#define MESH_WARN(...) ::mesh::log_message(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define MESH_INFO(flags, ...) \
  ::mesh::log_message(NCCL_LOG_INFO, (flags), __func__, __LINE__, __VA_ARGS__)
#define MESH_TRACE(flags, ...) \
  ::mesh::log_message(NCCL_LOG_TRACE, (flags), __func__, __LINE__, __VA_ARGS__)
