// SPDX-License-Identifier: Apache-2.0
#include "transport/tcp/stream_plan.h"

#include <algorithm>

#include "handshake/hello.h"

namespace mesh::tcp {

uint16_t plan_data_streams(size_t requested, size_t rails) {
  const size_t per_rail = (requested + rails - 1) / rails;
  return static_cast<uint16_t>(std::min<size_t>(per_rail * rails, handshake::kMaxDataStreams));
}

}  // namespace mesh::tcp
