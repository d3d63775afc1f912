#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""mesh-topo: build switchless meshes of network namespaces on one machine.

Every host is a network namespace named PREFIX+HOST. A management network (one bridge in the
namespace PREFIX+"mgmt", one veth leg "mgmt0" per host) carries bootstrap traffic; every cable
is its own veth pair and its own IPv4 subnet. The description format is documented in README.md
next to this file. Usable as a command (see `mesh-topo --help`) and as a module from the tests.

Safety: every address must lie in 198.18.0.0/15 (the benchmarking range), namespace prefixes
must start with "nm-", and nothing is created in the calling namespace.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass, field

ALLOWED_NET = ipaddress.ip_network("198.18.0.0/15")
DEFAULT_MGMT = "198.19.255.0/24"
DEFAULT_PREFIX = "nm-"
MGMT_IF = "mgmt0"
BRIDGE = "br0"
IFNAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,14}$")  # IFNAMSIZ-1 = 15 characters
HOST_RE = re.compile(r"^[a-z][a-z0-9_]{0,11}$")             # bridge-side leg is "m-" + host
PREFIX_RE = re.compile(r"^nm-[A-Za-z0-9_.-]{0,40}$")

# Written in every namespace before any interface exists (defaults apply to new devices).
SYSCTLS = [
    ("net/ipv6/conf/all/disable_ipv6", "1"),      # no link-local chatter on the counters
    ("net/ipv6/conf/default/disable_ipv6", "1"),
    ("net/ipv4/conf/all/rp_filter", "0"),
    ("net/ipv4/conf/default/rp_filter", "0"),
    ("net/ipv4/conf/all/arp_ignore", "1"),        # answer ARP only on the interface that owns
    ("net/ipv4/conf/default/arp_ignore", "1"),    # the address, like separate NICs would
    ("net/ipv4/conf/all/arp_announce", "2"),
    ("net/ipv4/conf/default/arp_announce", "2"),
    ("net/ipv4/ip_forward", "0"),                 # hosts never relay: no common subnet, no path
]


class TopoError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# Description
# ----------------------------------------------------------------------------------------------

@dataclass
class Endpoint:
    host: str
    ifname: str
    addr: ipaddress.IPv4Interface | None  # address with prefix length, None when unconfigured


@dataclass
class Cable:
    index: int
    a: Endpoint
    b: Endpoint
    mtu: int | None = None

    @property
    def name(self) -> str:
        return f"{self.a.host}:{self.a.ifname}-{self.b.host}:{self.b.ifname}"

    def end(self, host: str) -> Endpoint:
        return self.a if self.a.host == host else self.b

    def other(self, host: str) -> Endpoint:
        return self.b if self.a.host == host else self.a


@dataclass
class Stub:
    """A veth whose peer stays unconfigured (the peer lives in the management namespace)."""
    index: int
    end: Endpoint
    peer_up: bool = True
    mtu: int | None = None

    @property
    def peer_name(self) -> str:
        return f"s{self.index}"


@dataclass
class Lan:
    """A shared segment: one bridge in the management namespace, one veth leg per end, every end
    on one subnet. Models a cable between DGX Spark ports, each port being two PCIe functions
    (two netdevs) addressed in the same subnet: several ends of one host on one segment."""
    index: int
    name: str
    ends: list  # list[Endpoint]
    mtu: int | None = None

    @property
    def bridge(self) -> str:
        return f"l-{self.name}"

    def leg(self, i: int) -> str:
        return f"q{self.index}_{i}"

    def hosts(self) -> list[str]:
        return sorted({e.host for e in self.ends})

    @property
    def network(self):
        return self.ends[0].addr.network


@dataclass
class Host:
    name: str
    index: int
    mgmt: ipaddress.IPv4Interface


@dataclass
class Iface:
    """One interface of one host as the description defines it."""
    host: str
    ifname: str
    kind: str                 # "mgmt", "cable", "stub", "lan"
    addrs: list = field(default_factory=list)  # list[IPv4Interface]
    peer_host: str | None = None
    cable: Cable | None = None
    lan: Lan | None = None


def _parse_addr(text: str, where: str) -> ipaddress.IPv4Interface:
    try:
        itf = ipaddress.IPv4Interface(text)
    except ValueError as e:
        raise TopoError(f"{where}: bad address {text!r}: {e}") from None
    if "/" not in text:
        raise TopoError(f"{where}: address {text!r} needs a prefix length (/24, /30, /31 ...)")
    if itf.ip not in ALLOWED_NET or not itf.network.subnet_of(ALLOWED_NET):
        raise TopoError(f"{where}: {text} is outside {ALLOWED_NET}; only that range is allowed")
    if itf.network.prefixlen < 31 and itf.ip in (itf.network.network_address,
                                                 itf.network.broadcast_address):
        raise TopoError(f"{where}: {text} is the network or broadcast address of its subnet")
    return itf


