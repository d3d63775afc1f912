#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The installed product, end to end:
#   tests/install/install_test.sh BUILD_DIR      (a built tree configured with tests/install)
#
#  a. `cmake --install --prefix TMP` and `DESTDIR=TMP cmake --install`: the files and symlinks
#     are exactly tests/install/expected-files.txt, install_manifest.txt stays inside the root,
#     and nothing new appears in the configured prefix's or /usr/local's install folders;
#  b. the installed plugin loads as NCCL and RCCL load it (load_probe): NCCL_NET_PLUGIN=mesh with
#     the lib folder on LD_LIBRARY_PATH, the full path, and RCCL's librccl-net-mesh.so;
#  c. the installed nccl-mesh-bench runs on loopback without --plugin and uses the installed
#     plugin; the installed doctor reports the project's version;
#  d. cpack -G DEB: the two packages (libnccl-net-mesh, nccl-mesh-tools), their control fields
#     and contents (tests/install/deb-files.txt), hardening of every ELF file (RELRO, BIND_NOW,
#     stack protector, fortified calls), no build path inside, lintian without errors; then, as
#     root, dpkg -i, the installed doctor, bench, manual pages, docs and plugin (by name, as on a
#     system install), a WARN of the installed plugin naming src/..., dpkg -r and --purge, and
#     every path the packages owned is gone (directories shared with other packages stay).
#     Without root: "SKIP package round trip: needs root (dpkg -i)".
# Every step prints a line; the last line is PASS or FAIL (exit status 0 or 1). Temporary files
# live in one mktemp folder; the dpkg part takes a lock, so concurrent runs are safe.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR"; exit 2; }
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
envfile=$build/tests/install/install_test.env
if [ ! -f "$envfile" ]; then
  echo "FAIL: $envfile not found: configure $build with tests/install in MESH_SUBDIRS"
  exit 1
fi
# shellcheck source=/dev/null
source "$envfile"

work=$(mktemp -d "${TMPDIR:-/tmp}/nccl-mesh-install-test.XXXXXX")
lib_pkg=libnccl-net-mesh
tools_pkg=nccl-mesh-tools
pkg_installed=0
cleanup() {
  local rc=$?
  if [ "$pkg_installed" = 1 ]; then
    echo "--- cleanup: dpkg --purge $tools_pkg $lib_pkg"
    dpkg --purge "$tools_pkg" "$lib_pkg" >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
  if [ $rc -eq 0 ]; then echo "PASS: install test"; else echo "FAIL: install test"; fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step() { echo "=== $*"; }
indent() { sed 's/^/    /'; }
ok() { echo "    ok: $*"; }
fail() {
  echo "    FAILED: $*"
  exit 1
}
# Runs a command with its output in a log; shows the log if it fails.
run_logged() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    cat "$log"
    fail "$*"
  fi
}

