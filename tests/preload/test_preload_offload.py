#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
#
# test_preload_offload.py multicast|ports ADDR - run under qpsock-run on
# emu (test_preload.sh "offload" sets QPS_PRELOAD_OFFLOAD, _PORTS and
# _GROUPS to match). Each socket's first bind, connect, send or join
# decides whether it stays offloaded (docs/preload.md): an offloaded one
# receives what is sent to it through qpsock, a kernel one what a kernel
# socket sends it on 127.0.0.1, never the other. The shell checks the
# --stats and --debug lines name the same sockets.
import socket
import struct
import sys

mode, addr = sys.argv[1], sys.argv[2]
socks = []


def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.settimeout(2)
    socks.append(s)
    return s


def join(s, group, iface="0.0.0.0"):
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                 struct.pack("4s4s", socket.inet_aton(group),
                             socket.inet_aton(iface)))


def expect(s, data, what):
    got = s.recv(100)
    assert got == data, f"{what}: got {got!r}, want {data!r}"


def kernel_only(s, port, what):
    # Only a kernel socket gets a datagram a kernel socket sends on
    # loopback; qpsock never sees 127.0.0.1.
    k = udp()
    k.sendto(b"kernel", ("127.0.0.1", port))
    expect(s, b"kernel", what + " (kernel)")


if mode == "multicast":
    # Joined before bind: a multicast socket, offloaded.
    a = udp()
    join(a, "239.1.2.3")
    a.bind(("", 5801))
    # Bound to a listed group: offloaded.
    b = udp()
    b.bind(("239.1.2.3", 5802))
    join(b, "239.1.2.3")
    # Sends to a listed group: offloaded; its own context's subscribers
    # get the datagram (IP_MULTICAST_LOOP).
    c = udp()
    c.sendto(b"group1", ("239.1.2.3", 5801))
    c.sendto(b"group2", ("239.1.2.3", 5802))
    expect(a, b"group1", "joined then bound")
    expect(b, b"group2", "bound to the group")
    # Unicast: not multicast, so the kernel's.
    f = udp()
    f.bind(("", 5804))
    kernel_only(f, 5804, "unicast bind")
    # A group not listed: the kernel's (bound, and joined on loopback so
    # no IGMP leaves the host).
    h = udp()
    h.bind(("239.2.0.1", 5805))
    j = udp()
    join(j, "239.2.0.2", "127.0.0.1")
    j.bind(("", 5807))
    kernel_only(j, 5807, "joined an unlisted group")
    # connect to a unicast peer: not multicast (a UDP connect sends
    # nothing).
    m = udp()
    m.connect((addr, 5806))
elif mode == "ports":
    a = udp()
    a.bind(("", 5810))
    b = udp()
    b.bind(("", 5821))
    # The destination port decides for a socket that was never bound.
    c = udp()
    c.sendto(b"to5810", (addr, 5810))
    c.sendto(b"to5821", (addr, 5821))
    expect(a, b"to5810", "listed port")
    expect(b, b"to5821", "listed range")
    f = udp()
    f.bind(("", 5811))
    kernel_only(f, 5811, "unlisted port")
    m = udp()
    m.connect((addr, 5899))
else:
    sys.exit(f"unknown mode {mode}")
for s in socks:
    s.close()
print(f"test_preload_offload {mode}: ok")
