// SPDX-License-Identifier: Apache-2.0
// How many data sockets a TCP connection opens: the connector decides and announces the
// count in its hellos (the listener takes what arrives).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mesh::tcp {

// NCCL_MESH_TCP_STREAMS (`requested`) rounded up to a multiple of the `rails` (cables) to the
// peer, so every cable carries an equal share (data stream i rides rail i mod rails), capped at
// the hello's handshake::kMaxDataStreams. `rails` >= 1.
uint16_t plan_data_streams(size_t requested, size_t rails);

}  // namespace mesh::tcp
