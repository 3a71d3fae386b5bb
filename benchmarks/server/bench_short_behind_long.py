# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""A short /generate issued while a long one decodes, on the vLLM CPU engine: this checkout vs another one.

Each code under test runs in its own child process, which starts the embedded server (``--sampling-engine vllm``,
the tiny model), sends a long generate (4 prompts x ``--long-tokens``), waits until it is in the engine (the
server's busy meter), then sends a short one (1 prompt x 4 tokens). Prints, per code, the median over ``--repeat``
rounds of the short one's latency over the long one's (1.0: the short one waited for the long one; the goal is
<= 0.25) and writes ``benchmarks/results/server/short_behind_long.csv``. ``--code DIR`` adds another checkout's
``arctic_platform`` (e.g. ``git archive 7bf4344 arctic_platform | tar -x -C DIR``) to the same run.

    cd /tmp && python /path/to/benchmarks/server/bench_short_behind_long.py --code /tmp/old-checkout
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import child_result, run_child, server, tiny_model, workdir, write_csv  # noqa: E402


async def _round(url: str, sid: int, long_tokens: int) -> tuple[float, float]:
    import httpx

    async with httpx.AsyncClient(base_url=url, timeout=600) as c:
        base = (await c.get("/status")).json()["server"]["busy"]["sampling_s"]
        sp = {"temperature": 0.0, "max_tokens": long_tokens, "ignore_eos": True}
        t_long = time.perf_counter()
        long = asyncio.create_task(
            c.post("/generate", params={"job_id": sid}, json={"prompts": [[1, 2, 3]] * 4, "sampling_params": sp})
        )
        while (await c.get("/status")).json()["server"]["busy"]["sampling_s"] <= base:
            await asyncio.sleep(0.005)
        t_short = time.perf_counter()
        short_sp = {"temperature": 0.0, "max_tokens": 4, "ignore_eos": True}
        r = await c.post(
            "/generate", params={"job_id": sid}, json={"prompts": [[5, 6, 7]], "sampling_params": short_sp}
        )
        short_s = time.perf_counter() - t_short
        assert r.status_code == 200, r.text
        r = await long
        long_s = time.perf_counter() - t_long
        assert r.status_code == 200, r.text
    return short_s, long_s


def child(args) -> None:
    import httpx

    work = workdir()
    model = tiny_model(work)
    srv_args = ("--model", str(model), "--max-seq-len", "1024", "--training-gpus", "0", "--log-prob-gpus", "0")
    with server(work, *srv_args, "--sampling-engine", "vllm") as url:
        r = httpx.post(url + "/initialize", json={"job_type": "sampling", "seed": 1}, timeout=60)
        sid = r.json()["job_id"]
        while httpx.get(f"{url}/job/{sid}", timeout=60).json()["status"] == "PENDING":
            time.sleep(0.2)
        rounds = [asyncio.run(_round(url, sid, args.long_tokens)) for _ in range(args.repeat)]
    ratios = sorted(s / lg for s, lg in rounds)
    shorts = sorted(s for s, _ in rounds)
    longs = sorted(lg for _, lg in rounds)
    mid = len(rounds) // 2
    child_result({"ratio": ratios[mid], "short_s": shorts[mid], "long_s": longs[mid]})


def _run(code: str | None, args) -> dict:
    cmd = [sys.executable, __file__, "--child", "--repeat", str(args.repeat), "--long-tokens", str(args.long_tokens)]
    return run_child(cmd, code)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", action="append", default=[], help="another checkout's root to compare (repeatable)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--long-tokens", type=int, default=768)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    rows = []
    for code in [None, *args.code]:
        r = _run(code, args)
        label = code or "installed"
        rows.append({"code": label, "long_tokens": args.long_tokens, **{k: round(v, 3) for k, v in r.items()}})
        print(f"{label}: short {r['short_s']:.2f} s, long {r['long_s']:.2f} s: short / long x{r['ratio']:.2f}")
    print(write_csv("short_behind_long", rows))


if __name__ == "__main__":
    main()
