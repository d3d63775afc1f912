#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Origin: the team's Soft-RoCE VM recipe (its traps are listed in tests/softroce/README.md),
# copied into nccl-mesh for the softroce CI lane (tests/softroce/run-lane.sh).
# Changes from the recipe:
#   - `-e NAME=VALUE` exports a variable to the guest command (repeatable);
#   - apt-get output goes to $SOFTROCE_LAB/apt.log (a CI log keeps only the one-line summary);
#   - `apt-get download` of the kernel runs with APT::Sandbox::User=root (the work dir under
#     root's $HOME is not readable by _apt: the recipe printed a warning for it);
#   - `-M MTU` sets the MTU of every test veth (default 1500, the recipe's); rxe derives its
#     RoCE MTU from it (1500 -> 1024, 9000 -> 4096);
#   - the guest's exit-code marker starts on a line of its own (a command whose output did not
#     end with a newline lost its exit code: "guest did not report an exit code");
#   - mesh3 also has a line A-B-C of two /30 cables (link() takes the prefix length), for the
#     relay step: beacons of nccl-mesh's relay agents are unicast on /30 (subnet broadcasts do
#     not reach sockets bound to one unicast address when all ends share one netns);
#   - the rest of the recipe is unchanged.
#
# run-softroce.sh - run a command inside a qemu (TCG, no KVM) VM booted with a
# stock Debian 12 kernel that has Soft-RoCE (rdma_rxe), so RDMA verbs code
# (libibverbs / librdmacm, RoCE v2, RC QPs) can be tested without RDMA hardware
# and on a host whose own kernel lacks CONFIG_INFINIBAND.
#
# Everything comes from Debian's apt repositories. No network traffic leaves
# the guest: the test links are veth pairs created inside the VM on
# 198.18.0.0/15 addresses; the VM has no NIC at all (-nic none).
#
# Usage:
#   run-softroce.sh [options] [--] 'shell command run inside the guest'
#   run-softroce.sh --setup            # only install/download/build, no boot
# Options:
#   -f PATH    copy a host file into the guest's /guest/ (repeatable). ELF
#              files get their shared libraries (from ldd) copied too.
#   -e N=V     export N=V to the guest command (repeatable)
#   -n TOPO    network topology set up before the command runs:
#                none   - modules loaded, no links, no rxe devices
#                pair   - (default) veth pair sr0a<->sr0b, 198.18.0.1/24 and
#                         198.18.0.2/24, rxe devices rxe_a, rxe_b on them
#                dual   - pair plus sr1a<->sr1b, 198.18.4.1/24 and 198.18.4.2/24,
#                         rxe_a1, rxe_b1: two cables between the same two nodes
#                mesh3  - nodes A,B,C; one veth pair per node pair on its own
#                         /24 (A-B 198.18.1.0/24, A-C 198.18.2.0/24,
#                         B-C 198.18.3.0/24), an rxe device on every veth end
#                         (rxe_ab = A's end of A-B link, rxe_ba = B's end, ...);
#                         plus a line A-B-C of its own: srlab<->srlba
#                         198.18.5.1/30-198.18.5.2/30 and srlbc<->srlcb
#                         198.18.5.5/30-198.18.5.6/30 (rxe_lab, rxe_lba,
#                         rxe_lbc, rxe_lcb): A and C share no subnet there;
#                         and D beyond C: srlcd<->srldc 198.18.5.9/30-
#                         198.18.5.10/30 (rxe_lcd, rxe_ldc): a line of four
#   -t SECS    wall-clock limit for the VM (default 1800)
#   -m MEM     guest RAM (default 2G);  -s N  guest vCPUs (default 2)
#   -M MTU     MTU of the test veths (default 1500; rxe's RoCE MTU follows: 9000 -> 4096)
#   -v         stream the guest console (kernel log + init) to stderr
#   -k         keep the per-run directory (default: kept only on failure)
# The command runs as root via /bin/bash with cwd /guest (busybox for the rest).
# Its stdout+stderr are printed on this script's stdout and its exit code is
# this script's exit code (124 on timeout, 125 on infrastructure failure).
# Inside the guest, /guest/softroce-env.sh (already sourced) exports
# SOFTROCE_* variables describing devices, IPs and RoCE v2 GID indexes:
#   SOFTROCE_TOPO, SOFTROCE_<L>_{A,B}_{DEV,IP,NETDEV,GID} with L = PAIR
#   (pair) or AB, AC, BC, LINE_AB, LINE_BC, LINE_CD (mesh3); e.g. SOFTROCE_AB_B_DEV=rxe_ba,
#   _GID=1; SOFTROCE_<L>_PREFIX is the prefix length (24, or 30 on the line).
# All devices sit in the guest's initial netns (6.1's rxe does not work in
# other netns); ibv_rc_pingpong & co. can use 127.0.0.1 for their TCP
# exchange. Use QP retry_cnt <= 6: rxe treats 7 as "retry forever".
# Example: run-softroce.sh -f ./my_test -- './my_test $SOFTROCE_PAIR_A_DEV ...'
#
# Env: SOFTROCE_LAB (work dir, default ${XDG_CACHE_HOME:-$HOME/.cache}/softroce-lab),
#      SOFTROCE_NO_APT=1 (never call apt-get), SOFTROCE_KPKG (kernel package).
set -euo pipefail

