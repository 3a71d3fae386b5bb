# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""What importing verl costs the embedded server: a fresh process importing the server (which leaves verl out)
vs the same plus verl's loss API and LR schedule (what a training job's first ``/forward-backward`` imports).

Each case runs in its own fresh interpreter, alternating A B B A ... (``--repeats`` pairs), and reports the median
import wall time and the median peak RSS. Prints the ratio and the added seconds / MiB, and writes
``benchmarks/results/server/verl_import.csv``. The client is not measured: it imports neither torch nor verl (a test
holds it to that).

    cd /tmp && python /path/to/benchmarks/server/bench_verl_import.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_csv  # noqa: E402

CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
import arctic_platform.server.app, arctic_platform.server.engines.training_engine
assert "verl" not in sys.modules, "the server imported verl at start"
if {with_verl}:
    from arctic_platform.server import loss
    loss.verl_loss_api()
    import verl.utils.torch_functional
    assert "verl" in sys.modules
print(json.dumps({{"seconds": time.perf_counter() - t0,
                  "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}}))
"""

CASES = {"server": False, "server + verl": True}


def run_case(with_verl: bool) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD.format(with_verl=with_verl)], check=True, capture_output=True, text=True, cwd="/"
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="A B B A pairs")
    args = ap.parse_args()
    run_case(False)  # warm the page cache for both cases alike
    samples: dict[str, list[dict]] = {name: [] for name in CASES}
    order = [*CASES] * args.repeats
    for i in range(0, len(order), 2):  # ABBA: alternate which case goes first
        pair = order[i : i + 2] if (i // 2) % 2 == 0 else order[i : i + 2][::-1]
        for name in pair:
            samples[name].append(run_case(CASES[name]))
    rows = []
    for name, runs in samples.items():
        rows.append(
            {
                "case": name,
                "runs": len(runs),
                "median_import_s": round(statistics.median(r["seconds"] for r in runs), 3),
                "median_peak_rss_mib": round(statistics.median(r["peak_rss_mib"] for r in runs), 1),
            }
        )
        print(rows[-1])
    base, verl = rows
    ratio = verl["median_import_s"] / base["median_import_s"]
    path = write_csv("verl_import", rows)
    print(
        f"import time: server {base['median_import_s']:.2f} s, server + verl {verl['median_import_s']:.2f} s "
        f"(x{ratio:.2f}; verl adds {verl['median_import_s'] - base['median_import_s']:.2f} s and "
        f"{verl['median_peak_rss_mib'] - base['median_peak_rss_mib']:.0f} MiB peak RSS, once per server process); "
        f"{path}"
    )


if __name__ == "__main__":
    main()
