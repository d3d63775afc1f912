#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The hand-written manual page of a tool describes every option of its --help (as a .TP item)
# and names no option that --help lacks:
#   tests/install/man_covers_help.sh PATH/TO/TOOL docs/man/TOOL.1.in
set -euo pipefail
tool=$1 page=$2
options() { grep -oE -- '--[a-z][a-z0-9-]*[a-z0-9]' | LC_ALL=C sort -u; }
help=$("$tool" --help)
# Declared: on the option lines of --help (indented, starting with '-'); mentioned: anywhere
# (its examples also show options of other programs, e.g. mpirun --host).
help_opts=$(grep -E '^[[:space:]]+-' <<<"$help" | options)
help_all=$(options <<<"$help")
# roff writes a minus as \-. Described = the tag of a .TP paragraph (the line after .TP);
# named = anywhere in the page.
described=$(sed -e 's/\\-/-/g' "$page" | awk '/^\.TP/ { if (getline > 0) print }' | options)
named=$(sed -e 's/\\-/-/g' "$page" | options)
missing=$(LC_ALL=C comm -23 <(echo "$help_opts") <(echo "$described"))
stale=$(LC_ALL=C comm -13 <(echo "$help_all") <(echo "$named"))
status=0
if [ -n "$missing" ]; then
  echo "$page does not describe these options of $(basename "$tool") --help: ${missing//$'\n'/ }"
  status=1
fi
if [ -n "$stale" ]; then
  echo "$page names options that $(basename "$tool") --help does not have: ${stale//$'\n'/ }"
  status=1
fi
[ $status -eq 0 ] && echo "$page: the $(echo "$help_opts" | wc -l) options of --help, no others"
exit $status
