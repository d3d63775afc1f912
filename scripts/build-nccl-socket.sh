#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds NCCL's own Socket transport (src/transport/net_socket.cc and what it needs, compiled
# unchanged from a NCCL source tree the user supplies) as a net plugin that nccl-mesh-bench can
# load, so that the bench drives NCCL's Socket exactly as it drives Mesh, on a machine without a
# GPU or NCCL (issue 28: "never slower than NCCL's Socket", judged here until now against the
# bench's --tcp-like-socket stand-in, argued from NCCL's source but not measured against it).
# Nothing of NCCL is kept in this repository: the tree is an argument, the build is in OUTDIR.
#
# Usage: scripts/build-nccl-socket.sh NCCL_SRC OUTDIR
#   NCCL_SRC: a NCCL source tree (tested with v2.28.9-1: git archive v2.28.9-1 of
#             github.com/NVIDIA/nccl). OUTDIR gets libnccl-net-ncclsocket.so.
#   CUDA_HOME (default /usr/local/cuda): its headers only; nothing of CUDA is linked. NCCL's
#             headers include cuda_runtime.h and cuda/atomic.
# Then, e.g.:
#   NCCL_SOCKET_IFNAME=lo scripts/bench-interleaved.py --bench BENCH \
#     --plugin mesh=build/libnccl-net-mesh.so --plugin sock=OUTDIR/libnccl-net-ncclsocket.so \
#     --versus sock --rounds 10 --alternate-order -- --nranks 3 --pattern ring-allreduce \
#     --sizes 1K,64K,256K,1M,4M -q
# What it is and is not: NCCL's net code (its sockets, framing, inline size, threads:
# NCCL_SOCKET_NTHREADS and NCCL_NSOCKS_PERTHREAD resolve as in NCCL, 0 and 1 off AWS and GCP),
# driven by the bench's loop (isend/irecv/test, yield when idle) where NCCL's proxy thread would
# drive it; no GPU, no proxy, no NCCL collectives (docs/measurements.md, twenty-seventh pass).
set -euo pipefail
SRC=$(cd "${1:?usage: $0 NCCL_SRC OUTDIR}" && pwd)
OUT=${2:?usage: $0 NCCL_SRC OUTDIR}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CXX=${CXX:-g++}
# NCCL's files compiled (the Socket transport and what it calls), in the tree's own paths.
sources=(src/transport/net_socket.cc src/misc/socket.cc src/misc/param.cc src/debug.cc
         src/misc/utils.cc)
for f in "${sources[@]}" src/nccl.h.in makefiles/version.mk; do
  [ -f "$SRC/$f" ] || { echo "$SRC/$f: missing; is $SRC a NCCL source tree?" >&2; exit 2; }
done
[ -f "$CUDA_HOME/include/cuda_runtime.h" ] ||
  { echo "$CUDA_HOME/include/cuda_runtime.h: missing (set CUDA_HOME to a CUDA toolkit)" >&2; exit 2; }
mkdir -p "$OUT/obj"
OUT=$(cd "$OUT" && pwd)
version=$(sed -n 's/^NCCL_\(MAJOR\|MINOR\|PATCH\) *:= *\([0-9]*\).*/\2/p' "$SRC/makefiles/version.mk" |
          paste -sd' ')
read -r major minor patch <<<"$version"
# nccl.h as NCCL's makefile generates it (the version fields only).
sed -e "s/\${nccl:Major}/$major/g; s/\${nccl:Minor}/$minor/g; s/\${nccl:Patch}/$patch/g" \
    -e "s/\${nccl:Suffix}//g" \
    -e "s/\${nccl:Version}/$((major * 10000 + minor * 100 + patch))/g" \
    "$SRC/src/nccl.h.in" >"$OUT/obj/nccl.h"
# The glue (ours): NCCL's env plugin reduced to getenv, CUDA's runtime reduced to what the Socket
# code asks for (the current device, for its threads' names only), and the v11 plugin symbol.
cat >"$OUT/obj/glue.cc" <<'EOF'
#include <cstdlib>
#include "cuda_runtime.h"
#include "nccl.h"
#include "net.h"
extern ncclNet_t ncclNetSocket;
extern "C" __attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11;
ncclNet_v11_t ncclNetPlugin_v11 = ncclNetSocket;
ncclResult_t ncclInitEnv() { return ncclSuccess; }
bool ncclEnvPluginInitialized() { return false; }
const char* ncclEnvPluginGetEnv(const char* name) { return getenv(name); }
extern "C" {
cudaError_t cudaGetDevice(int* dev) { *dev = 0; return cudaSuccess; }
const char* cudaGetErrorString(cudaError_t) { return "no CUDA runtime (build-nccl-socket.sh)"; }
cudaError_t cudaDeviceGetAttribute(int*, cudaDeviceAttr, int) { return cudaErrorNoDevice; }
cudaError_t cudaDeviceGetPCIBusId(char*, int, int) { return cudaErrorNoDevice; }
}
EOF
flags=(-std=c++17 -O2 -fPIC -w -I"$OUT/obj" -I"$SRC/src/include" -I"$SRC/src/include/plugin"
       -I"$CUDA_HOME/include" -I"$CUDA_HOME/include/cccl")
objs=()
for file in "${sources[@]/#/$SRC/}" "$OUT/obj/glue.cc"; do
  o=$OUT/obj/$(basename "$file" .cc).o
  "$CXX" "${flags[@]}" -c "$file" -o "$o" || {
    echo "$file: did not build. This script knows NCCL 2.28's Socket (tested: v2.28.9-1); NCCL" \
         "$major.$minor.$patch may need other files or glue" >&2
    exit 1
  }
  objs+=("$o")
done
"$CXX" -shared -o "$OUT/libnccl-net-ncclsocket.so" "${objs[@]}" -Wl,--no-undefined -lpthread
echo "$OUT/libnccl-net-ncclsocket.so: NCCL $major.$minor.$patch's Socket as ncclNetPlugin_v11"
