// SPDX-License-Identifier: Apache-2.0
// The one place where a finished handshake becomes a Connection, on either side (connect and
// accept). The handshake's transport state says which transport it set up: an rdma::Endpoint
// with connected QPs (the listener's extension handler, RdmaTransport::accept_extension, left
// it there; the connector puts its own there after RdmaTransport::connect_sender), or nothing,
// which means TCP over the sockets.
#pragma once

#include <memory>

#include "handshake/connected_sockets.h"
#include "transport/connection.h"
#include "transport/tcp/tcp_connection.h"

namespace mesh {

// `sender`: the connector's side (NCCL's connect() returns the send comm).
std::unique_ptr<Connection> make_connection(bool sender, handshake::ConnectedSockets sockets,
                                            const tcp::TcpOptions& tcp);

}  // namespace mesh
