# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""A weight sync from a two-rank FSDP2 training job to a vLLM sampler, on CPU: this checkout vs another one.

Each code under test runs in its own child process: it builds the training job (``ShardedTrainingEngine``, 2 gloo
ranks, float32 master weights) and the sampling job (``VllmSamplingEngine``, one replica, ``--sampler-dtype``), then
syncs ``--repeat`` times, timing each sync and sampling ``/dev/shm``'s used bytes every 2 ms while it runs. Prints,
per code, the median seconds and the peak extra ``/dev/shm`` bytes of a sync (also over the model's bf16 size: the
whole fp32 model at once is 2.0), the ratio old / new of both, and writes
``benchmarks/results/server/weight_sync.csv``. ``--code DIR`` adds another checkout's ``arctic_platform`` (e.g. a
``git worktree`` of the commit before the bucketed sync) to the same run.

    cd /tmp && python /path/to/benchmarks/server/bench_weight_sync.py --code /tmp/old-checkout [--repeat 3]

The model is a random Qwen2 (vocabulary 32000, hidden 768, 8 layers, intermediate 2048, tied embeddings: 75M
parameters, 150 MB in bf16), 1 thread per rank.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import child_result, run_child, write_csv  # noqa: E402


def _peak_shm(stop: threading.Event, out: list[int]) -> None:
    base = shutil.disk_usage("/dev/shm").used
    peak = 0
    while not stop.is_set():
        peak = max(peak, shutil.disk_usage("/dev/shm").used - base)
        time.sleep(0.002)
    out.append(peak)


def _params(model: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(model / "model.safetensors"), framework="pt") as f:
        return sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())


def child(args) -> None:
    import torch

    from arctic_platform.server.engines import TrainingSettings  # this checkout's and older ones' (--code)
    from arctic_platform.server.engines.fsdp_engine import ShardedTrainingEngine
    from arctic_platform.server.engines.model_engine import EngineSettings
    from arctic_platform.server.engines.vllm_engine import VllmSamplingEngine

    torch.manual_seed(0)
    train = EngineSettings(model_path=args.model, device="cpu", dtype="float32", max_seq_len=256)
    sample = EngineSettings(model_path=args.model, device="cpu", dtype=args.sampler_dtype, max_seq_len=256)
    trainer = ShardedTrainingEngine(train, TrainingSettings(), ["cpu", "cpu"], threads=1)
    sampler = VllmSamplingEngine(sample, {"enforce_eager": True}, threads=1, weight_sync_bucket_mb=args.bucket_mb)
    try:
        times, peaks = [], []
        for _ in range(args.repeat):
            stop, peak = threading.Event(), []
            watch = threading.Thread(target=_peak_shm, args=(stop, peak))
            watch.start()
            t0 = time.perf_counter()
            sampler.load_weights_from(trainer.weights_for_sync())
            times.append(time.perf_counter() - t0)
            stop.set()
            watch.join()
            peaks.append(peak[0])
        times.sort()
        child_result({"seconds": times[len(times) // 2], "peak_shm_bytes": max(peaks)})
    finally:
        sampler.close()
        trainer.close()


def _run(model: Path, code: str | None, args) -> dict:
    cmd = [sys.executable, __file__, "--child", "--model", str(model), "--repeat", str(args.repeat)]
    cmd += ["--sampler-dtype", args.sampler_dtype, "--bucket-mb", str(args.bucket_mb)]
    return run_child(cmd, code)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", action="append", default=[], help="another checkout's root to compare (repeatable)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sampler-dtype", default="bfloat16")
    ap.add_argument("--bucket-mb", type=float, default=16.0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    from arctic_platform.fixtures import make_tiny_model

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny_model(
            Path(tmp) / "model",
            vocab_size=32000,
            tokenizer_size=300,
            hidden_size=768,
            num_layers=8,
            num_heads=12,
            num_kv_heads=4,
            intermediate_size=2048,
            seed=0,
        )
        results = {code or "installed": _run(model, code, args) for code in [None, *args.code]}
        bf16_bytes = 2 * _params(model)
    new = results["installed"]
    for label, r in results.items():
        rows.append(
            {
                "code": label,
                "sampler_dtype": args.sampler_dtype,
                "bucket_mb": args.bucket_mb,
                "seconds": round(r["seconds"], 3),
                "peak_shm_mib": round(r["peak_shm_bytes"] / 1024**2, 1),
                "peak_shm_over_bf16_model": round(r["peak_shm_bytes"] / bf16_bytes, 2),
                "seconds_over_installed": round(r["seconds"] / new["seconds"], 2),
                "peak_shm_over_installed": round(r["peak_shm_bytes"] / max(1, new["peak_shm_bytes"]), 2),
            }
        )
        print(
            f"{label}: sync {r['seconds']:.2f} s, peak /dev/shm {r['peak_shm_bytes'] / 1024**2:.0f} MiB "
            f"({r['peak_shm_bytes'] / bf16_bytes:.2f} of the bf16 model) "
            f"(x{r['seconds'] / new['seconds']:.2f} time, x{r['peak_shm_bytes'] / max(1, new['peak_shm_bytes']):.2f} "
            "/dev/shm vs installed)"
        )
    print(write_csv("weight_sync", rows))


if __name__ == "__main__":
    main()
