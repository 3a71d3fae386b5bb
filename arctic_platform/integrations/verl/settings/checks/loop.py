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
"""What the remote loop runs: the advantage estimator, multimodal data."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any, Optional

from ...refusal import Refusal, shown
from ..model import SettingsContext
from .common import V1, VERL_ITSELF, M, set_

# ------------------------------------------------------------------------------------------------ what the loop runs


# what verl's V1 trainer hands an estimator (_compute_advantage -> compute_advantage): uid, response mask, the
# token-level rewards and the algorithm config; the other keyword arguments of a registered estimator never arrive
_V1_FEEDS = {"token_level_rewards", "response_mask", "index", "config", "epsilon", "norm_adv_by_std_in_grpo"}
_V1_ADVANTAGE_BATCH = ("uid", "response_mask", "rm_scores", "rollout_log_probs", "old_log_probs", "ref_log_prob")


def estimator(ctx: SettingsContext) -> Optional[Refusal]:
    """``algorithm.adv_estimator``: each estimator verl registers, against what verl's V1 trainer feeds it.

    A critic-based one (GAE) is refused by verl's remote-backend trainer itself (``validate_remote_backend_config``,
    before Ray starts); one that takes an input V1's advantage step never computes (ReMax's greedy
    ``reward_baselines``; the optimal token baseline's ``sum_pi_squared``) or reads fields it never fetches (GDPO's
    per-dimension rewards and ``prompts``) would fail at the first step."""
    from verl.trainer.ppo import core_algos

    name = str(ctx.algorithm.adv_estimator)
    path = "algorithm.adv_estimator"
    way_out = "use a critic-free estimator V1 feeds, e.g. algorithm.adv_estimator=grpo"
    fix = [set_(path, "grpo")]
    from verl.trainer.ppo.utils import need_critic

    if need_critic(ctx.cfg):
        return None  # verl's remote-backend trainer refuses a critic itself (validate_remote_backend_config)
    try:
        fn = core_algos.get_adv_estimator_fn(name)
    except Exception as e:  # verl's registry refuses an unknown name
        return Refusal(shown(path, name), VERL_ITSELF, f"has no such estimator ({e})", way_out, fix)
    if name in (
        core_algos.AdvantageEstimator.OPTIMAL_TOKEN_BASELINE,
        core_algos.AdvantageEstimator.TIR_OPTIMAL_TOKEN_BASELINE,
    ):
        return Refusal(
            shown(path, name),
            V1,
            "never puts sum_pi_squared in the batch its advantage step reads ("
            + ", ".join(_V1_ADVANTAGE_BATCH)
            + "), and verl asserts on it at the first step, whatever actor.calculate_sum_pi_squared says",
            way_out,
            fix,
        )
    if name == core_algos.AdvantageEstimator.GDPO:
        return Refusal(
            shown(path, name),
            V1,
            "hands GDPO neither the per-dimension reward scores (algorithm.gdpo_reward_keys) nor the prompts it "
            "reads; its advantage step fetches only " + ", ".join(_V1_ADVANTAGE_BATCH) + " (stock verl V1 fails too)",
            way_out,
            fix,
        )
    params = inspect.signature(fn).parameters.values()
    missing = [
        p.name
        for p in params
        if p.default is inspect.Parameter.empty
        and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        and p.name not in _V1_FEEDS
    ]
    if missing:
        return Refusal(
            shown(path, name),
            V1,
            f"never computes {', '.join(missing)} for it (its advantage step reads only "
            + ", ".join(_V1_ADVANTAGE_BATCH)
            + "), so the first step fails",
            way_out,
            fix,
        )
    return None


_VISION_KEYS = ("vision_config", "visual", "vision_tower", "image_token_id", "image_token_index", "audio_config")


def _model_config(path: Any) -> Optional[dict]:
    try:
        return json.loads((Path(str(path)).expanduser() / "config.json").read_text())
    except (OSError, ValueError, TypeError):
        return None


def _first_row_has(files: Any, keys: tuple[str, ...]) -> Optional[str]:
    """The first of ``keys`` that is a non-empty column in the first row of the first parquet file (None when none,
    or the file cannot be read here: verl reports that itself)."""
    if not files:
        return None
    first = files[0] if isinstance(files, (list, tuple)) else files
    try:
        import pyarrow.parquet as pq

        table = pq.ParquetFile(str(first)).read_row_group(0)
    except Exception:  # not a local parquet file this check can read: verl's dataloader reports it
        return None
    for key in keys:
        if key in table.column_names and len(table) and table.column(key)[0].as_py():
            return key
    return None


def multimodal(ctx: SettingsContext) -> list[Refusal]:
    """A vision / audio model, or data with images or videos, on a backend whose sampler takes text only."""
    if ctx.profile.image_inputs:
        return []
    out: list[Refusal] = []
    path = ctx.opts.model_path or ctx.get(f"{M}.path")
    config = _model_config(path)
    if config is not None:
        keys = [k for k in _VISION_KEYS if k in config]
        if keys:
            out.append(
                Refusal(
                    shown(f"{M}.path", path),
                    ctx.name,
                    f"generates from text only, and this model reads images ({keys[0]} in its config.json)",
                    "use a text-only model",
                )
            )
    image_key, video_key = ctx.get("data.image_key"), ctx.get("data.video_key")
    column = _first_row_has(ctx.get("data.train_files"), tuple(k for k in (image_key, video_key) if k))
    if column is not None:
        out.append(
            Refusal(
                shown("data.train_files", ctx.get("data.train_files")),
                ctx.name,
                f"generates from text only, and the data has {column!r} (data.image_key / data.video_key)",
                "use text-only data",
            )
        )
    return out