def _parse_endpoint(token: str, where: str, need_addr: bool) -> Endpoint:
    m = re.match(r"^([^:=\s]+):([^:=\s]+)(?:=(\S+))?$", token)
    if not m:
        raise TopoError(f"{where}: expected HOST:IFNAME=ADDR/PREFIX, got {token!r}")
    host, ifname, addr = m.groups()
    if not IFNAME_RE.match(ifname):
        raise TopoError(f"{where}: bad interface name {ifname!r} (1-15 characters, letter first)")
    if need_addr and addr is None:
        raise TopoError(f"{where}: {token!r} needs an address (HOST:IFNAME=ADDR/PREFIX)")
    return Endpoint(host, ifname, _parse_addr(addr, where) if addr else None)


def _parse_options(tokens: list[str], allowed: set[str], where: str) -> dict[str, str]:
    opts = {}
    for t in tokens:
        if "=" not in t:
            raise TopoError(f"{where}: unexpected {t!r}")
        k, v = t.split("=", 1)
        if k not in allowed:
            raise TopoError(f"{where}: unknown option {k!r} (allowed: {', '.join(sorted(allowed))})")
        opts[k] = v
    return opts


def _parse_mtu(v: str | None, where: str) -> int | None:
    if v is None:
        return None
    if not v.isdigit() or not 68 <= int(v) <= 65535:
        raise TopoError(f"{where}: bad mtu {v!r}")
    return int(v)


