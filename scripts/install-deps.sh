#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages nccl-mesh needs to build and test. Does nothing when they are all
# present; needs root (apt-get) otherwise. Debian 12 package names.
set -euo pipefail
pkgs=(cmake g++ make pkg-config clang libgtest-dev libgmock-dev libcli11-dev nlohmann-json3-dev
      libfmt-dev libibverbs-dev libssl-dev iproute2 iputils-ping nftables gnuplot-nox procps python3
      dpkg-dev file lintian strace)
# libibverbs-dev: the verbs headers only; the plugin dlopens libibverbs.so.1 at run time.
# dpkg-dev (dpkg-shlibdeps) and file: CPack's .deb (cpack -G DEB) computes the Depends field.
# lintian: tests/install checks the .debs with it (no errors allowed).
# strace: bench.local.syscalls_per_message counts the TCP data path's syscalls per message,
# bench.local.records_per_message its clear-to-send records.
# iputils-ping: netns.fault-lossy reports the RTT under load with ping (None without it).
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root, or install them)" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