LAB=${SOFTROCE_LAB:-${XDG_CACHE_HOME:-$HOME/.cache}/softroce-lab}
TIMEOUT=1800 MEM=2G SMP=2 MTU=1500 TOPO=pair VERBOSE=0 KEEP=0 SETUP_ONLY=0
FILES=() GUEST_ENV=()
usage() { awk 'NR>1 && /^#/ {sub(/^# ?/, ""); print; next} NR>1 {exit}' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    -f) FILES+=("$2"); shift 2 ;;
    -e) case "$2" in [A-Za-z_]*=*) GUEST_ENV+=("$2") ;; *) echo "-e wants NAME=VALUE" >&2; usage 2 ;; esac
        shift 2 ;;
    -n) TOPO=$2; shift 2 ;;
    -t) TIMEOUT=$2; shift 2 ;;
    -m) MEM=$2; shift 2 ;;
    -M) MTU=$2; shift 2 ;;
    -s) SMP=$2; shift 2 ;;
    -v) VERBOSE=1; shift ;;
    -k) KEEP=1; shift ;;
    --setup) SETUP_ONLY=1; shift ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    -*) echo "unknown option $1" >&2; usage 2 ;;
    *) break ;;
  esac
done
CMD="$*"
case "$TOPO" in none|pair|dual|mesh3) ;; *) echo "bad topology $TOPO" >&2; exit 2 ;; esac
if [ "$SETUP_ONLY" = 0 ] && [ -z "$CMD" ]; then usage 2; fi