class Topology:
    def __init__(self, path: str, prefix: str = DEFAULT_PREFIX):
        if not PREFIX_RE.match(prefix):
            raise TopoError(f"prefix {prefix!r} must match {PREFIX_RE.pattern}")
        self.path = path
        self.name = os.path.splitext(os.path.basename(path))[0]
        self.prefix = prefix
        self.mgmt_net = ipaddress.IPv4Network(DEFAULT_MGMT)
        self.hosts: list[Host] = []
        self.cables: list[Cable] = []
        self.stubs: list[Stub] = []
        self.lans: list[Lan] = []
        self.extra_addrs: list[Endpoint] = []
        self.gateway: ipaddress.IPv4Interface | None = None  # the management network's router
        with open(path) as f:
            self._parse(f.read())
        self._validate()

    # -- parsing --------------------------------------------------------------------------------

    def _parse(self, text: str) -> None:
        host_lines = []
        gw_line = None
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            where = f"{self.path}:{lineno}"
            tok = line.split()
            kw, args = tok[0], tok[1:]
            if kw == "mgmt":
                if len(args) != 1:
                    raise TopoError(f"{where}: usage: mgmt SUBNET")
                try:
                    net = ipaddress.IPv4Network(args[0], strict=True)
                except ValueError as e:
                    raise TopoError(f"{where}: bad subnet {args[0]!r}: {e}") from None
                if not net.subnet_of(ALLOWED_NET):
                    raise TopoError(f"{where}: {net} is outside {ALLOWED_NET}")
                if self.hosts:
                    raise TopoError(f"{where}: 'mgmt' must come before the first 'host'")
                self.mgmt_net = net
            elif kw == "gateway":
                if len(args) != 1:
                    raise TopoError(f"{where}: usage: gateway ADDR")
                gw_line = (where, args[0])
            elif kw == "host":
                if not args:
                    raise TopoError(f"{where}: usage: host NAME [mgmt=ADDR]")
                name = args[0]
                if not HOST_RE.match(name) or name == "mgmt":
                    raise TopoError(f"{where}: bad host name {name!r} "
                                    f"(lower case, 1-12 characters, not 'mgmt')")
                opts = _parse_options(args[1:], {"mgmt"}, where)
                host_lines.append((where, name, opts.get("mgmt")))
                self.hosts.append(Host(name, len(self.hosts), None))  # mgmt filled below
            elif kw == "cable":
                if len(args) < 2:
                    raise TopoError(f"{where}: usage: cable HOST:IF=ADDR/P HOST:IF=ADDR/P [mtu=N]")
                a = _parse_endpoint(args[0], where, True)
                b = _parse_endpoint(args[1], where, True)
                opts = _parse_options(args[2:], {"mtu"}, where)
                if a.addr.network != b.addr.network:
                    raise TopoError(f"{where}: the two ends are on different subnets "
                                    f"({a.addr.with_prefixlen} vs {b.addr.with_prefixlen})")
                if a.host == b.host:
                    raise TopoError(f"{where}: a cable joins two different hosts")
                self.cables.append(Cable(len(self.cables), a, b, _parse_mtu(opts.get("mtu"), where)))
            elif kw == "stub":
                if not args:
                    raise TopoError(f"{where}: usage: stub HOST:IF[=ADDR/P] [peer=up|down] [mtu=N]")
                e = _parse_endpoint(args[0], where, False)
                opts = _parse_options(args[1:], {"peer", "mtu"}, where)
                if opts.get("peer", "up") not in ("up", "down"):
                    raise TopoError(f"{where}: peer= must be up or down")
                self.stubs.append(Stub(len(self.stubs), e, opts.get("peer", "up") == "up",
                                       _parse_mtu(opts.get("mtu"), where)))
            elif kw == "lan":
                if len(args) < 3:
                    raise TopoError(f"{where}: usage: lan NAME HOST:IF=ADDR/P HOST:IF=ADDR/P... [mtu=N]")
                name = args[0]
                if not re.match(r"^[a-z0-9]{1,10}$", name):
                    raise TopoError(f"{where}: bad lan name {name!r} (1-10 of a-z0-9)")
                ends = [_parse_endpoint(t, where, True) for t in args[1:] if ":" in t]
                opts = _parse_options([t for t in args[1:] if ":" not in t], {"mtu"}, where)
                nets = {e.addr.network for e in ends}
                if len(nets) != 1:
                    raise TopoError(f"{where}: the ends of a lan share one subnet "
                                    f"({', '.join(e.addr.with_prefixlen for e in ends)})")
                if len({e.host for e in ends}) < 2:
                    raise TopoError(f"{where}: a lan joins at least two hosts")
                if any(l.name == name for l in self.lans):
                    raise TopoError(f"{where}: lan {name!r} defined twice")
                self.lans.append(Lan(len(self.lans), name, ends, _parse_mtu(opts.get("mtu"), where)))
            elif kw == "addr":
                if len(args) != 1:
                    raise TopoError(f"{where}: usage: addr HOST:IF=ADDR/P")
                self.extra_addrs.append(_parse_endpoint(args[0], where, True))
            else:
                raise TopoError(f"{where}: unknown keyword {kw!r} "
                                f"(mgmt, gateway, host, cable, stub, lan, addr)")
        # Management addresses: explicit, or network + index + 1 in declaration order.
        for (where, name, explicit), host in zip(host_lines, self.hosts):
            if explicit:
                addr = ipaddress.IPv4Interface(f"{explicit.split('/')[0]}/{self.mgmt_net.prefixlen}")
                if addr.ip not in self.mgmt_net:
                    raise TopoError(f"{where}: mgmt={explicit} is outside {self.mgmt_net}")
            else:
                addr = ipaddress.IPv4Interface(
                    f"{self.mgmt_net.network_address + host.index + 1}/{self.mgmt_net.prefixlen}")
            _parse_addr(addr.with_prefixlen, where)
            host.mgmt = addr
        if gw_line is not None:
            where, text = gw_line
            gw = ipaddress.IPv4Interface(f"{text.split('/')[0]}/{self.mgmt_net.prefixlen}")
            if gw.ip not in self.mgmt_net or gw.ip in (self.mgmt_net.network_address,
                                                       self.mgmt_net.broadcast_address):
                raise TopoError(f"{where}: gateway {text} is not a host address of {self.mgmt_net}")
            if any(h.mgmt.ip == gw.ip for h in self.hosts):
                raise TopoError(f"{where}: gateway {text} is a host's management address")
            self.gateway = gw

    def _validate(self) -> None:
        names = [h.name for h in self.hosts]
        if not names:
            raise TopoError(f"{self.path}: no hosts")
        if len(set(names)) != len(names):
            raise TopoError(f"{self.path}: duplicate host names")
        mg = [h.mgmt.ip for h in self.hosts]
        if len(set(mg)) != len(mg):
            raise TopoError(f"{self.path}: duplicate management addresses")
        for ep in self._all_endpoints():
            if ep.host not in names:
                raise TopoError(f"{self.path}: unknown host {ep.host!r}")
        # Interface names unique per host; extra addresses on existing interfaces.
        seen: dict[tuple[str, str], str] = {}
        for c in self.cables:
            for ep in (c.a, c.b):
                self._claim(seen, ep, "cable")
        for s in self.stubs:
            self._claim(seen, s.end, "stub")
        for l in self.lans:
            for ep in l.ends:
                self._claim(seen, ep, "lan")
        for ep in self.extra_addrs:
            if (ep.host, ep.ifname) not in seen and ep.ifname != MGMT_IF:
                raise TopoError(f"{self.path}: addr {ep.host}:{ep.ifname}: no such interface")
        # Subnets: no two interfaces of one host overlap; cable subnets are unique mesh-wide.
        for h in self.hosts:
            nets = [(i.ifname, a.network) for i in self.ifaces(h.name) for a in i.addrs]
            lan_of = {i.ifname: i.lan.name for i in self.ifaces(h.name) if i.lan}
            for x in range(len(nets)):
                for y in range(x + 1, len(nets)):
                    same_lan = lan_of.get(nets[x][0]) is not None and \
                        lan_of.get(nets[x][0]) == lan_of.get(nets[y][0])
                    if nets[x][1].overlaps(nets[y][1]) and not same_lan:
                        raise TopoError(f"{self.path}: host {h.name}: {nets[x][0]} {nets[x][1]} "
                                        f"overlaps {nets[y][0]} {nets[y][1]}")
        links = [(c.name, c.a.addr.network) for c in self.cables] + \
            [(f"lan {l.name}", l.network) for l in self.lans]
        for x in range(len(links)):
            for y in range(x + 1, len(links)):
                n1, n2 = links[x][1], links[y][1]
                if n1.overlaps(n2):
                    raise TopoError(f"{self.path}: cables {links[x][0]} and "
                                    f"{links[y][0]} share subnet space ({n1}, {n2})")
            if links[x][1].overlaps(self.mgmt_net):
                raise TopoError(f"{self.path}: cable {links[x][0]} overlaps the "
                                f"management subnet {self.mgmt_net}")

    def _claim(self, seen, ep: Endpoint, what: str) -> None:
        key = (ep.host, ep.ifname)
        if ep.ifname == MGMT_IF or key in seen:
            raise TopoError(f"{self.path}: interface {ep.host}:{ep.ifname} defined twice")
        seen[key] = what

    def _all_endpoints(self):
        for c in self.cables:
            yield c.a
            yield c.b
        for s in self.stubs:
            yield s.end
        for l in self.lans:
            yield from l.ends
        yield from self.extra_addrs

    # -- queries --------------------------------------------------------------------------------

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise TopoError(f"{self.path}: no host {name!r} (hosts: {', '.join(self.host_names())})")

    def host_names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def ns(self, host: str) -> str:
        self.host(host)
        return self.prefix + host

    @property
    def mgmt_ns(self) -> str:
        return self.prefix + "mgmt"

    def all_ns(self) -> list[str]:
        return [self.ns(h) for h in self.host_names()] + [self.mgmt_ns]

    def mgmt_addr(self, host: str) -> str:
        return str(self.host(host).mgmt.ip)

    def cables_between(self, x: str, y: str) -> list[Cable]:
        return [c for c in self.cables if {c.a.host, c.b.host} == {x, y}]

    def cables_of(self, host: str) -> list[Cable]:
        return [c for c in self.cables if host in (c.a.host, c.b.host)]

    def lans_between(self, x: str, y: str) -> list[Lan]:
        return [l for l in self.lans if x in l.hosts() and y in l.hosts()]

    def adjacent(self, x: str, y: str) -> bool:
        return bool(self.cables_between(x, y) or self.lans_between(x, y))

    def ifaces(self, host: str) -> list[Iface]:
        """Every interface the description gives `host`, with all of its addresses."""
        h = self.host(host)
        out = [Iface(host, MGMT_IF, "mgmt", [h.mgmt])]
        for c in self.cables_of(host):
            e = c.end(host)
            out.append(Iface(host, e.ifname, "cable", [e.addr], c.other(host).host, c))
        for s in self.stubs:
            if s.end.host == host:
                out.append(Iface(host, s.end.ifname, "stub", [s.end.addr] if s.end.addr else []))
        for l in self.lans:
            others = [h for h in l.hosts() if h != host]
            for e in l.ends:
                if e.host == host:
                    out.append(Iface(host, e.ifname, "lan", [e.addr],
                                     others[0] if len(others) == 1 else None, lan=l))
        by_name = {i.ifname: i for i in out}
        for ep in self.extra_addrs:
            if ep.host == host:
                by_name[ep.ifname].addrs.append(ep.addr)
        return out

    def iface(self, host: str, ifname: str) -> Iface:
        for i in self.ifaces(host):
            if i.ifname == ifname:
                return i
        raise TopoError(f"{self.path}: host {host} has no interface {ifname}")

    def describe(self) -> dict:
        return {
            "topology": self.name,
            "file": os.path.abspath(self.path),
            "prefix": self.prefix,
            "mgmt": {"subnet": str(self.mgmt_net), "namespace": self.mgmt_ns, "bridge": BRIDGE,
                     "ifname": MGMT_IF,
                     "gateway": str(self.gateway.ip) if self.gateway else None},
            "hosts": [{
                "name": h.name, "namespace": self.ns(h.name), "mgmt": str(h.mgmt.ip),
                "interfaces": [{"ifname": i.ifname, "kind": i.kind,
                                "addrs": [a.with_prefixlen for a in i.addrs],
                                "peer_host": i.peer_host,
                                "cable": i.cable.name if i.cable else None}
                               for i in self.ifaces(h.name)],
            } for h in self.hosts],
            "cables": [{
                "name": c.name, "subnet": str(c.a.addr.network), "mtu": c.mtu,
                "ends": [{"host": e.host, "ifname": e.ifname, "addr": e.addr.with_prefixlen}
                         for e in (c.a, c.b)],
            } for c in self.cables],
            "stubs": [{"host": s.end.host, "ifname": s.end.ifname,
                       "addr": s.end.addr.with_prefixlen if s.end.addr else None,
                       "peer": f"{self.mgmt_ns}:{s.peer_name}",
                       "peer_up": s.peer_up} for s in self.stubs],
            "lans": [{"name": l.name, "subnet": str(l.network), "mtu": l.mtu,
                      "bridge": f"{self.mgmt_ns}:{l.bridge}",
                      "ends": [{"host": e.host, "ifname": e.ifname, "addr": e.addr.with_prefixlen}
                               for e in l.ends]} for l in self.lans],
        }

    # -- lifecycle ------------------------------------------------------------------------------

    def existing_ns(self) -> list[str]:
        mine = set(self.all_ns())
        return [n for n in list_netns() if n in mine]

    def up(self, verbose: bool = False) -> None:
        check_root()
        already = self.existing_ns()
        if already:
            raise TopoError(f"namespaces already exist: {' '.join(already)} "
                            f"(run 'mesh-topo down' first, or use another --prefix)")
        try:
            self._up(verbose)
        except BaseException:
            self.down()
            raise

    def _up(self, verbose: bool) -> None:
        run = lambda *a: sh(list(a), verbose=verbose)  # noqa: E731
        for ns in self.all_ns():
            run("ip", "netns", "add", ns)
            script = "".join(f"echo {v} > /proc/sys/{k}; " for k, v in SYSCTLS)
            run("ip", "netns", "exec", ns, "sh", "-ec", script)
            run("ip", "-n", ns, "link", "set", "lo", "up")
        # Management network: a bridge in its own namespace, one leg per host.
        run("ip", "-n", self.mgmt_ns, "link", "add", BRIDGE, "type", "bridge", "stp_state", "0",
            "forward_delay", "0")
        run("ip", "-n", self.mgmt_ns, "link", "set", BRIDGE, "up")
        if self.gateway:  # the bridge answers as the management network's router
            add_addr(run, self.mgmt_ns, BRIDGE, self.gateway)
        for h in self.hosts:
            ns, leg = self.ns(h.name), f"m-{h.name}"
            run("ip", "link", "add", MGMT_IF, "netns", ns, "type", "veth",
                "peer", "name", leg, "netns", self.mgmt_ns)
            run("ip", "-n", self.mgmt_ns, "link", "set", leg, "master", BRIDGE, "up")
            add_addr(run, ns, MGMT_IF, h.mgmt)
            run("ip", "-n", ns, "link", "set", MGMT_IF, "up")
            if self.gateway:  # as on a real server: the default route leaves by management
                run("ip", "-n", ns, "route", "add", "default", "via", str(self.gateway.ip),
                    "dev", MGMT_IF)
        # Cables: one veth pair each, created directly inside the two namespaces.
        for c in self.cables:
            run("ip", "link", "add", c.a.ifname, "netns", self.ns(c.a.host), "type", "veth",
                "peer", "name", c.b.ifname, "netns", self.ns(c.b.host))
            for e in (c.a, c.b):
                if c.mtu:
                    run("ip", "-n", self.ns(e.host), "link", "set", e.ifname, "mtu", str(c.mtu))
                add_addr(run, self.ns(e.host), e.ifname, e.addr)
        # Stubs: the peer sits unconfigured (and unattached) in the management namespace.
        for s in self.stubs:
            ns = self.ns(s.end.host)
            run("ip", "link", "add", s.end.ifname, "netns", ns, "type", "veth",
                "peer", "name", s.peer_name, "netns", self.mgmt_ns)
            if s.mtu:
                run("ip", "-n", ns, "link", "set", s.end.ifname, "mtu", str(s.mtu))
            if s.end.addr:
                add_addr(run, ns, s.end.ifname, s.end.addr)
            if s.peer_up:
                run("ip", "-n", self.mgmt_ns, "link", "set", s.peer_name, "up")
        # Lans: a bridge in the management namespace, one veth leg per end.
        for l in self.lans:
            run("ip", "-n", self.mgmt_ns, "link", "add", "name", l.bridge, "type", "bridge",
                "stp_state", "0", "forward_delay", "0")
            run("ip", "-n", self.mgmt_ns, "link", "set", l.bridge, "up")
            for i, e in enumerate(l.ends):
                ns = self.ns(e.host)
                run("ip", "link", "add", "name", e.ifname, "netns", ns, "type", "veth",
                    "peer", "name", l.leg(i), "netns", self.mgmt_ns)
                if l.mtu:
                    run("ip", "-n", ns, "link", "set", e.ifname, "mtu", str(l.mtu))
                    run("ip", "-n", self.mgmt_ns, "link", "set", l.leg(i), "mtu", str(l.mtu))
                run("ip", "-n", self.mgmt_ns, "link", "set", l.leg(i), "master", l.bridge, "up")
                add_addr(run, ns, e.ifname, e.addr)
                run("ip", "-n", ns, "link", "set", e.ifname, "up")
        for ep in self.extra_addrs:
            add_addr(run, self.ns(ep.host), ep.ifname, ep.addr)
        for c in self.cables:
            for e in (c.a, c.b):
                run("ip", "-n", self.ns(e.host), "link", "set", e.ifname, "up")
        for s in self.stubs:
            run("ip", "-n", self.ns(s.end.host), "link", "set", s.end.ifname, "up")
        self.wait_operstate()

    def expected_up(self, host: str) -> list[str]:
        """Interfaces of `host` that carry a link once the topology is up."""
        down = {s.end.ifname for s in self.stubs if s.end.host == host and not s.peer_up}
        return [i.ifname for i in self.ifaces(host) if i.ifname not in down]

    def wait_operstate(self, timeout: float = 10.0) -> None:
        """Operstate (hence IFF_RUNNING, which the plugin checks) follows 'link set up' only
        after the kernel's linkwatch runs, up to a second later: wait for it."""
        deadline = time.monotonic() + timeout
        while True:
            late = [f"{h}:{i}" for h in self.host_names()
                    for st in [read_ns_counters(self.ns(h))] for i in self.expected_up(h)
                    if st.get(i, {}).get("operstate") != "up"]
            if not late:
                return
            if time.monotonic() > deadline:
                raise TopoError(f"links not up after {timeout:.0f}s: {' '.join(late)}")
            time.sleep(0.1)

    def down(self, verbose: bool = False) -> list[str]:
        """Kill what runs in the namespaces and delete them; fine when nothing exists."""
        return delete_netns(self.existing_ns(), verbose)

    # -- inspection -----------------------------------------------------------------------------

    def counters(self) -> list[dict]:
        """One row per interface (lo excluded) of every host namespace, from sysfs."""
        rows = []
        for h in self.hosts:
            known = {i.ifname: i for i in self.ifaces(h.name)}
            for name, st in read_ns_counters(self.ns(h.name)).items():
                if name == "lo":
                    continue
                i = known.get(name)
                rows.append({"host": h.name, "ifname": name,
                             "kind": i.kind if i else "other",
                             "peer_host": i.peer_host if i else None,
                             "cable": i.cable.name if i and i.cable else
                             (f"lan {i.lan.name}" if i and i.lan else None), **st})
        return rows

    def live(self, host: str) -> str:
        return sh(["ip", "-n", self.ns(host), "-br", "addr"], capture=True).stdout


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------

