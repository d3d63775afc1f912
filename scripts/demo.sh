#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job on its embedded default: build the plugin and nccl-mesh-bench, then run the bench
# locally (it spawns two ranks over loopback and prints plugin vs plain-TCP numbers).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
exec build/src/tools/bench/nccl-mesh-bench "$@"
