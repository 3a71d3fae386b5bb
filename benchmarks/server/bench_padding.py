# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""``forward_backward`` + ``step`` of the same rows framed at verl's config maxima vs at their own maxima, on CPU.

8 GSM8K-shaped rows (prompts 60-150 tokens, responses 90-300) go through the training engine twice per code under
test, each frame in a fresh child process with the same seed: once dense-padded to ``P=512 / R=1024`` (what verl's
``data.max_prompt_length`` / ``max_response_length`` give the wire), once to the rows' own maxima. Prints the time
ratio padded / own (1.0 = the padding costs nothing) and the loss of both (they must agree), and writes
``benchmarks/results/server/padding.csv``. ``--code DIR`` runs the same children against another checkout's
``arctic_platform`` (e.g. a ``git worktree`` of an older commit) too, for an A/B in one run.

    cd /tmp && python /path/to/benchmarks/server/bench_padding.py [--code /tmp/old-checkout] [--repeat 3]

The model is a small random Qwen2 (vocabulary 4096, hidden 128, 4 layers), float32, 2 threads.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import child_result, run_child, write_csv  # noqa: E402

PROMPTS = [60, 85, 110, 150, 72, 95, 130, 66]
RESPONSES = [300, 120, 90, 210, 260, 150, 180, 100]


def _frame(p_max: int, r_max: int):
    import torch

    g = torch.Generator().manual_seed(0)
    b = len(PROMPTS)
    ids = torch.zeros(b, p_max + r_max, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, (pl, rl) in enumerate(zip(PROMPTS, RESPONSES, strict=True)):
        ids[i, p_max - pl : p_max] = torch.randint(3, 4000, (pl,), generator=g)
        ids[i, p_max : p_max + rl] = torch.randint(3, 4000, (rl,), generator=g)
        mask[i, p_max - pl : p_max + rl] = 1
    resp = mask[:, p_max:].clone()
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 0.8, -0.8, 0.2, -0.2]).unsqueeze(1).expand(b, r_max) * resp
    return {
        "input_ids": ids,
        "attention_mask": mask,
        "prompts": ids[:, :p_max].clone(),
        "responses": ids[:, p_max:].clone(),
        "response_mask": resp,
        "advantages": adv.contiguous(),
        "old_log_probs": -8.3 * resp.float(),
    }


def child(args) -> None:
    import torch

    from arctic_platform.server import engines as E

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    settings = E.EngineSettings(model_path=args.model, device="cpu", dtype="float32", max_seq_len=2048)
    eng = E.TrainingEngine(settings, E.TrainingSettings())
    frame = _frame(args.p_max, args.r_max)
    meta = {"actor_config": {"ppo_micro_batch_size_per_gpu": 4, "loss_agg_mode": "token-mean"}}
    first = eng.forward_backward(frame, meta)["metrics"]
    eng.step()  # warm-up step (first-call allocations)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        eng.forward_backward(frame, meta)
        eng.step()
        times.append(time.perf_counter() - t0)
    times.sort()
    child_result({"seconds": times[len(times) // 2], "loss": first["loss"], "grad_norm": first.get("grad_norm")})


def _run(model: Path, code: str | None, p_max: int, r_max: int, args) -> dict:
    cmd = [sys.executable, __file__, "--child", "--model", str(model), "--p-max", str(p_max), "--r-max", str(r_max)]
    cmd += ["--repeat", str(args.repeat), "--threads", str(args.threads)]
    return run_child(cmd, code)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--code", action="append", default=[], help="another checkout's root to compare (repeatable)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--p-max", type=int, default=512, help=argparse.SUPPRESS)
    ap.add_argument("--r-max", type=int, default=1024, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    from arctic_platform.fixtures import make_tiny_model

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = make_tiny_model(
            Path(tmp) / "model", vocab_size=4096, hidden_size=128, num_layers=4, intermediate_size=512, seed=0
        )
        for code in [None, *args.code]:
            label = code or "installed"
            own = _run(model, code, max(PROMPTS), max(RESPONSES), args)
            padded = _run(model, code, 512, 1024, args)
            ratio = padded["seconds"] / own["seconds"]
            for frame, r in (("own maxima", own), ("P=512 R=1024", padded)):
                rows.append({"code": label, "frame": frame, **r, "padded_over_own": round(ratio, 2)})
            print(
                f"{label}: padded {padded['seconds']:.2f} s, own maxima {own['seconds']:.2f} s: x{ratio:.2f}; loss "
                f"{padded['loss']:.9f} vs {own['loss']:.9f}"
            )
    print(write_csv("padding", rows))


if __name__ == "__main__":
    main()
