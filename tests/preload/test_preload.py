#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_preload.py ADDR - an unmodified stdlib program for the preload.

Run under qpsock-run (test_preload.sh python). Uses socket, selectors
(epoll), non-blocking receives, IP_ADD_MEMBERSHIP (before bind), recvmsg
with IP_PKTINFO and os.fork: a forked child sends N datagrams to a group and
N to a unicast port of the parent, which must get every one exactly
once, with the right destination in IP_PKTINFO. Exits 0 when all is
well.
"""
import errno
import os
import selectors
import socket
import struct
import sys
import time

ADDR = sys.argv[1] if len(sys.argv) > 1 else "198.18.0.1"
GROUP = "239.7.7.7"
MPORT, UPORT, N = 5600, 5601, 50
# Linux's value; Python's socket module lacks the name before 3.12.
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)


def fail(msg):
    print("test_preload.py: FAIL:", msg, flush=True)
    sys.exit(1)


def child(ready_r):
    # The child's own socket: under the preload, a context of its own.
    os.read(ready_r, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
    for i in range(N):
        s.sendto(b"m%03d" % i, (GROUP, MPORT))
        s.sendto(b"u%03d" % i, (ADDR, UPORT))
        time.sleep(0.001)
    s.close()


def main():
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(ready_w)
        child(ready_r)
        # exit(), not _exit(): the library's destructor releases the
        # child's context.
        sys.exit(0)
    os.close(ready_r)

    m = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    m.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Joined before bind, as the kernel allows.
    mreq = struct.pack("4s4s", socket.inet_aton(GROUP),
                       socket.inet_aton("0.0.0.0"))
    m.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    try:
        m.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        fail("joined twice")
    except OSError as e:
        if e.errno != errno.EADDRINUSE:
            fail("second join: %s" % e)
    m.bind(("", MPORT))
    m.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    m.setblocking(False)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((ADDR, UPORT))
    u.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
    u.setblocking(False)

    sel = selectors.DefaultSelector()
    sel.register(m, selectors.EVENT_READ, (GROUP, "m"))
    sel.register(u, selectors.EVENT_READ, (ADDR, "u"))
    os.write(ready_w, b"g")
    seen = {"m": set(), "u": set()}
    dups = 0
    deadline = time.time() + 10
    while time.time() < deadline and \
            (len(seen["m"]) < N or len(seen["u"]) < N):
        for key, _ in sel.select(timeout=0.5):
            dst, kind = key.data
            while True:
                try:
                    data, anc, _, src = key.fileobj.recvmsg(64, 256)
                except BlockingIOError:
                    break
                pi = [a for a in anc if a[0] == socket.IPPROTO_IP and
                      a[1] == IP_PKTINFO]
                if not pi:
                    fail("no IP_PKTINFO on %r" % data)
                _, _, ipi_addr = struct.unpack("i4s4s", pi[0][2][:12])
                if socket.inet_ntoa(ipi_addr) != dst:
                    fail("IP_PKTINFO destination %s, not %s" %
                         (socket.inet_ntoa(ipi_addr), dst))
                if data[:1].decode() != kind:
                    fail("%r on the %s socket" % (data, kind))
                seq = int(data[1:])
                if seq in seen[kind]:
                    dups += 1
                seen[kind].add(seq)
    _, st = os.waitpid(pid, 0)
    if st != 0:
        fail("child exit status %d" % st)
    print("test_preload.py: multicast %d/%d, unicast %d/%d, duplicates %d"
          % (len(seen["m"]), N, len(seen["u"]), N, dups), flush=True)
    if len(seen["m"]) != N or len(seen["u"]) != N or dups:
        fail("not every datagram exactly once")
    m.setsockopt(socket.IPPROTO_IP, socket.IP_DROP_MEMBERSHIP, mreq)
    sel.close()
    m.close()
    u.close()


if __name__ == "__main__":
    main()
