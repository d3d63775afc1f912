// SPDX-License-Identifier: Apache-2.0
// What an accept4() failure means and what to tell the user, for every listener of the library
// (the handshake service, the relay agent). Errors about one connection are retried at once;
// the others (no descriptor, no kernel memory) last until something changes, and a caller on a
// level-triggered listener must stop watching it for a while rather than be woken at once again.
#pragma once

#include <string>
#include <string_view>

namespace mesh {

// Errors that Linux's accept4 returns for one connection in the backlog (already taken off it:
// accept(2) says to treat them like EAGAIN by retrying), not for the listener or the process.
bool accept_error_is_per_connection(int err);

// What to do about an accept4 error that is not about one connection. `holders` says what
// takes this process's descriptors ("every connection takes several (...)"), and `otherwise`
// the alternative to a higher limit ("open fewer communicators per process"); both only for
// EMFILE.
std::string accept_error_advice(int err, std::string_view holders, std::string_view otherwise);

}  // namespace mesh
