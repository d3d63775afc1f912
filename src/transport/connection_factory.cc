// SPDX-License-Identifier: Apache-2.0
#include "transport/connection_factory.h"

#include <utility>

#include "transport/rdma/rdma_connection.h"

namespace mesh {

std::unique_ptr<Connection> make_connection(bool sender, handshake::ConnectedSockets sockets,
                                            const tcp::TcpOptions& tcp) {
  if (sockets.transport_state) {
    // Only the RDMA transport sets transport state (rdma_transport.h): an Endpoint.
    auto ep = std::static_pointer_cast<rdma::Endpoint>(std::move(sockets.transport_state));
    return std::make_unique<rdma::RdmaConnection>(std::move(ep), std::move(sockets.control),
                                                  std::move(sockets.local),
                                                  std::move(sockets.peer));
  }
  return std::make_unique<tcp::TcpConnection>(sender, std::move(sockets), tcp);
}

}  // namespace mesh
