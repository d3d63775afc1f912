#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Sourced by the bench's strace counts (syscalls_per_message.sh, records_per_message.sh):
# their arguments, strace itself, and a scratch folder removed on exit.
# usage (from a script called with BENCH [PLUGIN]): . "$(dirname "$0")/strace_setup.sh"
set -eu
# shellcheck disable=SC2034  # read by the sourcing script
bench=$1
# shellcheck disable=SC2034
plugin=${2:-}
command -v strace >/dev/null || { echo "strace is not installed (scripts/install-deps.sh installs it)"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