# dpkg with the arguments; waits (up to 2 minutes) while another dpkg or apt holds the lock.
dpkg_run() {
  local log=$1 try
  shift
  for try in $(seq 24); do
    if dpkg "$@" >"$log" 2>&1; then return 0; fi
    grep -qi 'lock' "$log" || break
    echo "    dpkg is locked by another process; retrying in 5 s ($try/24)"
    sleep 5
  done
  indent <"$log"
  fail "dpkg $*"
}
# The expected list with the configured folders; PREFIX_REL (e.g. "usr/") before every path.
expected_list() {
  local prefix_rel=$1
  sed -e '/^#/d' -e '/^[[:space:]]*$/d' \
      -e "s|@BINDIR@|$MESH_BINDIR|g" -e "s|@LIBDIR@|$MESH_LIBDIR|g" \
      -e "s|@MANDIR@|$MESH_MANDIR|g" -e "s|@DOCDIR@|$MESH_DOCDIR|g" \
      -e "s|@MANEXT@|$MESH_MAN_EXT|g" -e "s|@SBINDIR@|$MESH_SBINDIR|g" \
      -e "s|@MANGZ@|$MESH_MAN_GZ|g" -e "s|^|$prefix_rel|" "$here/expected-files.txt" |
    LC_ALL=C sort
}
# Files and symlinks under a root, relative, symlinks with their target; anything else is
# reported as such so that it shows up in the comparison.
list_tree() {
  (cd "$1" && find . -mindepth 1 \( -type f -printf '%P\n' \) -o \( -type l -printf '%P -> %l\n' \) \
    -o \( ! -type d -printf '%P (not a file)\n' \)) | LC_ALL=C sort
}
compare_tree() {
  local root=$1 prefix_rel=$2 what=$3
  if ! diff -u <(expected_list "$prefix_rel") <(list_tree "$root") >"$work/diff"; then
    echo "    expected (-) vs installed (+):"
    indent <"$work/diff"
    fail "$what: installed files differ from tests/install/expected-files.txt"
  fi
  ok "$what: $(expected_list "$prefix_rel" | wc -l) files and symlinks, as expected"
}
# Where a wrongly computed destination would land: the install folders of the configured
# prefix and of /usr/local (the old RCCL link went to /usr/local/lib).
outside_roots=("${MESH_CONF_PREFIX%/}")
[ "${MESH_CONF_PREFIX%/}" = /usr/local ] || outside_roots+=(/usr/local)
outside_snapshot() {
  local dirs=() p
  for p in "${outside_roots[@]}"; do
    dirs+=("$p/$MESH_BINDIR" "$p/$MESH_LIBDIR" "$p/lib" "$p/$MESH_MANDIR/man1" "$p/$MESH_DOCDIR")
  done
  for p in "${dirs[@]}"; do
    if [ -d "$p" ]; then find "$p" -maxdepth 1 -mindepth 1 -printf '%p\n'; fi
  done | LC_ALL=C sort -u
}
manifest_inside() {
  local root=$1 what=$2 bad
  bad=$(awk -v r="$root/" 'index($0, r) != 1' "$build/install_manifest.txt")
  [ -z "$bad" ] || fail "$what: install_manifest.txt has paths outside $root: $bad"
  ok "$what: install_manifest.txt ($(grep -c '' "$build/install_manifest.txt") entries) is inside $root"
}
canonical() { echo "$(realpath "$(dirname "$1")")/$(basename "$1")"; }
# load_probe with a loader (nccl|rccl) and a NCCL_NET_PLUGIN value; the library it must load.
probe() {
  local loader=$1 value=$2 want=$3 ld_path=$4 out
  if ! out=$(LD_LIBRARY_PATH="$ld_path" NCCL_MESH_IFNAME=lo "$MESH_PROBE" "$loader" "$value" 2>&1)
  then
    indent <<<"$out"
    fail "$loader NCCL_NET_PLUGIN=$value${ld_path:+ (LD_LIBRARY_PATH=$ld_path)}: not loaded"
  fi
  # The same folder (after symlinks: /lib is /usr/lib on merged-/usr systems) and file name.
  local file
  file=$(sed -n 's/^file=//p' <<<"$out")
  if [ -z "$file" ] || [ "$(canonical "$file")" != "$(canonical "$want")" ]; then
    indent <<<"$out"
    fail "$loader NCCL_NET_PLUGIN=$value loaded ${file:-?}, not $want"
  fi
  ok "$loader NCCL_NET_PLUGIN=$value${ld_path:+ with LD_LIBRARY_PATH}: dlopen($(sed -n \
    's/^opened=//p' <<<"$out")) = $file, $(sed -n 's/^devices=//p' <<<"$out") device(s), v11..v8 named Mesh"
}
# The bench on loopback (local mode: two ranks of itself), without --plugin: it must load
# WANT (the library installed with it) and verify every byte.
bench_run() {
  local bench=$1 want=$2 out
  if ! out=$("$bench" --sizes 8,64K,1M --iters 5 --warmup 1 --timeout 30 2>&1); then
    indent <<<"$out"
    fail "$bench failed"
  fi
  local used
  used=$(sed -n 's/^# nccl-mesh-bench .*: plugin Mesh (\(.*\))$/\1/p' <<<"$out")
  if [ -z "$used" ] || [ "$(realpath "$used")" != "$(realpath "$want")" ]; then
    indent <<<"$out"
    fail "$bench loaded '${used}', not the installed $want"
  fi
  grep -q '^# data verified' <<<"$out" || fail "$bench: no '# data verified' line"
  ok "$bench: 2 local ranks, 3 sizes, data verified, plugin $used"
}

echo "install test of $build (nccl-mesh $MESH_VERSION, configured prefix $MESH_CONF_PREFIX)"

