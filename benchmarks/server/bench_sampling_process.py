# Copyright 2026 The arctic-verl Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
# SPDX-License-Identifier: Apache-2.0
"""Sampling + training engines of the embedded server run at once: in-process threads vs a sampling process.

Builds a training engine and a sampling engine on the tiny model, then times N forward-backward+step calls alone,
N generate calls alone, and both at once (two threads), once with the in-process sampling engine and once with
:class:`arctic_platform.server.engines.sampling_process.ProcessSamplingEngine`. Prints the concurrent wall
time of each mode and their ratio; writes a CSV. Run from outside the repository root.

    python benchmarks/server/bench_sampling_process.py --out /tmp/bench_sp
"""

from __future__ import annotations

import argparse
import csv
import threading
import time
from pathlib import Path


def _batch(torch, b, p, r, vocab):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, vocab, (b, p + r), generator=g)
    return {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "prompts": ids[:, :p],
        "responses": ids[:, p:],
        "response_mask": torch.ones(b, r),
        "old_log_probs": torch.zeros(b, r),
        "advantages": torch.randn(b, r, generator=g),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/bench_sampling_process")
    ap.add_argument("--iters", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process (the server's --threads)")
    args = ap.parse_args()
    import torch

    from arctic_platform.fixtures import make_tiny_model
    from arctic_platform.server.engines import (
        EngineSettings,
        GenerateItem,
        SamplingEngine,
        TrainingEngine,
        TrainingSettings,
    )
    from arctic_platform.server.engines.sampling_process import ProcessSamplingEngine

    torch.set_num_threads(args.threads)
    out = Path(args.out)
    model = make_tiny_model(out / "model")
    s = EngineSettings(model_path=str(model), max_seq_len=512)
    train = TrainingEngine(s, TrainingSettings(lr=1e-5))
    batch = _batch(torch, 16, 16, 32, train.vocab_size)
    items = [GenerateItem(prompt=list(range(5, 21)), max_tokens=32, seed=i, ignore_eos=True) for i in range(16)]

    def do_train():
        for _ in range(args.iters):
            train.forward_backward(batch, {"temperature": 1.0})
            train.step()

    def run(fn_list):
        t0 = time.perf_counter()
        ts = [threading.Thread(target=f) for f in fn_list]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        return time.perf_counter() - t0

    rows = []
    for mode in ("thread", "process"):
        samp = (
            SamplingEngine(s, max_batch_rows=64)
            if mode == "thread"
            else ProcessSamplingEngine(s, max_batch_rows=64, threads=args.threads)
        )

        def do_gen(samp=samp):
            for _ in range(args.iters):
                samp.generate(items)

        do_gen()  # warm-up
        t_train = run([do_train])
        t_gen = run([do_gen])
        t_both = run([do_train, do_gen])
        samp.close()
        rows.append({"mode": mode, "train_s": t_train, "generate_s": t_gen, "both_s": t_both})
        print(
            f"{mode:8s} train alone {t_train:6.2f}s  generate alone {t_gen:6.2f}s  both at once {t_both:6.2f}s  "
            f"(overlap efficiency {(t_train + t_gen) / t_both:4.2f}x of serial)"
        )
    ratio = rows[0]["both_s"] / rows[1]["both_s"]
    print(f"concurrent wall time thread/process: {ratio:.2f}x")
    with open(out / "bench_sampling_process.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