def check_root() -> None:
    if os.geteuid() != 0:
        raise TopoError("mesh-topo needs root (network namespaces)")


def sh(argv: list[str], verbose: bool = False, capture: bool = False, check: bool = True):
    if verbose:
        print("+ " + " ".join(argv), file=sys.stderr)
    p = subprocess.run(argv, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise TopoError(f"command failed ({p.returncode}): {' '.join(argv)}: {p.stderr.strip()}")
    return p


def add_addr(run, ns: str, ifname: str, addr: ipaddress.IPv4Interface) -> None:
    argv = ["ip", "-n", ns, "addr", "add", addr.with_prefixlen]
    if addr.network.prefixlen < 31:
        argv += ["brd", "+"]
    run(*argv, "dev", ifname)


def list_netns() -> list[str]:
    try:
        return sorted(os.listdir("/run/netns"))
    except FileNotFoundError:
        return []


def delete_netns(names: list[str], verbose: bool = False) -> list[str]:
    """SIGKILL every process inside the namespaces (we started them), then delete them."""
    for ns in names:
        p = sh(["ip", "netns", "pids", ns], capture=True, check=False)
        for pid in p.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
                if verbose:
                    print(f"killed pid {pid} in {ns}", file=sys.stderr)
            except (ProcessLookupError, ValueError):
                pass
    errors = []
    for ns in names:
        p = sh(["ip", "netns", "del", ns], verbose=verbose, check=False)
        if p.returncode != 0 and ns in list_netns():
            errors.append(f"{ns}: {p.stderr.strip()}")
    if errors:
        raise TopoError("could not delete: " + "; ".join(errors))
    return names


def purge(prefix: str, verbose: bool = False) -> list[str]:
    if not PREFIX_RE.match(prefix):
        raise TopoError(f"prefix {prefix!r} must match {PREFIX_RE.pattern}")
    check_root()
    return delete_netns([n for n in list_netns() if n.startswith(prefix)], verbose)


_COUNTER_SCRIPT = r"""
for d in /sys/class/net/*; do
  n=${d##*/}; s=$d/statistics
  printf '%s %s %s %s %s %s\n' "$n" "$(cat $d/operstate)" "$(cat $s/rx_bytes)" \
    "$(cat $s/tx_bytes)" "$(cat $s/rx_packets)" "$(cat $s/tx_packets)"
done
"""


def read_ns_counters(ns: str) -> dict[str, dict]:
    out = sh(["ip", "netns", "exec", ns, "sh", "-c", _COUNTER_SCRIPT], capture=True).stdout
    res = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) != 6:
            continue
        res[f[0]] = {"operstate": f[1], "rx_bytes": int(f[2]), "tx_bytes": int(f[3]),
                     "rx_packets": int(f[4]), "tx_packets": int(f[5])}
    return res


