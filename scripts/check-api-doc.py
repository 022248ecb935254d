#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check-api-doc.py - docs/api.md against include/qpsock/qpsock.h.

The header is the contract; api.md is its long form. This fails when they
disagree on anything a program is written from:
  - a function of the header that api.md does not show with the same
    prototype in a SYNOPSIS block, or a SYNOPSIS prototype of a qps_ call
    that differs from the header's;
  - an errno the header's comment gives for a call that the ERRORS list of
    that call's api.md section does not name;
  - the version: QPS_VERSION_MAJOR.MINOR against api.md's "Version:"
    line, the project version in CMakeLists.txt and the newest symbol
    version node in src/libqpsock.map, and the node api.md names for
    each call against the node that exports it.
usage: scripts/check-api-doc.py [repository root]
"""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
header = (root / "include/qpsock/qpsock.h").read_text()
api = (root / "docs/api.md").read_text()
cmake = (root / "CMakeLists.txt").read_text()
vmap = (root / "src/libqpsock.map").read_text()
errors = []


def norm(s):
    s = re.sub(r"/\*.*?\*/", " ", s, flags=re.S)
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s*([(),*;])\s*", r"\1", s)
    return s


# Header: every prototype, and the comment right above it (if any).
protos = {}
errnos = {}
for m in re.finditer(r"^(?:const )?[a-z][a-z_ ]*\**\s*\**(qps_\w+)\([^;]*\);",
                     header, flags=re.M):
    name = m.group(1)
    protos[name] = norm(m.group(0))
    before = header[:m.start()].rstrip()
    comment = before[before.rfind("/*"):] if before.endswith("*/") else ""
    errnos[name] = set(re.findall(r"-E[A-Z]+", comment))

# api.md: sections, their SYNOPSIS prototypes and ERRORS lists.
sections = re.split(r"^## ", api, flags=re.M)[1:]
doc_protos = {}
doc_errnos = {}
for sec in sections:
    title = sec.splitlines()[0]
    syn = re.search(r"### SYNOPSIS\n```c\n(.*?)```", sec, flags=re.S)
    errs = re.search(r"### ERRORS\n(.*?)(?:\n### |\n---|\Z)", sec, flags=re.S)
    names = []
    if syn:
        for d in re.finditer(r"^(?:const )?[a-z][a-z_ ]*\**\s*\**(qps_\w+)\([^;]*\);",
                             syn.group(1), flags=re.S | re.M):
            doc_protos[d.group(1)] = (norm(d.group(0)), title)
            names.append(d.group(1))
    listed = set(re.findall(r"`(-E[A-Z]+)`", errs.group(1))) if errs else set()
    for n in names:
        doc_errnos[n] = listed

for name, proto in sorted(protos.items()):
    if name not in doc_protos:
        errors.append(f"{name}: declared in qpsock.h, no SYNOPSIS in api.md")
        continue
    dproto, title = doc_protos[name]
    if dproto != proto:
        errors.append(f"{name}: prototype differs\n  qpsock.h: {proto}\n  api.md ({title}): {dproto}")
    missing = errnos[name] - doc_errnos.get(name, set())
    if missing:
        errors.append(f"{name}: qpsock.h names {' '.join(sorted(missing))}; "
                      f"the ERRORS of api.md's '{title}' do not")
for name in sorted(set(doc_protos) - set(protos)):
    errors.append(f"{name}: in api.md's SYNOPSIS, not declared in qpsock.h")

# Versions.
major = re.search(r"#define QPS_VERSION_MAJOR (\d+)", header).group(1)
minor = re.search(r"#define QPS_VERSION_MINOR (\d+)", header).group(1)
hv = f"{major}.{minor}"
pv = re.search(r"project\(qpsock VERSION (\d+\.\d+)", cmake).group(1)
nodes = re.findall(r"^QPSOCK_(\d+\.\d+)\s*\{", vmap, flags=re.M)
dv = re.search(r"`QPS_VERSION_MINOR` \((\d+\.\d+)\)", api)
if pv != hv:
    errors.append(f"version: qpsock.h says {hv}, CMakeLists.txt {pv}")
if not nodes or nodes[-1] != hv:
    errors.append(f"version: qpsock.h says {hv}, the newest node of libqpsock.map is "
                  f"{nodes[-1] if nodes else 'none'}")
if not dv or dv.group(1) != hv:
    errors.append(f"version: qpsock.h says {hv}, api.md's Version line "
                  f"{dv.group(1) if dv else 'is missing'}")
node_of = {}
for node, body in re.findall(r"^QPSOCK_(\d+\.\d+)\s*\{(.*?)\}", vmap, flags=re.M | re.S):
    for sym in re.findall(r"(qps_\w+);", body):
        node_of[sym] = node
for node, names in re.findall(r"`QPSOCK_(\d+\.\d+)`: ([^\n]*)", api):
    for n in re.findall(r"`(qps_\w+)`", names):
        if node_of.get(n) != node:
            errors.append(f"{n}: api.md says QPSOCK_{node}, libqpsock.map "
                          f"exports it as QPSOCK_{node_of.get(n)}")

for e in errors:
    print("check-api-doc: " + e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"check-api-doc: {len(protos)} calls, prototypes and errno lists agree; version {hv}")
