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
"""``arctic-verl prepare-gsm8k``: convert locally downloaded GSM8K files into verl's RL data format.

The usual preprocessing downloads from a hub, which many clusters cannot reach. This reads the files you already
have (parquet or jsonl with ``question`` and ``answer`` columns, as in the ``openai/gsm8k`` data set) and writes
``train.parquet`` / ``test.parquet`` with verl's columns; ``data_source="openai/gsm8k"`` selects verl's built-in
GSM8K reward (``verl.utils.reward_score.gsm8k``).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

DATA_SOURCE = "openai/gsm8k"
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
ANSWER_RE = re.compile(r"#### (\-?[0-9\.\,]+)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", type=Path, action="append", required=True,
                        help="GSM8K file (parquet or jsonl); repeat for train and test; the split comes from the "
                        "file name (train/test) unless --split is given")  # fmt: skip
    parser.add_argument("--split", choices=["train", "test"], help="split of a single --input")
    parser.add_argument("--out", type=Path, required=True, help="output folder for train.parquet / test.parquet")


def extract_solution(answer: str) -> str:
    m = ANSWER_RE.search(answer)
    if m is None:
        raise ValueError(f"no '#### <number>' final answer in {answer[-80:]!r}")
    return m.group(1).replace(",", "")


def _read(path: Path):
    import pandas as pd

    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    if path.suffix in (".jsonl", ".json"):
        return pd.read_json(path, lines=path.suffix == ".jsonl")
    raise ValueError(f"{path}: expected .parquet or .jsonl")


def convert(frame, split: str) -> list[dict]:
    missing = {"question", "answer"} - set(frame.columns)
    if missing:
        raise ValueError(f"GSM8K input lacks columns {sorted(missing)}")
    rows = []
    for i, (question, answer) in enumerate(zip(frame["question"], frame["answer"], strict=True)):
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": f"{question} {INSTRUCTION}"}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": extract_solution(answer)},
                "extra_info": {"split": split, "index": i, "answer": answer, "question": question},
            }
        )
    return rows


def run(args) -> int:
    import pandas as pd

    if args.split and len(args.input) != 1:
        print("prepare-gsm8k: --split applies to a single --input", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.input:
        split = args.split or next((s for s in ("train", "test") if s in path.name.lower()), None)
        if split is None:
            print(f"prepare-gsm8k: cannot tell the split of {path.name}; pass --split", file=sys.stderr)
            return 2
        rows = convert(_read(path), split)
        target = args.out / f"{split}.parquet"
        pd.DataFrame(rows).to_parquet(target)
        print(f"prepare-gsm8k: {path} -> {target} ({len(rows)} rows)")
    return 0