step "a1. cmake --install --prefix"
before=$(outside_snapshot)
prefix=$work/prefix
run_logged "$work/install-prefix.log" "$MESH_CMAKE" --install "$build" --prefix "$prefix"
compare_tree "$prefix" "" "--prefix $prefix"
manifest_inside "$prefix" "--prefix"

step "a2. DESTDIR=... cmake --install"
destdir=$work/destdir
conf_rel=${MESH_CONF_PREFIX#/}
conf_rel=${conf_rel%/}
[ -n "$conf_rel" ] && conf_rel="$conf_rel/"
DESTDIR=$destdir run_logged "$work/install-destdir.log" "$MESH_CMAKE" --install "$build"
compare_tree "$destdir" "$conf_rel" "DESTDIR=$destdir"
# The manifest lists the paths without DESTDIR; each must be under the configured prefix and
# exist in DESTDIR.
while read -r f || [ -n "$f" ]; do # (the manifest's last line has no newline)
  case $f in "${MESH_CONF_PREFIX%/}"/*) ;; *) fail "DESTDIR: manifest path $f outside $MESH_CONF_PREFIX" ;; esac
  [ -e "$destdir$f" ] || [ -L "$destdir$f" ] || fail "DESTDIR: $f listed but not in $destdir"
done <"$build/install_manifest.txt"
ok "DESTDIR: install_manifest.txt is inside $MESH_CONF_PREFIX and every entry is in DESTDIR"

step "a3. nothing written outside the install roots"
after=$(outside_snapshot)
if [ "$before" != "$after" ]; then
  diff <(echo "$before") <(echo "$after") | indent || true
  fail "the installs changed the install folders of $MESH_CONF_PREFIX or /usr/local"
fi
ok "no change in the bin, lib, man1 and doc folders of ${outside_roots[*]}"

step "b. the installed plugin, loaded as NCCL and RCCL do (RTLD_NOW|RTLD_LOCAL)"
libdir=$prefix/$MESH_LIBDIR
ld=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
probe nccl mesh "$libdir/libnccl-net-mesh.so" "$ld"
probe nccl "$libdir/libnccl-net-mesh.so" "$libdir/libnccl-net-mesh.so" ""
probe rccl mesh "$libdir/librccl-net-mesh.so" "$ld"
probe rccl "$libdir/librccl-net-mesh.so" "$libdir/librccl-net-mesh.so" ""

step "c. the installed tools"
bench_run "$prefix/$MESH_BINDIR/nccl-mesh-bench" "$libdir/libnccl-net-mesh.so"
v=$("$prefix/$MESH_BINDIR/nccl-mesh-doctor" --version)
[ "$v" = "$MESH_VERSION" ] || fail "nccl-mesh-doctor --version printed '$v', not $MESH_VERSION"
ok "nccl-mesh-doctor --version: $v"

step "d1. the Debian packages (cpack -G DEB): control fields, contents, lintian"
for c in dpkg-deb dpkg-shlibdeps file lintian; do
  command -v "$c" >/dev/null || fail "$c not found (Debian: dpkg-dev file lintian; scripts/install-deps.sh)"
done
run_logged "$work/cpack.log" "$MESH_CPACK" -G DEB --config "$build/CPackConfig.cmake" -B "$work/pkg"
deb_arch=$(dpkg --print-architecture)
lib_deb=$work/pkg/${lib_pkg}_${MESH_VERSION}_$deb_arch.deb
tools_deb=$work/pkg/${tools_pkg}_${MESH_VERSION}_$deb_arch.deb
made=$(cd "$work/pkg" && ls -- *.deb | LC_ALL=C sort | tr '\n' ' ')
if [ "$made" != "$(basename "$lib_deb") $(basename "$tools_deb") " ]; then
  indent <"$work/cpack.log"
  fail "cpack made '$made', not $(basename "$lib_deb") and $(basename "$tools_deb")"
fi
field() { dpkg-deb -f "$1" "$2"; }
for deb in "$lib_deb" "$tools_deb"; do
  name=$(basename "$deb")
  ok "$name ($(stat -c %s "$deb") bytes)"
  dpkg-deb -I "$deb" | indent
  [ "$(field "$deb" Version)" = "$MESH_VERSION" ] || fail "$name: Version $(field "$deb" Version)"
  for f in Maintainer Section Description; do
    [ -n "$(field "$deb" $f)" ] || fail "$name: $f missing"
  done
  grep -qw libc6 <<<"$(field "$deb" Depends)" || fail "$name: Depends lacks libc6"
  ! grep -q libibverbs <<<"$(field "$deb" Depends)" ||
    fail "$name: Depends names libibverbs (dlopen'ed: Recommends)"
done
[ "$(field "$lib_deb" Package)" = "$lib_pkg" ] || fail "Package: $(field "$lib_deb" Package)"
[ "$(field "$tools_deb" Package)" = "$tools_pkg" ] || fail "Package: $(field "$tools_deb" Package)"
grep -qw libibverbs1 <<<"$(field "$lib_deb" Recommends)" || fail "$lib_pkg: Recommends lacks libibverbs1"
grep -q "$lib_pkg (= $MESH_VERSION)" <<<"$(field "$tools_deb" Depends)" ||
  fail "$tools_pkg: Depends lacks '$lib_pkg (= $MESH_VERSION)': $(field "$tools_deb" Depends)"
dpkg-deb --ctrl-tarfile "$lib_deb" | tar -xO ./triggers | grep -qx 'activate-noawait ldconfig' ||
  fail "$lib_pkg: no 'activate-noawait ldconfig' trigger"
ok "control: $lib_pkg Depends $(field "$lib_deb" Depends), Recommends $(field "$lib_deb" Recommends), ldconfig trigger"
ok "control: $tools_pkg Depends $(field "$tools_deb" Depends)"
# The contents: the library in the multiarch folder, the tools in bin (deb-files.txt).
deb_expected() {
  sed -e '/^#/d' -e '/^[[:space:]]*$/d' -e "s|@DEBLIBDIR@|$MESH_DEB_LIBDIR|g" \
      -e "s|@MANEXT@|$MESH_MAN_EXT|g" -e "s|@MANGZ@|$MESH_MAN_GZ|g" "$here/deb-files.txt" |
    LC_ALL=C sort
}
dpkg-deb -x "$lib_deb" "$work/debroot"
dpkg-deb -x "$tools_deb" "$work/debroot"
if ! diff -u <(deb_expected) <(list_tree "$work/debroot") >"$work/diff"; then
  echo "    expected (-) vs in the packages (+):"
  indent <"$work/diff"
  fail "the .debs' contents differ from tests/install/deb-files.txt"
fi
ok "the .debs' contents: $(deb_expected | wc -l) files and symlinks, as in tests/install/deb-files.txt"
# Hardening and build paths: readelf on every ELF file of the packages.
for elf in "$work/debroot/usr/$MESH_DEB_LIBDIR/libnccl-net-mesh.so" \
           "$work"/debroot/usr/bin/nccl-mesh-*; do
  name=${elf#"$work/debroot"}
  # Into files first: `grep -q` stops at the first match, and under pipefail readelf's SIGPIPE
  # would fail the pipeline.
  readelf -lW "$elf" >"$work/segments.txt"
  readelf -dW "$elf" >"$work/dynamic.txt"
  readelf --dyn-syms -W "$elf" >"$work/dynsyms.txt"
  strings "$elf" >"$work/strings.txt"
  grep -q GNU_RELRO "$work/segments.txt" || fail "$name: no GNU_RELRO segment"
  grep -q 'BIND_NOW' "$work/dynamic.txt" || fail "$name: not linked with -z now (no BIND_NOW)"
  grep -q '__stack_chk_fail' "$work/dynsyms.txt" || fail "$name: no stack protector"
  grep -q '_chk@' "$work/dynsyms.txt" || fail "$name: no fortified libc calls (_chk)"
  if grep -qF "$MESH_SOURCE_DIR/" "$work/strings.txt"; then
    fail "$name embeds the build's source path $MESH_SOURCE_DIR/ (-ffile-prefix-map)"
  fi
done
ok "RELRO, BIND_NOW, __stack_chk_fail, *_chk fortified calls in the plugin and both tools"
ok "no file of the packages names the source folder $MESH_SOURCE_DIR"
# Lintian: any error fails the test; every other tag is printed (overrides with their reason).
set +e
lintian --pedantic --show-overrides "$lib_deb" "$tools_deb" >"$work/lintian.txt" 2>&1
rc=$?
set -e
grep -v 'running with root privileges' "$work/lintian.txt" | indent || true
if grep -q '^E: ' "$work/lintian.txt" || [ $rc -ge 2 ]; then
  fail "lintian reports errors (exit $rc)"
fi
ok "lintian $(lintian --version | sed 's/^Lintian v//'): no errors ($(grep -c '^W: ' "$work/lintian.txt") warnings, $(grep -c '^O: ' "$work/lintian.txt") overridden, $(grep -c '^I: ' "$work/lintian.txt") info)"

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP package round trip: needs root (dpkg -i)"
  exit 0
fi

step "d2. dpkg -i"
# One round trip at a time on this machine, and never over a copy that someone installed.
lockdir=/run/lock
[ -d "$lockdir" ] && [ -w "$lockdir" ] || lockdir=/tmp
exec 9>"$lockdir/nccl-mesh-install-test.lock"
flock -w 600 9 || fail "another install test holds the dpkg round-trip lock"
for p in "$lib_pkg" "$tools_pkg" nccl-mesh; do # nccl-mesh: the single package of before 0.1.0
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case $status in
    "" | "unknown ok not-installed" | "deinstall ok not-installed" | "purge ok not-installed") ;;
    *) fail "package $p is already on this machine ($status); remove it (dpkg --purge $p) first" ;;
  esac
done
pkg_installed=1
dpkg_run "$work/dpkg-i.log" -i "$lib_deb" "$tools_deb"
{ dpkg-query -L "$lib_pkg"; dpkg-query -L "$tools_pkg"; } >"$work/owned.txt"
ok "installed: $(dpkg-query -W -f='${Package} ${Version} ${Status}, ' "$lib_pkg" "$tools_pkg")$(wc -l <"$work/owned.txt") paths"

step "d3. the installed packages"
sys_lib=/usr/$MESH_DEB_LIBDIR
sys_bin=/usr/$MESH_BINDIR
v=$("$sys_bin/nccl-mesh-doctor" --version)
[ "$v" = "$MESH_VERSION" ] || fail "$sys_bin/nccl-mesh-doctor --version printed '$v'"
# The doctor's report, on loopback with the NCCL variables set as the README says: exit 0 means
# no check failed (warnings allowed), 1 a failed check, 2 a usage error.
set +e
NCCL_MESH_IFNAME=lo NCCL_NET=Mesh NCCL_NET_PLUGIN=mesh "$sys_bin/nccl-mesh-doctor" >"$work/doctor.txt" 2>&1
rc=$?
set -e
[ $rc -eq 0 ] || { indent <"$work/doctor.txt"; fail "nccl-mesh-doctor exited $rc"; }
ok "$sys_bin/nccl-mesh-doctor $v: exit 0, $(tail -n 1 "$work/doctor.txt")"
# Into a file first: `grep -q` stops reading at the first match, and under pipefail the
# doctor's SIGPIPE on its next write would fail the pipeline once the table outgrows one buffer.
"$sys_bin/nccl-mesh-doctor" --settings >"$work/settings.txt" || fail "doctor --settings exited $?"
grep -q NCCL_MESH_IFNAME "$work/settings.txt" || fail "doctor --settings does not list NCCL_MESH_IFNAME"
ok "nccl-mesh-doctor --settings lists the settings"
bench_run "$sys_bin/nccl-mesh-bench" "$sys_lib/libnccl-net-mesh.so"
for tool in nccl-mesh-bench nccl-mesh-doctor; do
  page=/usr/$MESH_MANDIR/man1/$tool$MESH_MAN_EXT
  if [ ! -f "$page" ] && grep -qs 'path-exclude.*/man' /etc/dpkg/dpkg.cfg.d/*; then
    echo "    skip: $page not installed: dpkg excludes manual pages on this machine"
    continue
  fi
  [ -f "$page" ] || fail "$page not installed"
  if command -v man >/dev/null; then
    found=$(man -w "$tool") || fail "man -w $tool found nothing"
    [ "$found" = "$page" ] || fail "man -w $tool: $found, not $page"
    warn=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || fail "man -l $page"
    [ -z "$warn" ] || fail "man $tool warns: $warn"
    ok "man -w $tool: $found (renders without warnings)"
  else
    ok "$page (man not installed here)"
  fi
done
# The relay service: its binary, and a unit whose ExecStart is that binary.
v=$("/usr/$MESH_SBINDIR/nccl-mesh-relayd" --version)
[ "$v" = "nccl-mesh-relayd $MESH_VERSION" ] || fail "nccl-mesh-relayd --version printed '$v'"
unit=/usr/lib/systemd/system/nccl-mesh-relayd.service
grep -qx "ExecStart=/usr/$MESH_SBINDIR/nccl-mesh-relayd" "$unit" ||
  fail "$unit does not start /usr/$MESH_SBINDIR/nccl-mesh-relayd"
ok "$v; $unit starts it"
page=/usr/$MESH_MANDIR/man8/nccl-mesh-relayd.8$MESH_MAN_GZ
if [ -f "$page" ] && command -v man >/dev/null; then
  warn=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || fail "man -l $page"
  [ -z "$warn" ] || fail "man nccl-mesh-relayd warns: $warn"
  ok "$page renders without warnings"
elif ! grep -qs 'path-exclude.*/man' /etc/dpkg/dpkg.cfg.d/*; then
  [ -f "$page" ] || fail "$page not installed"
fi
for f in README.md deploy.md copyright changelog.gz examples/60-nccl-mesh.conf; do
  if [ ! -f "/usr/share/doc/$lib_pkg/$f" ] && grep -qs 'path-exclude.*/doc' /etc/dpkg/dpkg.cfg.d/*; then
    echo "    skip: /usr/share/doc/$lib_pkg/$f not installed: dpkg excludes docs on this machine"
    continue
  fi
  [ -f "/usr/share/doc/$lib_pkg/$f" ] || fail "/usr/share/doc/$lib_pkg/$f not installed"
done
ok "/usr/share/doc/$lib_pkg: README.md, deploy.md, copyright, changelog.gz, examples/"
# By name from the system's library path (ld.so's default folders, no LD_LIBRARY_PATH), as
# NCCL_NET_PLUGIN=mesh finds a system install.
probe nccl mesh "$sys_lib/libnccl-net-mesh.so" ""
probe nccl "$sys_lib/libnccl-net-mesh.so" "$sys_lib/libnccl-net-mesh.so" ""
probe rccl mesh "$sys_lib/librccl-net-mesh.so" ""
# A WARN of the installed library, printed as NCCL prints it (file:line): the file is the path
# relative to the source tree, and it exists there.
out=$(NCCL_MESH_IFNAME=lo "$MESH_PROBE" nccl mesh warn 2>&1) || { indent <<<"$out"; fail "load_probe warn"; }
line=$(grep '^plugin WARN ' <<<"$out" | head -n 1)
src_file=$(sed -n 's/^plugin WARN \([^:]*\):[0-9]* .*/\1/p' <<<"$line")
case $src_file in
  src/*) [ -f "$MESH_SOURCE_DIR/$src_file" ] || fail "WARN names $src_file, not in $MESH_SOURCE_DIR" ;;
  *) indent <<<"$out"; fail "the installed library's WARN names '${src_file:-?}', not a src/... path" ;;
esac
ok "a WARN of the installed plugin: $line"

step "d4. dpkg -r, dpkg --purge: nothing left"
dpkg_run "$work/dpkg-r.log" -r "$tools_pkg" "$lib_pkg"
dpkg_run "$work/dpkg-purge.log" --purge "$tools_pkg" "$lib_pkg"
pkg_installed=0
for p in "$lib_pkg" "$tools_pkg"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case $status in
    "" | *not-installed) ;;
    *) fail "after purge: $p is '$status'" ;;
  esac
done
left=0
kept=0
while read -r p || [ -n "$p" ]; do
  [ "$p" = "/." ] && continue
  [ -e "$p" ] || [ -L "$p" ] || continue
  if [ -d "$p" ] && [ ! -L "$p" ] && dpkg-query -S "$p" >/dev/null 2>&1; then
    kept=$((kept + 1)) # a folder other packages own too (/usr/bin, /usr/share/man/man1, ...)
    continue
  fi
  echo "    left behind: $p"
  left=$((left + 1))
done <"$work/owned.txt"
[ $left -eq 0 ] || fail "$left path(s) of the packages left after dpkg --purge"
ok "every file and folder of the packages is gone ($kept shared folders stay)"
