#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The arm64 lane (scripts/run-tests.sh arm64): cross-builds the plugin, the unit tests and the
# conformance suite for arm64 with Debian's cross toolchain and runs them under qemu-user, as
# DGX Spark (DGX OS, arm64) and other arm64 hosts would run them.
#   scripts/arm64-lane.sh [BUILD_DIR]      (default build-ci-arm64; root for the set-up steps)
#
# Set-up (each step is skipped when already done): the arm64 architecture in dpkg, the cross
# compiler, qemu-user-static, the arm64 GoogleTest, rdma-core and OpenSSL headers and libraries
# (libcrypto: the relay's HMAC; its opensslconf.h is per architecture, so the amd64 package does
# not serve the cross build), and a binfmt_misc entry for arm64 ELF files (the conformance suite
# starts its peer processes itself, so the kernel must know how to run them).
#
# What runs, and why not more: CI has about 16 minutes left of its 70 on 2 cores, and code under
# qemu (TCG) runs several times slower than natively. The lane builds only the plugin, the unit
# tests and the conformance suite (no tools: the bench and doctor hold no lock-free or
# architecture-dependent code the unit tests do not cover) and runs every unit test and the
# conformance suite's cases through the v11 table (of seven ABI versions; the reason is printed).
# ARM64_CONFORMANCE_FILTER=all runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-ci-arm64}
jobs=$(nproc)
start=$(date +%s)
elapsed() { echo "$(($(date +%s) - start)) s"; }

# ---- set-up
need=()
dpkg --print-foreign-architectures | grep -qx arm64 || need+=(arch)
for p in g++-aarch64-linux-gnu qemu-user-static libgtest-dev:arm64 libgmock-dev:arm64 libstdc++6:arm64 \
         libgcc-s1:arm64 libibverbs-dev:arm64 libssl-dev:arm64 binutils-aarch64-linux-gnu; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "arm64 lane: missing ${need[*]}; run as root (or install them)" >&2
    exit 1
  fi
  echo "=== lane arm64: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if [ "${need[0]}" = arch ]; then
    dpkg --add-architecture arm64
    need=("${need[@]:1}")
  fi
  apt-get -o DPkg::Lock::Timeout=300 update -qq
  [ ${#need[@]} -eq 0 ] ||
    apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  echo "    installed ($(elapsed))"
fi
binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e $binfmt/register ]; then
  mount -t binfmt_misc binfmt_misc $binfmt 2>/dev/null ||
    { echo "arm64 lane: cannot mount binfmt_misc (needs root)" >&2; exit 1; }
fi
if [ ! -e $binfmt/qemu-aarch64 ]; then
  # Debian's own entry (qemu-user-static), with the F flag: the interpreter is opened now, so
  # it works inside namespaces and chroots too.
  conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  [ -f $conf ] || { echo "arm64 lane: $conf not found (qemu-user-static)" >&2; exit 1; }
  cat $conf >$binfmt/register ||
    { echo "arm64 lane: cannot register qemu-aarch64 with binfmt_misc (needs root)" >&2; exit 1; }
fi
grep -q '^enabled' $binfmt/qemu-aarch64 || { echo "arm64 lane: binfmt entry qemu-aarch64 disabled" >&2; exit 1; }

# ---- build
echo "=== lane arm64: configure and build ($dir)"
cmake -S . -B "$dir" --toolchain cmake/toolchain-aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=Release "-DMESH_SUBDIRS=tests/unit;tests/conformance" >/dev/null
cmake --build "$dir" -j"$jobs"
file -b "$dir/libnccl-net-mesh.so" | grep -q 'ARM aarch64' ||
  { echo "arm64 lane: $dir/libnccl-net-mesh.so is not an arm64 library: $(file -b "$dir/libnccl-net-mesh.so")" >&2; exit 1; }
echo "    built: $(file -b "$dir/libnccl-net-mesh.so" | cut -d, -f1-2) ($(elapsed))"

# ---- test
# Under qemu-user every instruction is translated, so a plugin call that takes 20 ms natively can
# take several hundred: the conformance suite's "never blocks" bound (200 ms per call) and its
# other time limits are scaled by MESH_CONF_TIME_SCALE (10, as in the Soft-RoCE VMs). A call
# that really blocks (waits on a peer or a timeout) still exceeds the scaled bound.
export MESH_CONF_TIME_SCALE=${MESH_CONF_TIME_SCALE:-10}
echo "=== lane arm64: test: every unit test but the x86-64 release lane's timing bounds"
scripts/ctest-lane.sh arm64 "$dir" -L unit -LE x86-release-only || exit 1
if [ "${ARM64_CONFORMANCE_FILTER:-default}" = all ]; then
  echo "=== lane arm64: test: every conformance test (MESH_CONF_TIME_SCALE=$MESH_CONF_TIME_SCALE)"
  scripts/ctest-lane.sh arm64 "$dir" -L conformance -LE x86-release-only || exit 1
else
  # The versioned cases as v11 (NCCL 2.28-2.29's table, the one every later version shares),
  # with the version-free ones (loader, tuner tables, bad input, floods, descriptors, exit while
  # polling) and the io_pool: cases (TCP data moved by I/O threads: the lock-free hand-off). Not
  # run here: the same cases through the v6-v10 and v12 adapters, which only convert arguments
  # for the one core and run in every x86-64 lane. gtest names the instances
  # "Suite.Case/vN  # GetParam() = N".
  echo "=== lane arm64: test: conformance, versioned cases as v11 only" \
       "(MESH_CONF_TIME_SCALE=$MESH_CONF_TIME_SCALE; CI time: the v6-v10 and v12 adapters run on" \
       "x86-64; ARM64_CONFORMANCE_FILTER=all runs them here)"
  scripts/ctest-lane.sh arm64 "$dir" -L conformance -LE x86-release-only \
    -E '/v(6|7|8|9|10|12)( |$)' || exit 1
fi
echo "=== lane arm64: done in $(elapsed)"
