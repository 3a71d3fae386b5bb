# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Wire framing: DSSST1 (arctic_platform.wire) vs ``torch.save`` (the pickle wire of the 0.1.2 generation), on a
[256, 1536] batch with 6 fields.

Both encode and decode the same ``{"batch": {6 fields}}`` frame in one run; the batch must come back exactly from
each (``torch.load(weights_only=True)``: the safe way to read a pickle at all). ``--with-json`` adds JSON lists as a
third row. The ARCW1 framing DSSST1 replaced is no longer kept; its last measured ratio is in
docs/arctic-rl-server.md ("Wire framing").

Run: ``python benchmarks/server/bench_wire.py [--out DIR]`` (prints the ratios, writes bench_wire.csv into DIR,
default benchmarks/results/server/).
"""

from __future__ import annotations

import argparse
import io
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


def pickle_encode(tree) -> bytes:
    buf = io.BytesIO()
    torch.save(tree, buf)
    return buf.getvalue()


def pickle_decode(data: bytes):
    return torch.load(io.BytesIO(data), weights_only=True)


def json_encode(tree):
    return json.dumps({"batch": {k: v.tolist() for k, v in tree["batch"].items()}}).encode()


def json_decode(data, like):
    raw = json.loads(data)["batch"]
    return {"batch": {k: torch.tensor(v, dtype=like[k].dtype) for k, v in raw.items()}}


def measure(name: str, enc, dec, b: dict, repeat: int, meta: dict) -> dict:
    tree = {"batch": b}
    frame = enc(tree)
    out = dec(frame)["batch"]
    assert all(torch.equal(out[k], b[k]) for k in b), f"{name} does not reproduce the batch"
    t_enc = timeit(lambda: enc(tree), repeat=repeat)
    t_dec = timeit(lambda: dec(frame), repeat=repeat)
    t_rt = timeit(lambda: dec(enc(tree)), repeat=repeat)
    return dict(meta, method=name, encode_s=t_enc, decode_s=t_dec, round_trip_s=t_rt, bytes=len(frame))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--cols", type=int, default=1536)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--with-json", action="store_true", help="also time JSON lists (slow)")
    ap.add_argument("--out", type=Path, default=None, help="CSV folder (default benchmarks/results/server/)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    b = batch(args.rows, args.cols)
    meta = {"rows": args.rows, "cols": args.cols, "fields": len(b), "threads": args.threads}
    results = [
        measure("torch_save", pickle_encode, pickle_decode, b, args.repeat, meta),
        measure("dssst1", wire.encode, wire.decode, b, args.repeat, meta),
    ]
    if args.with_json:
        results.append(
            measure("json_lists", json_encode, lambda d: json_decode(d, b), b, max(1, args.repeat // 3), meta)
        )
    path = write_csv("bench_wire", results, args.out)
    print(f"encode + decode of {{'batch': [{args.rows}, {args.cols}] x {len(b)} fields}}, {args.threads} thread(s)")
    for r in results:
        print(
            f"  {r['method']:<13} encode {r['encode_s'] * 1e3:7.1f} ms  decode {r['decode_s'] * 1e3:7.1f} ms  "
            f"round trip {r['round_trip_s'] * 1e3:7.1f} ms  {r['bytes'] / 1e6:6.2f} MB"
        )
    old, new = results[0], results[1]
    print(
        f"ratio DSSST1 / torch.save: round trip {new['round_trip_s'] / old['round_trip_s']:.2f}x, "
        f"encode {new['encode_s'] / old['encode_s']:.2f}x, decode {new['decode_s'] / old['decode_s']:.2f}x, "
        f"bytes {new['bytes'] / old['bytes']:.4f}x  ({path})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