log() { printf '[softroce %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "ERROR: $*"; exit 125; }
T0=$(date +%s.%N)
elapsed() { awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

mkdir -p "$LAB"
exec 9>"$LAB/.lock"; flock 9   # one builder at a time

# ---------------------------------------------------------------- 1. packages
HOST_PKGS="qemu-system-x86 busybox-static kmod cpio file rdma-core ibverbs-utils
 ibverbs-providers libibverbs1 librdmacm1 rdmacm-utils perftest iproute2
 libibverbs-dev librdmacm-dev"
need_pkgs=()
for p in $HOST_PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  [ "${SOFTROCE_NO_APT:-0}" = 1 ] && die "missing packages: ${need_pkgs[*]}"
  log "apt-get install ${need_pkgs[*]} (output: $LAB/apt.log)"
  if [ ! -f "$LAB/.apt-updated" ]; then apt-get update -qq >&2 && touch "$LAB/.apt-updated"; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${need_pkgs[@]}" > "$LAB/apt.log" 2>&1 || { tail -20 "$LAB/apt.log" >&2; die "apt-get install failed"; }
fi

# ------------------------------------------------------------------ 2. kernel
# modules put into the guest (modinfo -F depends adds ib_core, ib_cm, iw_cm,
# udp_tunnel, ip6_udp_tunnel, configfs, ...)
MODS="rdma_rxe ib_uverbs ib_core rdma_ucm rdma_cm ib_cm iw_cm ib_umad veth dummy
 crc32_generic crc32_pclmul crc32c_generic crc32c_intel udp_tunnel ip6_udp_tunnel
 inet_diag tcp_diag"
KPKG=${SOFTROCE_KPKG:-}
if [ -z "$KPKG" ]; then
  KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null |
         awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  if [ -z "$KPKG" ] && [ "${SOFTROCE_NO_APT:-0}" != 1 ]; then
    apt-get update -qq >&2; touch "$LAB/.apt-updated"
    KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
  fi
  [ -n "$KPKG" ] || KPKG=$(ls "$LAB/kernel" 2>/dev/null | tail -1)
fi
[ -n "$KPKG" ] || die "cannot determine kernel package"
KDIR=$LAB/kernel/$KPKG
if [ ! -d "$KDIR/boot" ] || [ "$(cat "$KDIR/.mods" 2>/dev/null)" != "$MODS" ]; then
  rm -rf "$KDIR"
  log "downloading and extracting $KPKG (not installed on the host)"
  mkdir -p "$LAB/debs" "$LAB/kernel" && rm -rf "$KDIR.tmp"
  chown _apt "$LAB/debs" 2>/dev/null || true   # lets apt download unsandboxed-warning-free
  ( cd "$LAB/debs" && apt-get -q -o APT::Sandbox::User=root download "$KPKG" >&2 ) ||
    die "apt-get download $KPKG failed"
  dpkg -x "$(ls -t "$LAB"/debs/"$KPKG"_*.deb | head -1)" "$KDIR.tmp" || die "dpkg -x failed"
  # keep only vmlinuz and the modules we need (+ their deps): 400 MB -> ~12 MB
  KV=$(ls "$KDIR.tmp/lib/modules" | head -1); MD=$KDIR.tmp/lib/modules/$KV
  mkdir -p "$KDIR/boot" "$KDIR/lib/modules/$KV"
  cp "$KDIR.tmp/boot/vmlinuz-$KV" "$KDIR.tmp/boot/config-$KV" "$KDIR/boot/"
  cp "$MD"/modules.order "$MD"/modules.builtin* "$KDIR/lib/modules/$KV/" 2>/dev/null || true
  declare -A kseen=()
  keep_mod() {
    local m=$1 f d
    [ -n "${kseen[$m]:-}" ] && return 0; kseen[$m]=1
    f=$(find "$MD/kernel" -name "$m.ko*" -o -name "${m//_/-}.ko*" | head -1)
    [ -n "$f" ] || { log "warning: module $m not in $KPKG"; return 0; }
    mkdir -p "$KDIR/lib/modules/$KV/$(dirname "${f#$MD/}")"
    cp "$f" "$KDIR/lib/modules/$KV/${f#$MD/}"
    for d in $(modinfo -F depends "$f" | tr ',' ' '); do keep_mod "$d"; done
  }
  for m in $MODS; do keep_mod "$m"; done
  echo "$MODS" > "$KDIR/.mods"
  rm -rf "$KDIR.tmp" "$LAB/debs"   # the .deb is re-downloaded if MODS ever changes
fi
KV=$(ls "$KDIR/lib/modules" | head -1)
VMLINUZ=$KDIR/boot/vmlinuz-$KV
[ -f "$VMLINUZ" ] || die "no vmlinuz in $KDIR"

# --------------------------------------------------------------- 3. initramfs
# helper: copy a file plus (for ELF) its shared-library closure into root $1
copy_with_libs() { # root file [dest [skip_root]]: libs already in skip_root are not copied
  local root=$1 f=$2 dest=${3:-$2} skip=${4:-} lib
  mkdir -p "$root$(dirname "$dest")"
  if [ -d "$f" ]; then cp -a "$f" "$root$dest"; return 0; fi
  cp -L "$f" "$root$dest"
  if file -L "$f" | grep -q 'ELF.*dynamic'; then
    for lib in $(ldd "$f" 2>/dev/null | awk '/=> \//{print $3} /^\t\/[^ ]*ld-linux/{print $1}'); do
      [ -e "$root$lib" ] && continue
      [ -n "$skip" ] && [ -e "$skip$lib" ] && continue
      mkdir -p "$root$(dirname "$lib")"; cp -L "$lib" "$root$lib"
    done
  fi
}

BASE=$LAB/build/base-$KV.cpio.gz
# rebuild when this script or the packages copied into the image change
SCRIPT_SUM=$( { cat "$0"; dpkg-query -W rdma-core ibverbs-providers libibverbs1 librdmacm1 \
  ibverbs-utils rdmacm-utils perftest iproute2 busybox-static kmod libc6 bash 2>&1; } |
  sha256sum | cut -c1-16)
if [ ! -f "$BASE" ] || [ "$(cat "$BASE.sum" 2>/dev/null)" != "$SCRIPT_SUM" ]; then
  log "building base initramfs for $KV"
  R=$LAB/build/root-$KV; rm -rf "$R"; mkdir -p "$R"
  mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,lib64,proc,sys,dev,run,tmp,etc,root,guest,var}
  ln -s ../run "$R/var/run"
  cp /bin/busybox "$R/bin/busybox"
  for a in $(/bin/busybox --list); do [ -e "$R/bin/$a" ] || ln -s busybox "$R/bin/$a"; done
  # bash is the guest shell: Debian's static busybox ash always prefers its own
  # applets (ip, modprobe, ...) over PATH, which would hide iproute2 and kmod.
  copy_with_libs "$R" /bin/bash /bin/bash; ln -sf bash "$R/bin/sh"
  # userland: verbs utils, rdma tool, ip, kmod, perftest, rdmacm utils
  for b in /usr/sbin/ip /usr/bin/rdma /usr/sbin/modprobe /usr/sbin/insmod /usr/sbin/lsmod \
           /usr/sbin/rmmod /usr/sbin/depmod /usr/sbin/modinfo \
           /usr/bin/ibv_devices /usr/bin/ibv_devinfo /usr/bin/ibv_rc_pingpong \
           /usr/bin/ibv_uc_pingpong /usr/bin/ibv_ud_pingpong /usr/bin/ibv_srq_pingpong \
           /usr/bin/ibv_xsrq_pingpong /usr/bin/ibv_asyncwatch \
           /usr/bin/rping /usr/bin/ucmatose /usr/bin/udaddy /usr/bin/rdma_server \
           /usr/bin/rdma_client /usr/bin/ib_write_bw /usr/bin/ib_write_lat \
           /usr/bin/ib_read_bw /usr/bin/ib_read_lat /usr/bin/ib_send_bw \
           /usr/bin/ib_send_lat /usr/bin/ib_atomic_bw /usr/bin/ib_atomic_lat; do
    [ -e "$b" ] && copy_with_libs "$R" "$b" "/usr/bin/$(basename "$b")"
  done
  cp /usr/bin/ldd "$R/usr/bin/ldd"                  # a bash script
  ln -sf ../usr/bin/modprobe "$R/sbin/modprobe"   # kernel's request_module helper
  # glibc dlopen()s libgcc_s for pthread_exit/cancel (rping aborts without it)
  copy_with_libs "$R" /lib/x86_64-linux-gnu/libgcc_s.so.1
  # libibverbs provider for rxe (dlopen'ed, so ldd of the tools misses it)
  ML=/usr/lib/x86_64-linux-gnu
  mkdir -p "$R/etc/libibverbs.d"
  cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
  copy_with_libs "$R" "$ML/libibverbs/librxe-rdmav34.so"
  for l in "$ML"/libibverbs/librxe-rdmav*.so; do copy_with_libs "$R" "$l"; done
  [ -d /etc/rdma ] && cp -a /etc/rdma "$R/etc/" || true
  cp /etc/iproute2 -a "$R/etc/" 2>/dev/null || true
  echo 'root:x:0:0:root:/root:/bin/sh' > "$R/etc/passwd"
  echo 'root:x:0:' > "$R/etc/group"
  printf '127.0.0.1 localhost\n' > "$R/etc/hosts"
  # kernel modules: rdma_rxe + rdma_cm stack + veth/dummy + crc32, with deps
  MD=$KDIR/lib/modules/$KV
  declare -A seen=()
  add_mod() {
    local m=$1 f d
    [ -n "${seen[$m]:-}" ] && return 0; seen[$m]=1
    f=$(find "$MD/kernel" -name "$m.ko*" -o -name "${m//_/-}.ko*" | head -1)
    [ -n "$f" ] || { log "warning: module $m not found"; return 0; }
    mkdir -p "$R/lib/modules/$KV/$(dirname "${f#$MD/}")"
    cp "$f" "$R/lib/modules/$KV/${f#$MD/}"
    for d in $(modinfo -F depends "$f" | tr ',' ' '); do add_mod "$d"; done
  }
  for m in $MODS; do add_mod "$m"; done
  cp "$MD"/modules.order "$MD"/modules.builtin* "$R/lib/modules/$KV/" 2>/dev/null || true
  depmod -b "$R" "$KV"
  ( cd "$R/lib/modules/$KV" && find kernel -name '*.ko*' | sed 's#.*/##; s#\.ko.*##' | sort > "$R/etc/softroce-modules.txt" )
  # guest init
  cat > "$R/init" <<'EOF_INIT'
#!/bin/bash
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
ulimit -l unlimited 2>/dev/null
OUT=/dev/ttyS1; [ -e $OUT ] || OUT=/dev/console
stage() { echo "SOFTROCE_STAGE $1 uptime=$(cut -d' ' -f1 /proc/uptime)"; }
finish() { # rc
  printf '\nSOFTROCE_EXIT_CODE=%s\n' "$1" > $OUT; stage done; sync
  poweroff -f; echo o > /proc/sysrq-trigger; sleep 5; }
stage init
hostname softroce
ip link set lo up
[ -f /guest/softroce-run.conf ] && . /guest/softroce-run.conf
TOPO=${TOPO:-pair} MTU=${MTU:-1500}
SETUP_ERR=
for m in crc32_generic veth dummy rdma_rxe ib_uverbs rdma_ucm inet_diag tcp_diag; do
  modprobe $m || SETUP_ERR="$SETUP_ERR modprobe-$m"
done
modprobe crc32_pclmul 2>/dev/null   # optional (needs PCLMUL: -cpu max)
ENV=/guest/softroce-env.sh; : > $ENV
# gid_v2 RXEDEV IPV4 -> index of the RoCE v2 GID holding ::ffff:IPV4
gid_v2() {
  local d=/sys/class/infiniband/$1/ports/1 i want
  want=$(echo "$2" | awk -F. '{printf "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x",$1,$2,$3,$4}')
  for t in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
    for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
      [ "$(cat $d/gids/$i 2>/dev/null)" = "$want" ] &&
        [ "$(cat $d/gid_attrs/types/$i 2>/dev/null)" = "RoCE v2" ] && { echo $i; return 0; }
    done; sleep 0.2
  done; echo -1; return 1; }
# All rxe/veth devices live in the initial netns: the 6.1 rxe driver only
# opens its UDP/4791 socket and looks up routes in init_net, so rxe on a
# netdev inside another netns transmits nothing (verified; see README).
# With both ends of a veth pair in one netns the kernel would deliver
# A->B traffic over 'lo' (rxe then drops it: no rxe on lo), so policy routing
# forces each pair's traffic onto its own veth wire:
#  - rxe (and ib_core's ARP/neighbour resolution for a QP's path) bind the
#    route lookup to the GID's netdev (oif), which already skips the 'local'
#    route of the peer's address; what breaks is the receive side, which
#    drops packets (incl. ARP requests) whose *source* is a local address
#    unless accept_local=1 (and rp_filter=0): that is the essential bit.
#  - so that plain IP traffic bound to IP_A (ping -I, TCP with a bound
#    source) also crosses the wire: the 'local' rule moves from pref 0 to
#    pref 1000, pref 10 sends packets arriving on a test veth to 'local',
#    pref 20 routes IP_A->IP_B via veth A (per-end table).
# Traffic between addresses of different links has no route over a wire,
# like a real network without a router between those subnets.
routing_init() {
  for k in all default lo; do
    sysctl -qw net.ipv4.conf.$k.rp_filter=0 net.ipv4.conf.$k.accept_local=1; done
  ip rule add pref 1000 lookup local && ip rule del pref 0
}
TBL=100
link() { # NAME_A NAME_B IP_A IP_B RXE_A RXE_B ENV_KEY [PREFIX_LEN, default 24]
  ip link add $1 type veth peer name $2 || return 1
  for d in $1 $2; do
    sysctl -qw net.ipv4.conf.$d.rp_filter=0 net.ipv4.conf.$d.accept_local=1
    sysctl -qw net.ipv6.conf.$d.disable_ipv6=1   # keep the GID table to 2 entries
    ip rule add pref 10 iif $d lookup local
  done
  local len=${8:-24}
  ip addr add $3/$len dev $1 && ip addr add $4/$len dev $2 || return 1
  ip link set $1 mtu $MTU && ip link set $2 mtu $MTU || return 1
  ip link set $1 up && ip link set $2 up || return 1
  TBL=$((TBL+1)); ip route add $4/32 dev $1 src $3 table $TBL || return 1
  ip rule add pref 20 from $3 to $4 lookup $TBL
  TBL=$((TBL+1)); ip route add $3/32 dev $2 src $4 table $TBL || return 1
  ip rule add pref 20 from $4 to $3 lookup $TBL
  rdma link add $5 type rxe netdev $1 && rdma link add $6 type rxe netdev $2 || return 1
  echo "export SOFTROCE_${7}_A_DEV=$5 SOFTROCE_${7}_A_IP=$3 SOFTROCE_${7}_A_NETDEV=$1" >> $ENV
  echo "export SOFTROCE_${7}_B_DEV=$6 SOFTROCE_${7}_B_IP=$4 SOFTROCE_${7}_B_NETDEV=$2" >> $ENV
  echo "export SOFTROCE_${7}_A_GID=$(gid_v2 $5 $3) SOFTROCE_${7}_B_GID=$(gid_v2 $6 $4)" >> $ENV
  echo "export SOFTROCE_${7}_PREFIX=$len" >> $ENV
}
[ "$TOPO" != none ] && routing_init
case $TOPO in
  none) ;;
  pair)
    link sr0a sr0b 198.18.0.1 198.18.0.2 rxe_a rxe_b PAIR || SETUP_ERR="$SETUP_ERR pair" ;;
  dual)  # pair plus a second cable between the same two nodes (rails)
    link sr0a sr0b 198.18.0.1 198.18.0.2 rxe_a rxe_b PAIR || SETUP_ERR="$SETUP_ERR pair"
    link sr1a sr1b 198.18.4.1 198.18.4.2 rxe_a1 rxe_b1 PAIR1 || SETUP_ERR="$SETUP_ERR pair1" ;;
  mesh3)
    link srab srba 198.18.1.1 198.18.1.2 rxe_ab rxe_ba AB || SETUP_ERR="$SETUP_ERR A-B"
    link srac srca 198.18.2.1 198.18.2.3 rxe_ac rxe_ca AC || SETUP_ERR="$SETUP_ERR A-C"
    link srbc srcb 198.18.3.2 198.18.3.3 rxe_bc rxe_cb BC || SETUP_ERR="$SETUP_ERR B-C"
    # a line A-B-C beside the triangle (no A-C cable): /30 cables, as point-to-point links are
    link srlab srlba 198.18.5.1 198.18.5.2 rxe_lab rxe_lba LINE_AB 30 || SETUP_ERR="$SETUP_ERR line-A-B"
    link srlbc srlcb 198.18.5.5 198.18.5.6 rxe_lbc rxe_lcb LINE_BC 30 || SETUP_ERR="$SETUP_ERR line-B-C"
    # ... and D beyond C (a line of four: A-D crosses two relay hosts)
    link srlcd srldc 198.18.5.9 198.18.5.10 rxe_lcd rxe_ldc LINE_CD 30 || SETUP_ERR="$SETUP_ERR line-C-D"
    # Both ends of a line cable are local interfaces on one subnet here. nccl-mesh takes such
    # interfaces for the two halves of one port: with arp_ignore=1 it binds each socket to its
    # own end (as on separate hosts); with 0 it warns once per process (a WARN that the suite's
    # clean-run checks count). The triangle's links keep the recipe's defaults.
    for d in srlab srlba srlbc srlcb srlcd srldc; do
      sysctl -qw net.ipv4.conf.$d.arp_ignore=1 net.ipv4.conf.$d.arp_announce=2
    done ;;