# ----------------------------------------------------------------------------------------------
# ICMP echo (no dependency on iputils): run inside a namespace via `mesh-topo _icmp`.
# ----------------------------------------------------------------------------------------------

def _checksum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def icmp_probe(addrs: list[str], timeout: float = 1.0) -> dict[str, str]:
    """Echo each address once: 'ok', 'unreachable' (no route) or 'timeout'."""
    res: dict[str, str] = {}
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    pending = {}
    for seq, a in enumerate(addrs):
        hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        payload = b"mesh-topo"
        pkt = struct.pack("!BBHHH", 8, 0, _checksum(hdr + payload), ident, seq) + payload
        try:
            sock.sendto(pkt, (a, 0))
            pending[seq] = a
        except OSError as e:
            res[a] = "unreachable" if e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH) \
                else f"error:{e.errno}"
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        r, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not r:
            break
        data, (src, _) = sock.recvfrom(2048)
        ihl = (data[0] & 0x0F) * 4
        typ, _, _, rid, rseq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
        if rid != ident or rseq not in pending:
            continue
        if typ == 0 and src == pending[rseq]:
            res[pending.pop(rseq)] = "ok"
        elif typ == 3:
            res[pending.pop(rseq)] = "unreachable"
    for a in pending.values():
        res[a] = "timeout"
    return res


