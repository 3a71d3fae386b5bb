# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Check that each patch's ``Covered-by`` test fails without the patch (every test must be able to fail).

For each selected patch: prepare the verl tree with the series minus that patch (the overlay included) into a
scratch folder, put it first on ``PYTHONPATH`` and run the covering test file with the installed environment's
pytest. A patch whose removal breaks a later patch's context is reported as "not independent" and skipped.

    .venv/bin/python tools/patch_mutation_check.py [0002 0012 ...]

Slow (a pytest run per patch); a maintainer's tool, not part of CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import arctic_build as ab  # noqa: E402


def main(argv: list[str]) -> int:
    folder = ab.default_folder()
    up = ab.Upstream.load(folder)
    patches = ab.load_series(folder)
    wanted = [p for p in patches if not argv or p.name[:4] in argv]
    sdist = ab.fetch_sdist(up)
    pytest = str(Path(sys.executable).parent / "pytest")
    results = []
    for victim in wanted:
        with tempfile.TemporaryDirectory(prefix=f"mutant-{victim.name[:4]}-") as td:
            root = Path(td)
            ab.extract_verl(sdist, up, root)
            try:
                for p in patches:
                    if p is not victim:
                        ab.apply_patch(p, root)
            except ab.BuildError as e:
                results.append((victim.name, "not independent", str(e)))
                continue
            ab.copy_overlay(root)
            shutil.copy(ab.REPO / "build" / "src" / "verl" / ab.MANIFEST_NAME, root / "verl")
            test = victim.headers["Covered-by"].strip()  # a file, or file::test
            env = {**os.environ, "PYTHONPATH": str(root), "VERL_USE_EXTERNAL_PLUGINS": "auto"}
            r = subprocess.run(
                [pytest, "-q", "-x", "-p", "no:cacheprovider", "-c", str(ab.REPO / "pyproject.toml"),
                 "--rootdir", str(ab.REPO), "-n", "0", str(ab.REPO / test)],
                capture_output=True, text=True, cwd=td, env=env, timeout=1800,
            )  # fmt: skip
            # 1: a test failed; 2: the test module itself failed to import or collect without the patch
            verdict = "FAILS without it (good)" if r.returncode in (1, 2) else f"passes without it (rc={r.returncode})"
            last = (r.stdout.strip().splitlines() or [""])[-1]
            results.append((victim.name, verdict, last))
            print(f"{victim.name}: {verdict}: {last}", flush=True)
    bad = [r for r in results if r[1].startswith("passes")]
    for name, verdict, detail in results:
        if verdict == "not independent":
            print(f"{name}: not independent (later patches need its context): {detail}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
