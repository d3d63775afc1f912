// SPDX-License-Identifier: Apache-2.0
// TCP socket helpers of the probe client and server (on top of util/socket_util).
#pragma once

#include <cstdint>
#include <string>

#include "util/socket_util.h"

namespace mesh::doctor::probe {

// Connects from `local` (so the connection leaves through that address's cable) to
// `peer`:`port`, giving up after `timeout_ms`. Returns an invalid fd with *error on failure.
UniqueFd connect_bound(uint32_t local, uint32_t peer, uint16_t port, int timeout_ms,
                       std::string* error);

// A listening socket on `addr`:`port` (port 0: any). Invalid fd with *error on failure.
UniqueFd listen_on(uint32_t addr, uint16_t port, std::string* error);

// Blocking send/recv calls fail with EAGAIN after `ms` instead of waiting forever.
void set_io_timeout(int fd, int ms);

uint32_t local_address(int fd);  // host order; 0 when unknown
uint16_t local_port(int fd);

}  // namespace mesh::doctor::probe