def probe_from(topo: Topology, host: str, addrs: list[str], timeout: float = 1.0) -> dict:
    if not addrs:
        return {}
    p = sh(["ip", "netns", "exec", topo.ns(host), sys.executable, os.path.abspath(__file__),
            "_icmp", f"--timeout={timeout}", *addrs], capture=True)
    return json.loads(p.stdout)


def check(topo: Topology, verbose: bool = True) -> list[str]:
    """Verify a running topology: links, addresses, reachability, isolation. Returns problems."""
    problems = []
    say = (lambda s: print(s)) if verbose else (lambda s: None)  # noqa: E731
    missing = [n for n in topo.all_ns() if n not in list_netns()]
    if missing:
        return [f"namespaces missing: {' '.join(missing)}"]
    for h in topo.host_names():
        state = read_ns_counters(topo.ns(h))
        if state.get("lo", {}).get("operstate") not in ("unknown", "up"):
            problems.append(f"{h}: lo is not up")
        for i in topo.ifaces(h):
            if i.ifname not in state:
                problems.append(f"{h}: interface {i.ifname} missing")
            elif state[i.ifname]["operstate"] != "up" and i.ifname in topo.expected_up(h):
                problems.append(f"{h}: {i.ifname} is {state[i.ifname]['operstate']}, not up")
        want = sorted(a.with_prefixlen for i in topo.ifaces(h) for a in i.addrs)
        got_txt = sh(["ip", "-n", topo.ns(h), "-4", "-o", "addr", "show"], capture=True).stdout
        got = sorted(m for m in re.findall(r"inet (\S+)", got_txt) if not m.startswith("127."))
        if want != got:
            problems.append(f"{h}: addresses {got} != description {want}")
        routes = sh(["ip", "-n", topo.ns(h), "-4", "route", "show"], capture=True).stdout
        defaults = re.findall(r"^default .*$", routes, re.M)
        want_default = [f"default via {topo.gateway.ip} dev {MGMT_IF}"] if topo.gateway else []
        if [d.strip() for d in defaults] != want_default:
            problems.append(f"{h}: default route {defaults or 'none'} != description "
                            f"{want_default or 'none'}")
    for h in topo.host_names():
        reach, unreach = [], []
        for o in topo.host_names():
            if o == h:
                continue
            reach.append(topo.mgmt_addr(o))
            for i in topo.ifaces(o):
                for a in i.addrs:
                    if i.kind == "mgmt":
                        continue
                    if i.kind == "cable" and i.peer_host == h and a == i.cable.end(o).addr:
                        reach.append(str(a.ip))  # o's end of a cable to h
                    elif i.kind == "lan" and h in i.lan.hosts():
                        reach.append(str(a.ip))  # o's end of a lan h is on
                    else:
                        unreach.append(str(a.ip))  # h has no cable into that subnet
        res = probe_from(topo, h, reach + unreach)
        bad = 0
        for a in reach:
            if res.get(a) != "ok":
                bad += 1
                problems.append(f"{h} -> {a}: {res.get(a)} (expected reachable)")
        for a in unreach:
            if res.get(a) == "ok":
                bad += 1
                problems.append(f"{h} -> {a}: reachable (expected unreachable)")
        say(f"{h}: {len(reach)} addresses reachable, {len(unreach)} unreachable, "
            f"{bad} wrong")
    return problems


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------

