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
"""The CPU smoke task: "Repeat the digit: 7" -> answer with that digit.

A task a ~95k-parameter random model can learn within a few dozen GRPO steps, with a reward that gives partial
credit (GRPO normalises within a group: all-zero groups would carry no signal):

    score = 0.5 * (share of response characters that are digits) + 0.5 * (share that are the target digit)

so emitting digits at all helps, emitting the right one helps more; the score is in [0, 1]. This file is also the
``reward.custom_reward_function.path`` of the smoke run (verl loads ``compute_score`` from it by path).
"""

from __future__ import annotations

import random
from pathlib import Path

DATA_SOURCE = "arctic_repeat_digit"
PROMPT = "Repeat the digit: {digit}"


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> float:
    """verl custom reward: partial credit for digits, full credit for responses made of the target digit."""
    text = "".join(solution_str.split())
    if not text:
        return 0.0
    digits = sum(ch.isdigit() for ch in text) / len(text)
    target = text.count(str(ground_truth)) / len(text)
    return 0.5 * digits + 0.5 * target


def make_rows(n: int, split: str, seed: int) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        digit = str(rng.randrange(10))
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": PROMPT.format(digit=digit)}],
                "ability": "copy",
                "reward_model": {"style": "rule", "ground_truth": digit},
                "extra_info": {"index": i, "split": split},
            }
        )
    return rows


def write_dataset(out_dir: str | Path, n_train: int = 256, n_val: int = 16, seed: int = 0) -> tuple[Path, Path]:
    """Write ``train.parquet`` and ``val.parquet`` in verl's RL data format. Returns their paths."""
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train, val = out / "train.parquet", out / "val.parquet"
    pd.DataFrame(make_rows(n_train, "train", seed)).to_parquet(train)
    pd.DataFrame(make_rows(n_val, "val", seed + 1)).to_parquet(val)
    return train, val
