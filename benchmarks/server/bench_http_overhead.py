# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""HTTP overhead of /forward-backward: the client over 127.0.0.1 vs the same engine call in process (tiny model).

Both sides use one torch thread. The ratio (HTTP / in-process) is the cost of the wire framing, the HTTP round
trip and the server's thread hop. Writes benchmarks/results/server/bench_http_overhead.csv.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from _common import server, timeit, tiny_model, workdir, write_csv  # noqa: E402


def make_batch(rows: int, prompt: int, response: int):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 300, (rows, prompt + response), generator=g)
    mask = torch.ones_like(ids)
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "prompts": ids[:, :prompt],
        "responses": ids[:, prompt:],
        "response_mask": mask[:, prompt:],
        "old_log_probs": torch.full((rows, response), -5.7),
        "advantages": torch.randn(rows, 1, generator=g).expand(rows, response).contiguous(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--response", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    torch.set_num_threads(1)
    work = workdir()
    model = tiny_model(work)
    batch = make_batch(args.rows, args.prompt, args.response)
    meta = {"actor_config": {"loss_agg_mode": "token-mean"}, "temperature": 1.0}

    from arctic_platform.server.engines import EngineSettings, TrainingEngine, TrainingSettings

    eng = TrainingEngine(EngineSettings(model_path=str(model), max_seq_len=4096), TrainingSettings())

    def local():
        eng.forward_backward(batch, meta)
        eng.model.zero_grad(set_to_none=True)

    t_local = timeit(local, repeat=args.repeat, warmup=2)

    from arctic_platform.client import ArcticRLClientConfig, AsyncArcticRLClient, OnPremConfig

    with server(work, "--model", str(model), "--threads", "1", "--max-seq-len", "4096") as url:
        cfg = ArcticRLClientConfig(
            model_name=str(model),
            sampling_gpus=0,
            log_prob_gpus=0,
            training={"checkpoint_path": str(work / "ckpt")},
            backend=OnPremConfig(url=url),
        )
        loop = asyncio.new_event_loop()
        client = AsyncArcticRLClient(cfg)
        loop.run_until_complete(client.start())
        try:
            t_http = timeit(
                lambda: loop.run_until_complete(client.forward_backward(batch, meta)), repeat=args.repeat, warmup=2
            )
        finally:
            loop.run_until_complete(client.close())
            loop.close()
    shape = f"{args.rows}x{args.prompt + args.response}"
    rows = [
        {"method": "in_process", "batch": shape, "seconds": t_local},
        {"method": "http_client", "batch": shape, "seconds": t_http},
    ]
    path = write_csv("bench_http_overhead", rows)
    print(f"forward-backward [{shape}] in process: {t_local * 1e3:.1f} ms; over HTTP: {t_http * 1e3:.1f} ms")
    print(f"HTTP overhead ratio: {t_http / t_local:.2f}x (+{(t_http - t_local) * 1e3:.1f} ms per call)  ({path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