def _print_show(topo: Topology) -> None:
    d = topo.describe()
    print(f"topology {d['topology']} ({d['file']}), prefix {d['prefix']}")
    print(f"management: {d['mgmt']['subnet']} on bridge {BRIDGE} in namespace {d['mgmt']['namespace']}"
          + (f", gateway {d['mgmt']['gateway']} (every host's default route)"
             if d['mgmt']['gateway'] else ""))
    existing = set(topo.existing_ns())
    for h in d["hosts"]:
        state = "up" if h["namespace"] in existing else "not created"
        print(f"host {h['name']}  namespace {h['namespace']} ({state})")
        for i in h["interfaces"]:
            peer = f" -> {i['peer_host']}" if i["peer_host"] else ""
            print(f"  {i['ifname']:<15} {i['kind']:<5} {' '.join(i['addrs']) or '(no address)'}{peer}")
    print("cables:")
    for c in d["cables"]:
        a, b = c["ends"]
        mtu = f"  mtu {c['mtu']}" if c["mtu"] else ""
        print(f"  {c['subnet']:<18} {a['host']}:{a['ifname']} {a['addr']}  <->  "
              f"{b['host']}:{b['ifname']} {b['addr']}{mtu}")
    for h in d["hosts"]:
        if h["namespace"] in existing:
            print(f"live {h['name']}:")
            for line in topo.live(h["name"]).splitlines():
                print(f"  {line}")


