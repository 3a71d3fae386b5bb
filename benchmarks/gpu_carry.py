# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""What ``benchmarks/gpu_check.sh --prepare`` carries to a bare GPU image (torch + triton + transformers + httpx +
pytest) beyond the server stack, so the engines step runs there, and how.

The engines step runs the server's training engine, whose loss and LR schedule are verl's own functions; ``import
verl`` imports ray, tensordict and omegaconf. :data:`ENGINES_IMPORTS` are the distributions it imports that a bare
image lacks (found by running the engines step where only :data:`BARE_IMAGE` and what it requires is installed, and
adding what it asked for until it passed); :func:`closure` adds their requirements, and :func:`carry_list` keeps what
the bare image does not already have, pinned to this environment's versions (``--prepare`` downloads exactly those,
without resolving again). ray's wheel (~79 MB) alone exceeds the carry (60 MiB), so ray is carried as a zip of the
wheel without what ``import ray`` never loads (:data:`RAY_UNUSED`: the cluster binaries, Java jars, the dashboard and
the data / rllib / serve / train / tune / llm libraries; ~16 MiB). The engines step never starts Ray; verl only
imports it. ``tests/kernels/test_gpu_check_dry_on_cpu.py`` builds a carry the same way from installed files and runs
the engines step where only the bare image's packages are.

    python benchmarks/gpu_carry.py strip-ray ray-2.60.0-cp312-...whl gpu_carry/ray-2.60.0-core.zip
    python benchmarks/gpu_carry.py zip-installed OUT_DIR DIST...   (the dry test: installed distributions as zips)
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from importlib import metadata
from pathlib import Path

BARE_IMAGE = ("torch", "triton", "transformers", "httpx", "pytest", "pytest-xdist")
"""What the bare GPU image brings (with their own requirements): gpu_check.sh's header."""
ENGINES_IMPORTS = ("ray", "tensordict", "omegaconf", "codetiming", "peft", "accelerate")
"""Distributions the engines step imports that a bare GPU image lacks (ray carried stripped: :func:`strip_ray`)."""

RAY_UNUSED = ("ray/core/src/", "ray/jars/", "ray/dashboard/", "ray/data/", "ray/rllib/", "ray/serve/", "ray/train/",
              "ray/tune/", "ray/llm/")  # fmt: skip
"""Parts of ray that ``import ray`` (and so ``import verl``) never loads: a Ray cluster's binaries and libraries."""


def strip_ray(source: Path, out: Path) -> int:
    """Write ``out``, a zip of ray from ``source`` (a wheel, or a folder holding the installed ``ray`` package)
    without :data:`RAY_UNUSED` (and bytecode caches), for unzipping into a ``site-packages`` folder. Returns its size.
    """

    def keep(name: str) -> bool:  # the package minus RAY_UNUSED, and its metadata (verl reads ray's version)
        top = name.split("/", 1)[0]
        wanted = top == "ray" or (top.startswith("ray-") and top.endswith(".dist-info"))
        return wanted and "__pycache__" not in name and not name.startswith(RAY_UNUSED)

    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        if source.is_dir():
            for f in sorted(p for top in [source / "ray", *source.glob("ray-*.dist-info")] for p in top.rglob("*")):
                name = f.relative_to(source).as_posix()
                if f.is_file() and keep(name):
                    dst.write(f, name)
        else:
            with zipfile.ZipFile(source) as src:
                for info in src.infolist():
                    if keep(info.filename):
                        dst.writestr(info, src.read(info))
    return out.stat().st_size


def closure(names) -> set[str]:
    """The installed distributions ``names`` need: themselves and their requirements without extras, recursively
    (canonical names; a requirement this environment does not have is left out)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(req.name))
    return seen


def carry_list() -> list[str]:
    """``name==version`` of every distribution the engines step needs beyond the bare image, ray excepted."""
    need = closure(ENGINES_IMPORTS) - closure(BARE_IMAGE) - {"ray"}
    return [f"{n}=={metadata.version(n)}" for n in sorted(need)]


def zip_installed(dist: str, out_dir: Path) -> Path:
    """``out_dir/<dist>.zip``: an installed distribution's files (its RECORD), laid out for ``site-packages``."""
    d = metadata.distribution(dist)
    out = out_dir / f"{d.metadata['Name']}.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for f in d.files or []:
            path = Path(d.locate_file(f))
            if path.is_file() and "__pycache__" not in f.parts and not str(f).startswith(".."):
                z.write(path, f.as_posix())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("strip-ray", help="ray's wheel (or installed folder) without RAY_UNUSED, as a zip")
    s.add_argument("source", type=Path)
    s.add_argument("out", type=Path)
    z = sub.add_parser("zip-installed", help="installed distributions as site-packages zips")
    z.add_argument("out_dir", type=Path)
    z.add_argument("dists", nargs="+")
    sub.add_parser("list", help="print carry_list(), one per line (what --prepare downloads besides ray)")
    args = ap.parse_args(argv)
    if args.cmd == "strip-ray":
        size = strip_ray(args.source, args.out)
        print(f"gpu_carry: {args.out} ({size / 1024**2:.1f} MiB: ray without {', '.join(RAY_UNUSED)})")
    elif args.cmd == "zip-installed":
        args.out_dir.mkdir(parents=True, exist_ok=True)
        for dist in args.dists:
            print(zip_installed(dist, args.out_dir))
    else:
        print("\n".join(carry_list()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
