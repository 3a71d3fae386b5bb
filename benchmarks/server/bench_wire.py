# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Wire framing vs JSON lists: encode + decode of a [256, 1536] batch with 6 fields.

Run: ``python benchmarks/server/bench_wire.py`` (prints the ratio, writes benchmarks/results/server/bench_wire.csv).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from _common import timeit, write_csv  # noqa: E402

from arctic_platform import wire  # noqa: E402


def batch(rows: int, cols: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "input_ids": torch.randint(0, 150_000, (rows, cols), generator=g),
        "attention_mask": torch.ones(rows, cols, dtype=torch.int64),
        "response_mask": torch.ones(rows, cols, dtype=torch.int64),
        "old_log_probs": -torch.rand(rows, cols, generator=g) * 10,
        "advantages": torch.randn(rows, cols, generator=g),
        "rollout_is_weights": torch.rand(rows, cols, generator=g),
    }


def wire_round_trip(b):
    out = wire.decode(wire.encode({"batch": b}))["batch"]
    return out


def json_round_trip(b):
    text = json.dumps({"batch": {k: v.tolist() for k, v in b.items()}})
    raw = json.loads(text)["batch"]
    return {k: torch.tensor(v, dtype=b[k].dtype) for k, v in raw.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--cols", type=int, default=1536)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    b = batch(args.rows, args.cols)
    for rt in (wire_round_trip, json_round_trip):  # both must reproduce the batch exactly
        out = rt(b)
        assert all(torch.equal(out[k], b[k]) for k in b), rt.__name__
    t_wire = timeit(lambda: wire_round_trip(b), repeat=args.repeat)
    t_json = timeit(lambda: json_round_trip(b), repeat=max(1, args.repeat // 2))
    n_wire = len(wire.encode({"batch": b}))
    n_json = len(json.dumps({"batch": {k: v.tolist() for k, v in b.items()}}).encode())
    rows = [
        {"method": "wire", "rows": args.rows, "cols": args.cols, "fields": len(b), "seconds": t_wire, "bytes": n_wire},
        {"method": "json", "rows": args.rows, "cols": args.cols, "fields": len(b), "seconds": t_json, "bytes": n_json},
    ]
    path = write_csv("bench_wire", rows)
    print(
        f"wire encode+decode [{args.rows}, {args.cols}] x {len(b)} fields: {t_wire * 1e3:.1f} ms, {n_wire / 1e6:.1f} MB"
    )
    print(f"JSON lists encode+decode:                         {t_json * 1e3:.1f} ms, {n_json / 1e6:.1f} MB")
    print(f"ratio JSON / wire: time {t_json / t_wire:.1f}x, bytes {n_json / n_wire:.2f}x  ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
