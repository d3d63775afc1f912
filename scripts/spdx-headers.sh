#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Puts the license tag on every source file of the repository that lacks it, or checks for it.
#   scripts/spdx-headers.sh            add "SPDX-License-Identifier: Apache-2.0" where missing
#   scripts/spdx-headers.sh --check    list the files that lack it; exit 1 if any (tests/docs)
#
# Which files are source, and the comment each gets:
#   C, C++, CUDA (.c .cc .cpp .h .hpp .cu .cuh)      // SPDX-License-Identifier: Apache-2.0
#   shell, Python, CMake (.sh .py .cmake CMakeLists.txt) and any file whose first line is a
#   "#!" interpreter line                             # SPDX-License-Identifier: Apache-2.0
# Data (fuzz corpora, topology descriptions, logs, JSON), Markdown and man pages are not
# source in this sense and are left alone. The tag goes on the first line, or right after a
# "#!" line (the kernel needs that one first). A file that has the tag anywhere in its first
# 5 lines is left as it is, so running the script again changes nothing (idempotent; the lead
# reruns it after every merge).
#
# The files: git's tracked files (and, when adding, untracked files that git does not ignore)
# when this is a git work tree, else every file under the repository root outside build*/ and
# .git.
set -euo pipefail
cd "$(dirname "$0")/.."

check=0
case ${1:-} in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

tag="SPDX-License-Identifier: Apache-2.0"

list_files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # --check: the committed files (a build folder or scratch file in the work tree is not the
    # repository's); adding: also new files not yet committed.
    if [ $check -eq 1 ]; then
      git ls-files -z --cached
    else
      git ls-files -z --cached --others --exclude-standard
    fi
  else
    find . -path ./.git -prune -o -path './build*' -prune -o -type f -printf '%P\0'
  fi
}

# The comment style of a source file ("//" or "#"), or nothing for files that are not source.
style_of() {
  local f=$1
  case $f in
    tests/fuzz/corpus/*) return ;;
    *.c | *.cc | *.cpp | *.h | *.hpp | *.cu | *.cuh) echo "//" ;;
    *.sh | *.py | *.cmake | CMakeLists.txt | */CMakeLists.txt) echo "#" ;;
    *)
      # Extensionless scripts (.ci/run, tests/netns/mesh-topo): by their interpreter line.
      if [ -f "$f" ] && [ "$(head -c 2 "$f")" = "#!" ]; then echo "#"; fi ;;
  esac
}

missing=0
added=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] && [ ! -L "$f" ] || continue # deleted in the work tree, or a symlink
  style=$(style_of "$f")
  [ -n "$style" ] || continue
  head -n 5 "$f" | grep -q "SPDX-License-Identifier:" && continue
  if [ $check -eq 1 ]; then
    echo "missing SPDX tag: $f (run scripts/spdx-headers.sh)"
    missing=$((missing + 1))
    continue
  fi
  tmp=$(mktemp "$f.spdx.XXXXXX")
  if [ "$(head -c 2 "$f")" = "#!" ]; then
    { head -n 1 "$f"; echo "$style $tag"; tail -n +2 "$f"; } >"$tmp"
  else
    { echo "$style $tag"; cat "$f"; } >"$tmp"
  fi
  chmod --reference="$f" "$tmp"
  mv "$tmp" "$f"
  added=$((added + 1))
done < <(list_files)

if [ $check -eq 1 ]; then
  if [ $missing -gt 0 ]; then
    echo "FAIL: $missing source file(s) lack '$tag'"
    exit 1
  fi
  echo "PASS: every source file carries '$tag'"
else
  echo "spdx-headers: tagged $added file(s)"
fi
