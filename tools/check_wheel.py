# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Refuse a wheel whose contents break the packaging rules (run by build.sh before the wheel reaches dist/)."""

import json
import re
import sys
import zipfile

ALLOWED_TOP = {"verl", "arctic_platform"}
FORBIDDEN = re.compile(r"(^|/)(tests|\.pc|__pycache__)/|\.(orig|rej|pyc)$")


def problems(path: str) -> list[str]:
    out = []
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        tops = {n.split("/", 1)[0] for n in names}
        dist_info = [t for t in tops if t.endswith(".dist-info")]
        if len(dist_info) != 1:
            out.append(f"expected one .dist-info, got {sorted(dist_info)}")
        extra = tops - ALLOWED_TOP - set(dist_info)
        if extra:
            out.append(f"unexpected top-level entries {sorted(extra)} (only verl/, arctic_platform/ and the dist-info)")
        out += [f"forbidden entry {n}" for n in names if FORBIDDEN.search(n)]
        if "verl/arctic_build_manifest.json" not in names:
            out.append("no verl/arctic_build_manifest.json")
        else:
            m = json.loads(zf.read("verl/arctic_build_manifest.json"))
            version = path.rsplit("/", 1)[-1].split("-")[1]
            if m.get("version") != version:
                out.append(f"manifest version {m.get('version')} != wheel version {version}")
    return out


if __name__ == "__main__":
    bad = problems(sys.argv[1])
    for p in bad:
        print(f"build: wheel check: {p}", file=sys.stderr)
    sys.exit(1 if bad else 0)
