# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Generation throughput of the tiny model on CPU: concurrent requests (batched by the server) vs one at a time.

Both runs send the same N single-prompt /generate requests through the client; the first awaits them together, the
second one after another. Writes benchmarks/results/server/bench_generate.csv.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import server, tiny_model, workdir, write_csv  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    work = workdir()
    model = tiny_model(work)

    from arctic_platform.client import ArcticRLClientConfig, AsyncArcticRLClient, OnPremConfig

    prompts = [[3 + (i * 7 + j) % 290 for j in range(args.prompt_len)] for i in range(args.requests)]
    sp = lambda i: {"temperature": 1.0, "max_tokens": args.max_tokens, "seed": i, "ignore_eos": True}  # noqa: E731

    async def run(url):
        cfg = ArcticRLClientConfig(
            model_name=str(model), training_gpus=0, log_prob_gpus=0, backend=OnPremConfig(url=url)
        )
        async with AsyncArcticRLClient(cfg) as c:
            await c.generate(prompts[:2], sp(0))  # warm up
            before = await c.job_info(c.sampling_job_id)
            t0 = time.perf_counter()
            res = await asyncio.gather(*(c.generate([p], sp(i)) for i, p in enumerate(prompts)))
            t_conc = time.perf_counter() - t0
            info = await c.job_info(c.sampling_job_id)
            info = {k: info[k] - before[k] for k in ("generate_batches", "generate_requests")}
            n_conc = sum(r[0]["generation_len"] for r in res)
            t0 = time.perf_counter()
            n_seq = 0
            for i, p in enumerate(prompts):
                n_seq += (await c.generate([p], sp(i)))[0]["generation_len"]
            t_seq = time.perf_counter() - t0
        return t_conc, n_conc, t_seq, n_seq, info

    with server(work, "--model", str(model), "--threads", str(args.threads)) as url:
        t_conc, n_conc, t_seq, n_seq, info = asyncio.run(run(url))
    rows = [
        {"method": "concurrent_batched", "requests": args.requests, "tokens": n_conc, "seconds": t_conc,
         "tokens_per_s": n_conc / t_conc},
        {"method": "sequential", "requests": args.requests, "tokens": n_seq, "seconds": t_seq,
         "tokens_per_s": n_seq / t_seq},
    ]  # fmt: skip
    path = write_csv("bench_generate", rows)
    print(f"{args.requests} requests x {args.max_tokens} tokens, tiny model, CPU, {args.threads} thread(s)")
    print(f"concurrent (server batches them): {n_conc / t_conc:,.0f} tokens/s ({t_conc:.2f} s)")
    print(f"sequential (one at a time):       {n_seq / t_seq:,.0f} tokens/s ({t_seq:.2f} s)")
    print(f"batching speed-up: {(n_conc / t_conc) / (n_seq / t_seq):.1f}x; the concurrent phase ran "
          f"{info['generate_requests']} requests in {info['generate_batches']} decode batches  ({path})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