def main(argv: list[str] | None = None) -> int:
    # --prefix and -v work before or after the command.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--prefix", default=argparse.SUPPRESS,
                        help="namespace name prefix, must start with 'nm-' "
                             "(default $MESH_TOPO_PREFIX or 'nm-'); one per parallel run")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="print every ip command")
    ap = argparse.ArgumentParser(
        prog="mesh-topo", parents=[common],
        description="Build switchless meshes of network namespaces (see tests/netns/README.md).")
    sub = ap.add_subparsers(dest="cmd", required=True)

    def command(name, help_text, *args):
        p = sub.add_parser(name, help=help_text, parents=[common])
        for arg in args:
            p.add_argument(arg)
        return p

    command("up", "create the namespaces, bridge and cables (rolls back on failure)", "file")
    command("down", "kill processes inside and delete everything (idempotent)", "file")
    command("purge", "delete every namespace whose name starts with --prefix")
    command("exec", "run a command inside a host: exec FILE HOST -- CMD...", "file", "host")
    command("show", "hosts, interfaces, addresses, cables (and live state)", "file") \
        .add_argument("--json", action="store_true")
    command("counters", "rx/tx bytes and packets per interface per host", "file") \
        .add_argument("--json", action="store_true")
    command("check", "verify a running topology (addresses, pings, isolation)", "file")
    command("ns", "print the namespace of a host", "file", "host")
    command("addr", "print a host's address on an interface (default mgmt0)", "file", "host") \
        .add_argument("ifname", nargs="?", default=MGMT_IF)
    p = sub.add_parser("_icmp")  # internal: runs inside a namespace
    p.add_argument("--timeout", type=float, default=1.0)
    p.add_argument("addrs", nargs="*")
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if "--" in argv:  # everything after the first "--" is the command for `exec`
        cmd = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    a = ap.parse_args(argv)
    a.prefix = getattr(a, "prefix", os.environ.get("MESH_TOPO_PREFIX", DEFAULT_PREFIX))
    a.verbose = getattr(a, "verbose", False)

    try:
        if a.cmd == "_icmp":
            print(json.dumps(icmp_probe(a.addrs, a.timeout)))
            return 0
        if a.cmd == "purge":
            gone = purge(a.prefix, a.verbose)
            print(f"deleted {len(gone)} namespace(s){': ' + ' '.join(gone) if gone else ''}")
            return 0
        topo = Topology(a.file, a.prefix)
        if a.cmd == "up":
            topo.up(a.verbose)
            print(f"up: {topo.name}: {len(topo.hosts)} hosts, {len(topo.cables)} cables, "
                  f"{len(topo.stubs)} stubs, namespaces {topo.prefix}{{{','.join(topo.host_names())},mgmt}}")
        elif a.cmd == "down":
            check_root()
            gone = topo.down(a.verbose)
            print(f"down: {topo.name}: deleted {len(gone)} namespace(s)")
        elif a.cmd == "exec":
            if not cmd:
                raise TopoError("usage: mesh-topo exec FILE HOST -- CMD [ARGS...]")
            sys.stdout.flush()
            os.execvp("ip", ["ip", "netns", "exec", topo.ns(a.host), *cmd])
        elif a.cmd == "show":
            if a.json:
                d = topo.describe()
                d["created"] = topo.existing_ns()
                print(json.dumps(d, indent=2))
            else:
                _print_show(topo)
        elif a.cmd == "counters":
            rows = topo.counters()
            if a.json:
                print(json.dumps(rows, indent=1))
            else:
                cols = ["host", "ifname", "kind", "peer_host", "operstate",
                        "rx_bytes", "tx_bytes", "rx_packets", "tx_packets"]
                print("\t".join(cols))
                for r in rows:
                    print("\t".join("-" if r[c] is None else str(r[c]) for c in cols))
        elif a.cmd == "check":
            problems = check(topo)
            for p in problems:
                print(f"PROBLEM: {p}")
            print(f"check {topo.name}: {'ok' if not problems else f'{len(problems)} problem(s)'}")
            return 1 if problems else 0
        elif a.cmd == "ns":
            print(topo.ns(a.host))
        elif a.cmd == "addr":
            i = topo.iface(a.host, a.ifname)
            if not i.addrs:
                raise TopoError(f"{a.host}:{a.ifname} has no address")
            print(i.addrs[0].ip)
    except TopoError as e:
        print(f"mesh-topo: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