esac
grep -q -- '=-1' $ENV && SETUP_ERR="$SETUP_ERR no-RoCEv2-IPv4-GID"
echo "export SOFTROCE_TOPO=$TOPO SOFTROCE_MTU=$MTU" >> $ENV
stage ready
. $ENV
cd /guest
echo "SOFTROCE_OUTPUT_BEGIN" > $OUT
if [ -n "$SETUP_ERR" ]; then
  echo "softroce guest setup failed:$SETUP_ERR" > $OUT; dmesg | tail -20 > $OUT; rc=125
elif [ -f /guest/softroce-cmd.sh ]; then
  /bin/bash /guest/softroce-cmd.sh > $OUT 2>&1 < /dev/null; rc=$?
else
  echo "no /guest/softroce-cmd.sh" > $OUT; rc=125
fi
finish $rc
EOF_INIT
  chmod 755 "$R/init"
  ( cd "$R" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1 ) > "$BASE.tmp"
  mv "$BASE.tmp" "$BASE"; echo "$SCRIPT_SUM" > "$BASE.sum"
  log "base initramfs: $(du -h "$BASE" | cut -f1) ($(du -sh "$R" | cut -f1) unpacked), $(elapsed)s"
fi
if [ "$SETUP_ONLY" = 1 ]; then log "setup done in $(elapsed)s (kernel $KV)"; exit 0; fi
flock -u 9   # build done; several VMs may run at once

# ------------------------------------------------- 4. per-run payload + boot
RUN=$(mktemp -d "$LAB/runs/run.XXXXXX" 2>/dev/null || { mkdir -p "$LAB/runs"; mktemp -d "$LAB/runs/run.XXXXXX"; })
P=$RUN/payload; mkdir -p "$P/guest"
for f in "${FILES[@]}"; do
  [ -e "$f" ] || die "no such file: $f"
  copy_with_libs "$P" "$(readlink -f "$f")" "/guest/$(basename "$f")" "$LAB/build/root-$KV"
done
{ for e in "${GUEST_ENV[@]}"; do printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"; done
  printf '%s\n' "$CMD"; } > "$P/guest/softroce-cmd.sh"
printf 'TOPO=%s\nMTU=%s\n' "$TOPO" "$MTU" > "$P/guest/softroce-run.conf"
( cd "$P" && find . | LC_ALL=C sort | cpio -o -H newc --quiet | gzip -1 ) > "$RUN/payload.cpio.gz"
cat "$BASE" "$RUN/payload.cpio.gz" > "$RUN/initrd.img"

CONSOLE=$RUN/console.log OUTPUT=$RUN/output.log
: > "$CONSOLE"; : > "$OUTPUT"
log "booting $KV under TCG (mem $MEM, smp $SMP, topology $TOPO, limit ${TIMEOUT}s); run dir $RUN"
TAILPID=
if [ "$VERBOSE" = 1 ]; then tail -n +1 -F "$CONSOLE" >&2 2>/dev/null & TAILPID=$!; fi
TB=$(date +%s.%N)
( while sleep 0.2; do   # host-side wall time from qemu start to guest "ready"
    if grep -q 'SOFTROCE_STAGE ready' "$CONSOLE" 2>/dev/null; then
      awk -v a="$TB" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}' > "$RUN/ready.wall"; break; fi
  done ) & WATCHPID=$!
set +e
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 -accel tcg,thread=multi -cpu max -m "$MEM" -smp "$SMP" \
  -kernel "$VMLINUZ" -initrd "$RUN/initrd.img" \
  -append "console=ttyS0 panic=-1 loglevel=$([ "$VERBOSE" = 1 ] && echo 7 || echo 4) rdinit=/init mitigations=off tsc=unstable" \
  -nic none -display none -monitor none -no-reboot \
  -serial "file:$CONSOLE" -serial "file:$OUTPUT" < /dev/null > "$RUN/qemu.log" 2>&1
qrc=$?
set -e
[ -n "$TAILPID" ] && { sleep 0.5; kill "$TAILPID" 2>/dev/null || true; }
kill "$WATCHPID" 2>/dev/null || true; wait "$WATCHPID" 2>/dev/null || true
QWALL=$(awk -v a="$TB" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
tr -d '\r' < "$OUTPUT" | sed '0,/^SOFTROCE_OUTPUT_BEGIN$/d; /^SOFTROCE_EXIT_CODE=/,$d' | sed '$ { /^$/d }'
RC=$(tr -d '\r' < "$OUTPUT" | sed -n 's/^SOFTROCE_EXIT_CODE=\([0-9]*\)$/\1/p' | tail -1)
READY=$(tr -d '\r' < "$CONSOLE" | sed -n 's/^SOFTROCE_STAGE ready uptime=//p' | tail -1)
if [ -z "$RC" ]; then
  if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then RC=124; log "TIMEOUT after ${TIMEOUT}s"
  else RC=125; log "guest did not report an exit code (qemu rc $qrc)"; fi
  tail -n 40 "$CONSOLE" | tr -d '\r' >&2; cat "$RUN/qemu.log" >&2
  KEEP=1
fi
log "guest ready at uptime ${READY:-?}s (wall $(cat "$RUN/ready.wall" 2>/dev/null || echo ?)s after qemu start); VM wall ${QWALL}s; exit code $RC; script wall $(elapsed)s"
if [ "$KEEP" = 1 ] || [ "$RC" != 0 ]; then log "run dir kept: $RUN"; else rm -rf "$RUN"; fi
exit "$RC"
