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
"""The start-up checks: each returns the :class:`~..refusal.Refusal` lines (``<setting>=<value>: <backend> <why>;
<way out>``, with ``fix`` overrides that apply the way out) of what the backend with the context's profile cannot
honour, or a note. verl's values come from verl's dataclasses (:class:`.model.SettingsContext`), verl's defaults
from verl (its dataclasses, or its generated default config for the run's ``model_engine``), never from a literal.
"""

from __future__ import annotations

import functools
import inspect
import json
from pathlib import Path
from typing import Any, Optional

from omegaconf import OmegaConf

import verl

from ..refusal import Refusal, shown
from ..verl_config import OPTIM, VerlConfigError, per_gpu, typed_value_errors
from .model import ARR, Check, CheckResult, SettingsContext

A = f"{ARR}.actor"
R = f"{ARR}.rollout"
M = f"{ARR}.model"
F = f"{ARR}.ref"
RB = "remote_backend.arctic"
VERL_ITSELF = "verl 0.9.1"
"""Who refuses a config verl's own dataclasses reject (stock verl fails on it too, with any backend)."""
V1 = "verl's V1 trainer (remote_backend=arctic)"
"""Who cannot run what the remote loop never feeds (an estimator's input): verl's own trainer, on any backend."""


def hydra_value(v: Any) -> str:
    """``v`` as the right-hand side of a Hydra override."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(hydra_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{hydra_value(x)}" for k, x in v.items()) + "}"
    return str(v)


def set_(path: str, value: Any) -> str:
    """The override ``path=value``."""
    return f"{path}={hydra_value(value)}"


@functools.lru_cache(maxsize=8)
def _verl_default_config(engine: str):
    from ..options import verl_defaults

    return verl_defaults(engine)


def verl_default(ctx: SettingsContext, path: str) -> Any:
    """verl's default of ``path`` for the run's ``model_engine`` (verl's generated default config)."""
    node = _verl_default_config(str(ctx.cfg.model_engine))
    v = OmegaConf.select(node, path, default=None, throw_on_resolution_failure=False)
    return OmegaConf.to_container(v, resolve=False) if OmegaConf.is_config(v) else v


def _off(v: Any) -> bool:
    return v in (None, "", 0, False, [], {})


def refuse_unless_default(path: str, why: str, way_out: str = "set it back to verl's default") -> Check:
    """Refuse ``path`` when it differs from verl's default (an unset / off default also accepts any off value)."""

    def check(ctx: SettingsContext) -> Optional[Refusal]:
        default, v = verl_default(ctx, path), ctx.get(path)
        if v == default or (_off(default) and _off(v)):
            return None
        return Refusal(shown(path, v), ctx.name, why, f"{way_out} ({hydra_value(default)})", [set_(path, default)])

    return check


def router_replay(role: str) -> Check:
    """MoE router record / replay (``<role>.router_replay``: verl 0.9.0's actor and ref trees; 0.9.1 moved it into
    the Megatron engine's config): any mode but ``disabled`` is refused, the backends route every token themselves."""
    path = f"{ARR}.{role}.router_replay.mode"

    def check(ctx: SettingsContext) -> Optional[Refusal]:
        v = ctx.get(path)
        if v in (None, "disabled"):
            return None
        return Refusal(
            shown(path, v),
            ctx.name,
            "has no MoE router record / replay",
            "set it to disabled",
            [set_(path, "disabled")],
        )

    return check


# ------------------------------------------------------------------------------------------------ verl itself


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def verl_rejects(ctx: SettingsContext) -> list[Refusal]:
    """Blocks verl's own dataclasses reject, and values of the wrong type (verl checks neither until it runs them):
    stock verl fails on these too, with any backend."""
    out: list[Refusal] = []
    for block in ("actor", "optim", "rollout", "algorithm"):
        try:
            dc = getattr(ctx, block)
        except VerlConfigError as e:
            out.append(
                Refusal(
                    e.path,
                    VERL_ITSELF,
                    f"rejects it (as stock verl does, with any backend): {e.message}",
                    "fix this block as verl's message says",
                )
            )
            continue
        if block == "optim":
            continue  # walked with the actor (its optim field)
        path = {"actor": A, "rollout": R, "algorithm": "algorithm"}[block]
        for key, value, type_name in typed_value_errors(dc, path):
            out.append(
                Refusal(
                    shown(key, value),
                    VERL_ITSELF,
                    f"declares it {_article(type_name)} {type_name} (a {type(value).__name__} fails when verl reads "
                    "it)",
                    f"set it to {_article(type_name)} {type_name}",
                    [set_(key, verl_default(ctx, key))],
                )
            )
    return out


# ------------------------------------------------------------------------------------------------ the arctic options


def backend_options(ctx: SettingsContext) -> list[Refusal]:
    """The backend block: a URL for onprem; colocate with async; shared disk for checkpoints; job sizes."""
    out: list[Refusal] = []
    o = ctx.opts
    if o.backend.type == "onprem" and not o.backend.url:
        out.append(
            Refusal(
                shown(f"{RB}.backend.type", "onprem"),
                "the arctic backend",
                "needs the server's address, remote_backend.arctic.backend.url",
                "set remote_backend.arctic.backend.url, or use backend.type=local (the embedded server)",
                [set_(f"{RB}.backend.type", "local")],
            )
        )
    async_on = bool(ctx.get("remote_backend.async_rollout.enable"))
    if o.colocate and async_on:
        out.append(
            Refusal(
                f"{RB}.colocate=True, remote_backend.async_rollout.enable=True",
                ctx.name,
                "cannot sample the next batch while the policy trains: a colocated sampler sleeps meanwhile",
                "turn one of them off",
                [set_("remote_backend.async_rollout.enable", False)],
            )
        )
    shared = o.shared_filesystem if o.shared_filesystem is not None else o.backend.type != "cortex"
    save, resume = ctx.get("trainer.save_freq"), ctx.get("trainer.resume_mode")
    if not shared and (int(save) > 0 or resume != "disable"):
        out.append(
            Refusal(
                f"trainer.save_freq={save!r}, trainer.resume_mode={resume!r}",
                ctx.cortex_name,
                "saves and loads checkpoints on a filesystem the trainer does not share "
                f"({RB}.shared_filesystem is false for this backend), so verl's checkpoint folders stay empty",
                "set trainer.save_freq=-1 and trainer.resume_mode=disable, or use a backend that shares the filesystem",
                [set_("trainer.save_freq", -1), set_("trainer.resume_mode", "disable")],
            )
        )
    nodes, per_node = ctx.get("trainer.nnodes"), ctx.get("trainer.n_gpus_per_node")
    if int(nodes) * int(per_node) != 1:
        # verl's validate_config then asks the Megatron actor's model-parallel sizes to divide that one GPU (they
        # place verl's own engine only: no effect here)
        megatron = [
            set_(f"{A}.megatron.{k}", 1)
            for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")
            if int(ctx.get(f"{A}.megatron.{k}") or 1) > 1
        ]
        out.append(
            Refusal(
                f"trainer.n_gpus_per_node={per_node!r}, trainer.nnodes={nodes!r}",
                "the arctic backend",
                "runs one forwarder worker (verl's side holds no model; the backend's jobs own the GPUs)",
                f"set trainer.n_gpus_per_node=1 and trainer.nnodes=1, and size the backend with {RB}.training_gpus, "
                "sampling_gpus and log_prob_gpus"
                + (" (and the Megatron actor's model-parallel sizes to 1: placement only)" if megatron else ""),
                [set_("trainer.n_gpus_per_node", 1), set_("trainer.nnodes", 1), *megatron],
            )
        )
    for job, why in (
        ("training", "every training step updates the policy there"),
        ("sampling", "every rollout generates there"),
    ):
        key = f"{RB}.{job}_gpus"
        if int(getattr(o, f"{job}_gpus")) == 0:
            out.append(
                Refusal(
                    shown(key, 0),
                    ctx.name,
                    f"would have no {job} job, and {why}",
                    "set it to at least 1",
                    [set_(key, 1)],
                )
            )
    for key in ("max_prompt_length", "max_response_length"):
        v = ctx.get(f"data.{key}")
        if v is None or int(v) <= 0:
            default = verl_default(ctx, f"data.{key}")
            out.append(
                Refusal(
                    shown(f"data.{key}", v),
                    "the arctic backend",
                    "sizes every job by it (prompt + response tokens), so it must be positive",
                    f"set it to a positive length (verl's default: {default})",
                    [set_(f"data.{key}", default)],
                )
            )
    return out


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


# ------------------------------------------------------------------------------------------------ the loss


def loss_mode(ctx: SettingsContext) -> Optional[Refusal]:
    mode = ctx.actor.policy_loss.loss_mode
    if mode not in ctx.profile.loss_modes:
        path = f"{A}.policy_loss.loss_mode"
        return Refusal(
            shown(path, mode),
            ctx.name,
            f"computes only {list(ctx.profile.loss_modes)}",
            "use loss_mode=vanilla, or a backend that implements it",
            [set_(path, "vanilla")],
        )
    return None


def clip_ratios(ctx: SettingsContext) -> Optional[Refusal]:
    fixed = ctx.profile.clip_ratios
    if fixed == "config":
        return None
    a = ctx.actor
    low, high = ctx.get(f"{A}.clip_ratio_low"), ctx.get(f"{A}.clip_ratio_high")
    eff = (a.clip_ratio if low is None else low, a.clip_ratio if high is None else high, a.clip_ratio_c)
    if tuple(float(x) for x in eff) == tuple(fixed):
        return None
    # name what the user set: clip_ratio where it stands in for an unset low / high
    names = ("clip_ratio" if low is None else "clip_ratio_low", "clip_ratio" if high is None else "clip_ratio_high")
    off = [f"{A}.{n}={v}" for n, v, f in zip((*names, "clip_ratio_c"), eff, fixed, strict=True) if float(v) != f]
    return Refusal(
        ", ".join(dict.fromkeys(off)),
        ctx.name,
        f"hard-codes (clip_ratio_low, clip_ratio_high, clip_ratio_c) = {fixed} and ignores the config",
        f"set them to {fixed} (clip_ratio={fixed[0]}), or use a backend that reads them",
        [
            set_(f"{A}.clip_ratio", fixed[0]),
            set_(f"{A}.clip_ratio_low", fixed[0]),
            set_(f"{A}.clip_ratio_high", fixed[1]),
            set_(f"{A}.clip_ratio_c", fixed[2]),
        ],
    )


def agg_mode(ctx: SettingsContext) -> Optional[Refusal]:
    mode = ctx.actor.loss_agg_mode
    allowed = list(ctx.profile.agg_modes)
    if mode in allowed:
        return None
    why = (
        "packs each micro-batch into one row, so this mode would aggregate micro-batches, not sequences"
        if mode.startswith("seq-mean")
        else "does not implement it"
    )
    path = f"{A}.loss_agg_mode"
    return Refusal(shown(path, mode), ctx.name, why, f"use one of {allowed}", [set_(path, allowed[0])])


def kl_type(ctx: SettingsContext) -> Optional[Refusal]:
    a = ctx.actor
    if not a.use_kl_loss or a.kl_loss_type in ctx.profile.kl_types:
        return None
    allowed = list(ctx.profile.kl_types)
    path = f"{A}.kl_loss_type"
    return Refusal(
        shown(path, a.kl_loss_type),
        ctx.name,
        f"computes only {allowed}",
        "use one of them, or set use_kl_loss=false",
        [set_(path, allowed[0])],
    )


def _needs_reference(ctx: SettingsContext, path: str, off: str) -> Optional[Refusal]:
    if ctx.backend_type == "cortex":
        return Refusal(
            shown(path, True),
            ctx.over,
            "has no /forward, and this needs its reference log-probs",
            f"{off}, or use backend.type=onprem",
            [set_(path, False)],
        )
    if int(ctx.opts.log_prob_gpus) == 0:
        return Refusal(
            shown(path, True),
            ctx.name,
            f"has no reference (log_prob) job with {RB}.log_prob_gpus=0, and it needs reference log-probs",
            f"set {RB}.log_prob_gpus >= 1, or {off}",
            [set_(f"{RB}.log_prob_gpus", 1)],
        )
    return None


def use_kl(ctx: SettingsContext) -> Optional[Refusal]:
    if not ctx.actor.use_kl_loss:
        return None
    return _needs_reference(ctx, f"{A}.use_kl_loss", "use_kl_loss=false")


def kl_in_reward(ctx: SettingsContext) -> Optional[Refusal]:
    if not ctx.algorithm.use_kl_in_reward:
        return None
    return _needs_reference(ctx, "algorithm.use_kl_in_reward", "use_kl_in_reward=false")


# Cortex has no /forward: verl's old log-probs are the rollout's (bypass mode), or are not computed at all and the
# backend's loss uses the current policy's, detached, which equals verl's only for one mini-batch of one epoch.
_NO_FORWARD_WAY_OUT = (
    "or take the old log-probs from the rollout (algorithm.rollout_correction.bypass_mode=true with "
    f"{R}.calculate_log_probs=true), or use backend.type=onprem"
)


def ppo_epochs(ctx: SettingsContext) -> Optional[Refusal]:
    epochs = int(ctx.actor.ppo_epochs)
    if ctx.backend_type == "cortex" and epochs > 1 and not ctx.old_from_rollout():
        path = f"{A}.ppo_epochs"
        return Refusal(
            shown(path, epochs),
            ctx.over,
            "has no /forward, and a second epoch needs old log-probs from it (those of the updated policy)",
            f"set ppo_epochs=1, {_NO_FORWARD_WAY_OUT}",
            [set_(path, 1)],
        )
    return None


def cortex_mini_batches(ctx: SettingsContext) -> Optional[Refusal]:
    if ctx.backend_type != "cortex" or ctx.old_from_rollout():
        return None
    mini, batch = int(ctx.actor.ppo_mini_batch_size), int(ctx.get("data.train_batch_size"))
    if mini < batch:
        return Refusal(
            f"{A}.ppo_mini_batch_size={mini}, data.train_batch_size={batch} (several optimizer steps a training step)",
            ctx.over,
            "has no /forward for the old log-probs they need (after the first step the current policy is no longer "
            "the old one)",
            f"set ppo_mini_batch_size=data.train_batch_size, {_NO_FORWARD_WAY_OUT}",
            [set_(f"{A}.ppo_mini_batch_size", batch)],
        )
    return None


def cortex_entropy(ctx: SettingsContext) -> Optional[Refusal]:
    coeff = float(ctx.actor.entropy_coeff or 0.0)
    if ctx.backend_type == "cortex" and coeff != 0.0:
        path = f"{A}.entropy_coeff"
        return Refusal(
            shown(path, coeff),
            ctx.over,
            "estimates entropy from the detached log-probs in its grpo loss, so the bonus has no gradient",
            "set entropy_coeff=0, or use backend.type=onprem",
            [set_(path, 0)],
        )
    return None


def _divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, max(1, min(n, at_most)) + 1) if n % d == 0)


def dynamic_bsz(ctx: SettingsContext) -> Optional[Refusal]:
    # an Arctic-Platform server's ZoRRo path packs micro-batches by the token budget (ds_worker_config.max_token_len =
    # ppo_max_token_len_per_gpu), as verl's dynamic batch size does
    zorro = ctx.profile.zorro_train and ctx.opts.train.zorro_train.enable
    if not ctx.actor.use_dynamic_bsz or ctx.profile.dynamic_bsz or zorro:
        return None
    gpus = max(1, int(ctx.opts.training_gpus))
    rows = int(ctx.actor.ppo_mini_batch_size) * int(ctx.rollout.n)
    micro = _divisor(max(1, rows // gpus), 8)
    fix = [set_(f"{A}.use_dynamic_bsz", False), set_(f"{A}.ppo_micro_batch_size_per_gpu", micro)]
    # without token budgets verl's validate_config asks the log-prob micro-batch sizes too
    for block in (R, F):
        if (
            ctx.get(f"{block}.log_prob_micro_batch_size") is None
            and ctx.get(f"{block}.log_prob_micro_batch_size_per_gpu") is None
        ):
            fix.append(set_(f"{block}.log_prob_micro_batch_size_per_gpu", micro))
    return Refusal(
        shown(f"{A}.use_dynamic_bsz", True),
        ctx.name,
        "has no token-budget micro-batches (it splits a mini-batch into ppo_micro_batch_size_per_gpu rows)",
        f"set use_dynamic_bsz=false and ppo_micro_batch_size_per_gpu (e.g. {micro}, a divisor of the {rows // gpus} "
        "rows per GPU), and the rollout's and reference's log_prob_micro_batch_size_per_gpu verl then asks for",
        fix,
    )


def micro_batches(ctx: SettingsContext) -> Optional[Refusal]:
    """verl asserts that a mini-batch per data-parallel rank is a whole number of fixed micro-batches (and DeepSpeed
    that train_batch_size = micro x gradient_accumulation_steps x GPUs); the backend would cut an uneven last one."""
    a = ctx.actor
    if a.use_dynamic_bsz:
        return None
    gpus = max(1, int(ctx.opts.training_gpus))
    micro = per_gpu(a, "ppo_micro_batch_size", gpus)
    rows = int(a.ppo_mini_batch_size) * int(ctx.rollout.n)
    if micro is None or rows % (micro * gpus) == 0:
        return None
    given = "ppo_micro_batch_size_per_gpu" if a.ppo_micro_batch_size_per_gpu is not None else "ppo_micro_batch_size"
    if rows % gpus:
        way_out, fix = (f"set {RB}.training_gpus to a divisor of {rows}", [set_(f"{RB}.training_gpus", 1)])
    else:
        d = _divisor(rows // gpus, micro)
        way_out = f"set ppo_micro_batch_size_per_gpu to a divisor of {rows // gpus}"
        fix = [set_(f"{A}.ppo_micro_batch_size", None), set_(f"{A}.ppo_micro_batch_size_per_gpu", d)]
    return Refusal(
        shown(f"{A}.{given}", getattr(a, given)),
        ctx.name,
        f"would train an uneven last micro-batch: a mini-batch of ppo_mini_batch_size x rollout.n = {rows} rows on "
        f"{RB}.training_gpus={gpus} is not a whole number of micro-batches of {micro} rows per GPU (verl asserts it)",
        way_out,
        fix,
    )


# ------------------------------------------------------------------------------------------------ model and LoRA


def lora(ctx: SettingsContext) -> Optional[Refusal]:
    rank = int(ctx.get(f"{M}.lora_rank") or 0)
    if rank > 0 and (not ctx.profile.lora or ctx.backend_type == "cortex"):
        return Refusal(
            shown(f"{M}.lora_rank", rank),
            ctx.cortex_name,
            "has no LoRA (it would train the full model)",
            "set it to 0 (full fine-tuning)",
            [set_(f"{M}.lora_rank", 0)],
        )
    return None


def megatron_lora(ctx: SettingsContext) -> Optional[Refusal]:
    rank = int(ctx.get(f"{M}.lora.rank") or 0)
    if rank == 0 or int(ctx.get(f"{M}.lora_rank") or 0) > 0:
        return None
    if ctx.profile.lora and ctx.backend_type != "cortex":
        way_out = f"set {M}.lora_rank={rank} (and lora_alpha, target_modules) instead"
        fix = [set_(f"{M}.lora.rank", 0), set_(f"{M}.lora_rank", rank)]
    else:
        way_out = "set it to 0 (this backend has no LoRA)"
        fix = [set_(f"{M}.lora.rank", 0)]
    return Refusal(
        shown(f"{M}.lora.rank", rank), ctx.cortex_name, "does not read verl's Megatron LoRA block", way_out, fix
    )


def liger(ctx: SettingsContext) -> Optional[Refusal]:
    if ctx.get(f"{M}.use_liger") and not ctx.profile.liger:
        path = f"{M}.use_liger"
        return Refusal(shown(path, True), ctx.name, "has no Liger kernels", "set it to false", [set_(path, False)])
    return None


def override_config(ctx: SettingsContext) -> list[Refusal]:
    override = ctx.get(f"{M}.override_config") or {}
    out = [
        Refusal(
            shown(f"{M}.override_config.{k}", override[k]),
            ctx.name,
            "loads the model from its own path and applies only attn_implementation from override_config",
            "remove it (edit the model's config.json instead)",
            [f"~{M}.override_config.{k}"],
        )
        for k in sorted(override)
        if k != "attn_implementation"
    ]
    attn = override.get("attn_implementation")
    allowed = ctx.profile.attn_implementations
    if attn and allowed is not None and attn not in allowed:
        # the way out is the backend's own default (sdpa on CPU): one that trains on its devices
        fix = ctx.profile.default_attn_implementation
        fix = fix if fix in allowed else allowed[0]
        out.append(
            Refusal(
                shown(f"{M}.override_config.attn_implementation", attn),
                ctx.name,
                f"can train with {list(allowed)} on its devices",
                f"use {fix} (its default) or another of them",
                [set_(f"{M}.override_config.attn_implementation", fix)],
            )
        )
    return out


def packed_attention_note(ctx: SettingsContext) -> Optional[str]:
    # a note, not a refusal: it is the only way to run such an engine without flash attention (CPU, tests)
    attn = (ctx.get(f"{M}.override_config") or {}).get("attn_implementation")
    packed = ctx.profile.packed_attention
    if attn and packed is not None and attn not in packed:
        return (
            f"{M}.override_config.attn_implementation={attn!r}: {ctx.name} packs each micro-batch into one "
            f"row and only {list(packed)} keep its sequences apart: with {attn!r} a sequence also attends to the ones "
            "packed before it (log-probs and loss differ from verl's); leave attn_implementation unset on GPUs"
        )
    return None


def sequence_parallel(path: str) -> Check:
    """Ulysses sequence parallelism: verl 0.9.1 reads ``<block>.fsdp_config.ulysses_sequence_parallel_size`` (the
    deprecated ``<block>.ulysses_sequence_parallel_size`` is copied into it when > 1)."""

    def check(ctx: SettingsContext) -> Optional[Refusal]:
        sp = int(ctx.get(path) or 1)
        if path == f"{F}.ulysses_sequence_parallel_size" and sp == int(
            ctx.get(f"{A}.ulysses_sequence_parallel_size") or 1
        ):
            return None  # verl's interpolation of the actor's deprecated key, refused there
        if sp > 1 and not ctx.profile.sequence_parallel:
            return Refusal(
                shown(path, sp),
                ctx.name,
                "has no Ulysses sequence parallelism for verl's models (each GPU would compute whole sequences)",
                f"set it to 1 (long sequences: more GPUs or ZeRO offload in {RB}.train.deepspeed)",
                [set_(path, 1)],
            )
        return None

    return check


# ------------------------------------------------------------------------------------------------ precision

_DTYPE_NAMES = {
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "fp32": "float32",
    "float32": "float32",
    "float": "float32",
    "fp64": "float64",
    "float64": "float64",
}


def dtype_name(v: Any) -> str:
    """verl's precision names (``PrecisionType``: bf16, fp32, ...) and torch's, as torch names."""
    return _DTYPE_NAMES.get(str(v).lower(), str(v))


def _compute_dtype(ctx: SettingsContext, path: str, value: Any, default: Any) -> Optional[Refusal]:
    """A compute dtype ``value`` other than verl's ``default`` must be the one the backend computes in."""
    want = dtype_name(value)
    allowed = ctx.profile.compute_dtypes
    if want not in allowed:
        why = " (float16 needs loss scaling, which it does not do)" if want == "float16" else ""
        return Refusal(
            shown(path, value),
            ctx.name,
            f"computes in {list(allowed)} only{why}",
            f"leave it {default} (verl's default)",
            [set_(path, default)],
        )
    job = ctx.opts.dtype
    have = dtype_name(job) if job else "bfloat16"  # null: bfloat16 on CUDA (float32 on a CPU server, as by default)
    if len(allowed) > 1 and have != want:
        return Refusal(
            shown(path, value),
            ctx.name,
            f"computes in the job's dtype, {RB}.dtype={job or 'null'} (null: bfloat16 on CUDA)",
            f"set {RB}.dtype={want}, or leave it {default} (verl's default)",
            [set_(f"{RB}.dtype", want)],
        )
    return None


def master_weights(block: str) -> Check:
    """``<block>.fsdp_config.model_dtype``: the dtype verl's FSDP engine loads and keeps the parameters in."""
    path = f"{ARR}.{block}.fsdp_config.model_dtype"

    def check(ctx: SettingsContext) -> Optional[Refusal]:
        v, default = ctx.get(path), verl_default(ctx, path)
        if v is None or dtype_name(v) == "float32":
            return None  # null: verl's FSDP engine trains in fp32 too
        if block == "ref":
            return Refusal(
                shown(path, v),
                ctx.name,
                "loads the reference from the checkpoint into its compute dtype, as verl casts fp32 weights to "
                "mixed_precision.param_dtype; it does not round them to another dtype first",
                f"set it to {default} (verl's default)",
                [set_(path, default)],
            )
        dtypes = ctx.profile.compute_dtypes
        compute = f"{RB}.dtype" if len(dtypes) > 1 else dtypes[0]
        return Refusal(
            shown(path, v),
            ctx.name,
            f"keeps float32 master weights (verl's default) and computes in {compute}",
            f"set it to {default} (verl's default)",
            [set_(path, default)],
        )

    return check


def mixed_precision(block: str) -> Check:
    """``<block>.fsdp_config.mixed_precision``: verl's FSDP engine reads ``param_dtype`` (the autocast / compute
    dtype), ``reduce_dtype`` and ``buffer_dtype``; null means verl's defaults (those of its engine config)."""
    path = f"{ARR}.{block}.fsdp_config.mixed_precision"

    def check(ctx: SettingsContext) -> Optional[Refusal]:
        mp = ctx.get(path)
        if not isinstance(mp, dict):
            return None
        for key in ("reduce_dtype", "buffer_dtype"):
            v = mp.get(key)
            if v is not None and dtype_name(v) != "float32":
                return Refusal(
                    shown(f"{path}.{key}", v),
                    ctx.name,
                    "keeps gradients and buffers in float32 (verl's default)",
                    "set it to fp32",
                    [set_(f"{path}.{key}", "fp32")],
                )
        if mp.get("param_dtype") is not None and dtype_name(mp["param_dtype"]) != "bfloat16":
            return _compute_dtype(ctx, f"{path}.param_dtype", mp["param_dtype"], "bf16")
        return None

    return check


def rollout_dtype(ctx: SettingsContext) -> Optional[Refusal]:
    """``rollout.dtype``: the sampler's dtype (vLLM's ``dtype``), verl's default bfloat16."""
    v = ctx.rollout.dtype
    default = verl_default(ctx, f"{R}.dtype")
    if v is None or dtype_name(v) == dtype_name(default):
        return None
    return _compute_dtype(ctx, f"{R}.dtype", v, default)


# ------------------------------------------------------------------------------------------------ rollout


def log_prob_dynamic_note(block: str):
    """Token-budget log-prob micro-batches on a backend that cuts them by its micro-batch size: memory only."""

    def note(ctx: SettingsContext) -> Optional[str]:
        if ctx.get(f"{block}.log_prob_use_dynamic_bsz") and not ctx.profile.dynamic_bsz:
            return (
                f"{block}.log_prob_use_dynamic_bsz=True: {ctx.name} cuts /forward micro-batches by its micro-batch "
                "size, not by token budgets; log-probs are per row, so only its memory use differs"
            )
        return None

    return note


def rollout_logprobs_note(ctx: SettingsContext) -> Optional[str]:
    on = ctx.rollout.calculate_log_probs
    if on and ctx.backend_type == "cortex" and not ctx.old_from_rollout():
        return (
            f"{R}.calculate_log_probs=True: {ctx.over} has no /forward, so verl's old log-probs are "
            "zeros the update never reads; verl's rollout-vs-old log-prob diagnostics compare against them"
        )
    if on and not ctx.profile.rollout_logprobs:
        return (
            f"{R}.calculate_log_probs=True: {ctx.name}'s sampler returns no log-probs, so they are not "
            "requested; training is unchanged (verl recomputes old log-probs), only verl's rollout-vs-training "
            "log-prob diagnostics are absent"
        )
    return None


def rollout_correction(ctx: SettingsContext) -> list[Refusal]:
    rc = ctx.algorithm.rollout_correction or {}  # verl's RolloutCorrectionConfig, kept a mapping by AlgoConfig
    p = ctx.profile
    out: list[Refusal] = []
    base = "algorithm.rollout_correction"
    if ctx.backend_type == "cortex" and not rc.get("bypass_mode"):
        for key in ("rollout_is", "rollout_rs"):
            if rc.get(key):
                out.append(
                    Refusal(
                        shown(f"{base}.{key}", rc.get(key)),
                        ctx.over,
                        "cannot recompute verl's old log-probs (no /forward), and this compares the rollout's with "
                        "them",
                        "turn it off, or use bypass_mode=true (old log-probs from the rollout)",
                        [set_(f"{base}.{key}", None)],
                    )
                )
        if out:
            return out
    if rc.get("rollout_is") and not (p.rollout_is_weights and p.rollout_logprobs):
        out.append(
            Refusal(
                shown(f"{base}.rollout_is", rc.get("rollout_is")),
                p.name,
                ("drops rollout IS weights" if p.rollout_logprobs else "returns no rollout log-probs")
                + ", so the updates would be silently unweighted",
                "set it to null, or use the embedded server",
                [set_(f"{base}.rollout_is", None)],
            )
        )
    for key in ("rollout_rs", "bypass_mode"):
        v = rc.get(key)
        if v and not p.rollout_logprobs:
            out.append(
                Refusal(
                    shown(f"{base}.{key}", v),
                    p.name,
                    "returns no rollout log-probs from its sampler, and this needs them",
                    "turn it off",
                    [set_(f"{base}.{key}", None if key == "rollout_rs" else False)],
                )
            )
    return out


def logprobs_mode(ctx: SettingsContext) -> Optional[Refusal]:
    mode = ctx.rollout.logprobs_mode
    default = verl_default(ctx, f"{R}.logprobs_mode")
    if mode != default:
        return Refusal(
            shown(f"{R}.logprobs_mode", mode),
            ctx.name,
            "returns log-probs of the processed (temperature-scaled) distribution only",
            f"use {default}",
            [set_(f"{R}.logprobs_mode", default)],
        )
    return None


def rollout_name(ctx: SettingsContext) -> Optional[Refusal]:
    name = ctx.get(f"{R}.name")
    if name != "arctic":
        return Refusal(
            shown(f"{R}.name", name),
            ctx.name,
            "generates through its sampling job (remote_backend=arctic), not verl's own rollout engines",
            "set actor_rollout_ref.rollout.name=arctic",
            [set_(f"{R}.name", "arctic")],
        )
    return None


def engine_kwargs_note(ctx: SettingsContext) -> Optional[str]:
    """``rollout.engine_kwargs.<engine>`` of an engine the backend does not sample with (vLLM's are sent)."""
    kwargs = ctx.get(f"{R}.engine_kwargs") or {}
    other = {e: kw for e, kw in kwargs.items() if e != "vllm" and kw}
    if other:
        listed = ", ".join(f"{R}.engine_kwargs.{e}.{k}" for e, kw in other.items() for k in kw)
        return f"{listed}: {ctx.name} samples with vLLM (or its torch engine), so these have no effect"
    return None


def colocate(ctx: SettingsContext) -> Optional[Refusal]:
    if ctx.opts.colocate and not ctx.profile.sleep_wake:
        return Refusal(
            shown(f"{RB}.colocate", True),
            ctx.name,
            "has no sleep/wake to free the sampler's memory",
            "set it to false",
            [set_(f"{RB}.colocate", False)],
        )
    return None


# ------------------------------------------------------------------------------------------------ optimizer, schedule


def training_spec(ctx: SettingsContext) -> list[Refusal]:
    """The optimizer and schedule values the backend would run differently (:func:`..verl_config.training_spec`)."""
    return [Refusal(shown(f"{OPTIM}.{m.key}", m.value), ctx.name, m.why, m.way_out, m.fix) for m in ctx.spec.mismatches]


def lr_per_step(ctx: SettingsContext) -> Optional[Refusal]:
    """verl ticks the LR once per training step; a backend without verl's schedule ticks once per /step."""
    from ..verl_config import optimizer_steps_per_training_step

    if ctx.profile.lr_schedule:
        return None
    schedule = ctx.spec.schedule
    k = optimizer_steps_per_training_step(ctx.cfg)
    if not schedule.moves() or k <= 1 or ctx.opts.train.lr_per_optimizer_step:
        return None
    if schedule.kind != "constant":
        what = shown(f"{OPTIM}.{ctx.spec.kind_key}", schedule.kind)
    elif schedule.lr_warmup_steps is not None and schedule.lr_warmup_steps > 0:
        what = shown(f"{OPTIM}.lr_warmup_steps", int(schedule.lr_warmup_steps))
    else:
        what = shown(f"{OPTIM}.lr_warmup_steps_ratio", schedule.lr_warmup_steps_ratio)
    flag = f"{RB}.train.lr_per_optimizer_step"
    return Refusal(
        f"{what} (a moving LR) with {k} optimizer steps per training step",
        ctx.name,
        "ticks its scheduler on every /step (verl ticks once per training step, so every mini-batch of a step gets "
        "the same LR)",
        f"set actor.ppo_mini_batch_size=data.train_batch_size (one step), or accept the per-optimizer-step schedule "
        f"with {flag}=true",
        [set_(flag, True)],
    )


def total_steps(ctx: SettingsContext) -> Optional[Refusal]:
    """A horizon verl derives from the dataloader reaches only a backend with verl's schedule (first /step): a backend
    that builds its scheduler with the job needs ``trainer.total_training_steps`` for a cosine schedule and for a
    warmup given as a ratio (without a horizon the ratio gives zero warmup steps)."""
    schedule = ctx.spec.schedule
    if ctx.profile.lr_schedule or schedule.horizon is not None or not schedule.needs_horizon():
        return None
    if schedule.kind == "cosine":
        what, why = shown(f"{OPTIM}.{ctx.spec.kind_key}", "cosine"), "the cosine would have no horizon"
    else:
        what = shown(f"{OPTIM}.lr_warmup_steps_ratio", schedule.lr_warmup_steps_ratio)
        why = "the ratio would give zero warmup steps"
    return Refusal(
        f"trainer.total_training_steps=None with {what}",
        ctx.name,
        f"creates its scheduler with the job, before verl counts the dataloader, so {why}",
        "set trainer.total_training_steps"
        + ("" if schedule.kind == "cosine" else ", or lr_warmup_steps (a step count) instead of the ratio"),
    )


def cosine_options(ctx: SettingsContext) -> list[Refusal]:
    """``num_cycles`` / ``zero_indexed_step``: read by verl's cosine schedule only; a backend without verl's schedule
    runs DeepSpeed's ``WarmupCosineLR`` from ``ds_config``, which has neither option."""
    schedule = ctx.spec.schedule
    if ctx.profile.lr_schedule or schedule.kind != "cosine":
        return []
    out = []
    for key in ("num_cycles", "zero_indexed_step"):
        if not hasattr(ctx.optim, key):
            continue
        v, default = getattr(ctx.optim, key), type(ctx.optim).__dataclass_fields__[key].default
        if v != default:
            out.append(
                Refusal(
                    shown(f"{OPTIM}.{key}", v),
                    ctx.name,
                    "runs DeepSpeed's WarmupCosineLR (ds_config.scheduler), which has no such option",
                    f"set it to {default!r} (verl's default)",
                    [set_(f"{OPTIM}.{key}", default)],
                )
            )
    return out


def grad_clip_note(ctx: SettingsContext) -> Optional[str]:
    """``actor.grad_clip``: verl's V1 engines clip at ``optim.clip_grad`` only."""
    legacy = ctx.get(f"{A}.grad_clip")
    if legacy is not None and float(legacy) != float(ctx.optim.clip_grad):
        return (
            f"{A}.grad_clip={legacy}: not read by verl's V1 engines, nor by {ctx.name}; the gradients are clipped at "
            f"{OPTIM}.clip_grad={ctx.optim.clip_grad} (set that one)"
        )
    return None


# ------------------------------------------------------------------------------------------------ checkpoints, misc


def save_contents(ctx: SettingsContext) -> Optional[Refusal]:
    contents = list(ctx.actor.checkpoint.save_contents or [])
    if "hf_model" in contents and not ctx.profile.hf_export:
        path = f"{A}.checkpoint.save_contents"
        return Refusal(
            shown(path, contents),
            ctx.name,
            "cannot export a Hugging Face model",
            "remove hf_model (convert the backend's checkpoint offline)",
            [set_(path, [c for c in contents if c != "hf_model"])],
        )
    return None


def hdfs(ctx: SettingsContext) -> Optional[Refusal]:
    v = ctx.get("trainer.default_hdfs_dir")
    if v:
        return Refusal(
            shown("trainer.default_hdfs_dir", v),
            ctx.name,
            "writes checkpoints on its own filesystem, so verl's HDFS copy would copy nothing",
            "unset it",
            [set_("trainer.default_hdfs_dir", None)],
        )
    return None


def zero_stage(ctx: SettingsContext) -> list[Refusal]:
    stage = ctx.opts.train.deepspeed.zero_optimization.stage
    lp_stage = ctx.opts.log_prob.zero_stage
    lp_stage = stage if lp_stage is None else lp_stage
    ok, lp_ok = ctx.profile.training_zero_stages, ctx.profile.log_prob_zero_stages
    out = []
    if ok is not None and int(stage) not in ok:
        out.append(
            Refusal(
                shown(f"{RB}.train.deepspeed.zero_optimization.stage", stage),
                ctx.name,
                f"initialises its training engine with stages {list(ok)} only (stage 0 with its bf16 + fp32 gradient "
                "accumulation fails in DeepSpeed)",
                "use stage 3",
                [set_(f"{RB}.train.deepspeed.zero_optimization.stage", 3)],
            )
        )
    follows = ctx.opts.log_prob.zero_stage is None and out  # fixing the training stage fixes the one it follows
    if lp_ok is not None and int(ctx.opts.log_prob_gpus) > 0 and int(lp_stage) not in lp_ok and not follows:
        out.append(
            Refusal(
                shown(f"{RB}.log_prob.zero_stage", lp_stage) + " (defaults to the training stage)",
                ctx.name,
                f"initialises its log_prob engine (no optimizer) with stages {list(lp_ok)} only",
                f"set {RB}.log_prob.zero_stage=3",
                [set_(f"{RB}.log_prob.zero_stage", 3)],
            )
        )
    return out


def zorro_train(ctx: SettingsContext) -> list[Refusal]:
    """ZoRRo training (``train.zorro_train``): an Arctic-Platform server's path; ``logits.compute_from_fp32_inputs``
    is read on that path only."""
    o, out = ctx.opts.train, []
    key = f"{RB}.train.zorro_train.enable"
    if o.zorro_train.enable and not ctx.profile.zorro_train:
        out.append(
            Refusal(
                shown(key, True),
                ctx.cortex_name,
                "has no ZoRRo training path (Arctic-Platform's prompt de-duplication; the loss is the same without it)",
                "set it to false, or train on an Arctic-Platform server (remote_backend.arctic.backend.type=onprem)",
                [set_(key, False)],
            )
        )
    fp32 = f"{RB}.train.logits.compute_from_fp32_inputs"
    if o.logits.compute_from_fp32_inputs and not (o.zorro_train.enable and ctx.profile.zorro_train):
        out.append(
            Refusal(
                shown(fp32, True),
                ctx.cortex_name,
                "reads it on the ZoRRo training path only"
                + ("" if ctx.profile.zorro_train else ", which it does not have"),
                "set it to false" + (f", or {key}=true" if ctx.profile.zorro_train else ""),
                [set_(fp32, False)],
            )
        )
    return out


def logits_optimization(ctx: SettingsContext) -> Optional[Refusal]:
    """``train.logits.optimization``: the modes the backend computes (Arctic-Platform's ``memory`` on its ZoRRo path
    only), checked here so that no call is the first to refuse it."""
    key, v = f"{RB}.train.logits.optimization", ctx.opts.train.logits.optimization
    modes = ctx.profile.logits_optimizations
    zorro_only = v in ctx.profile.zorro_only_logits and not ctx.opts.train.zorro_train.enable
    if v in modes and not zorro_only:
        return None
    why = (
        f"computes {v} only on its ZoRRo training path (remote_backend.arctic.train.zorro_train.enable is false)"
        if zorro_only
        else f"computes log-probs with {list(m for m in modes if m not in ctx.profile.zorro_only_logits)} only"
    )
    return Refusal(
        shown(key, v), ctx.cortex_name, why, "set it to none (the same numbers, full logits)", [set_(key, "none")]
    )


# ------------------------------------------------------------------------------------------------ profiling


def _profiled(ctx: SettingsContext) -> bool:
    return bool(ctx.get("global_profiler.steps"))


def profile_steps_note(ctx: SettingsContext) -> Optional[str]:
    if _profiled(ctx) and ctx.actor.profiler.enable and not ctx.profile.profiler:
        return (
            f"global_profiler.steps: {ctx.name} has no profiler endpoint, so the profiled steps are not profiled on "
            "the backend (verl's own side still is)"
        )
    return None


def actor_profiler_note(ctx: SettingsContext) -> Optional[str]:
    """``actor.profiler``: what of verl's torch profiler settings the backend's profiler (a trace of every training
    engine call between the step's start and stop) does not apply."""
    if not (_profiled(ctx) and ctx.profile.profiler):
        return None
    prof = ctx.actor.profiler
    if not prof.enable:
        return None
    tool = str(prof.tool or "torch")
    if tool != "torch":
        return (
            f"{A}.profiler.tool={tool!r}: {ctx.name} traces its training job with torch's profiler only; the {tool} "
            "trace covers verl's side"
        )
    torch_cfg = (prof.tool_config or {}).get("torch")
    parts = []
    if torch_cfg is not None:
        extra = [c for c in (torch_cfg.contents or []) if c not in ("cpu", "cuda")]
        if extra:
            parts.append(f"contents {extra} (it records CPU and CUDA activity)")
        if torch_cfg.discrete:
            parts.append("discrete=True (it writes one trace per profiled step)")
        sched = torch_cfg.schedule
        if sched is not None and int(sched.active or 0) > 0:
            parts.append(
                f"schedule (wait={sched.wait}, warmup={sched.warmup}, active={sched.active}): it traces every "
                "engine call between the step's start and stop"
            )
    if not parts:
        return None
    return f"{A}.profiler.tool_config.torch: {ctx.name}'s training-job trace does not apply " + "; ".join(parts)


def rollout_profiler_note(ctx: SettingsContext) -> Optional[str]:
    if _profiled(ctx) and ctx.profile.profiler and ctx.get(f"{R}.profiler.enable"):
        return (
            f"{R}.profiler.enable=True: {ctx.name} has no profiler on its sampling job, so generation is not traced "
            "(the training job is, with actor.profiler)"
        )
    return None


# ------------------------------------------------------------------------------------------------ coverage


def uncovered(ctx: SettingsContext) -> list[Refusal]:
    """Keys under ``actor_rollout_ref`` no table entry covers (added with ``+``): never silently ignored."""
    from .table import covering

    tree = OmegaConf.to_container(ctx.cfg.actor_rollout_ref, resolve=False)
    out = []
    for path, value in _leaves(tree, ARR):
        if path.endswith("._target_") or covering(path) is not None:
            continue
        out.append(
            Refusal(
                shown(path, value),
                ctx.name,
                f"does not know this setting (verl {verl.__version__}'s config has no such key, so nothing reads it)",
                "remove it",
                [f"~{path}"],
            )
        )
    return out


def _leaves(d: Any, prefix: str):
    if isinstance(d, dict) and d:
        for k, v in d.items():
            yield from _leaves(v, f"{prefix}.{k}")
    else:
        yield prefix, d


def run(check: Check, ctx: SettingsContext) -> list[Refusal]:
    """``check``'s refusals as a list; a check that reads a block verl rejects yields none (:func:`verl_rejects`
    reports the block once)."""
    try:
        result: CheckResult = check(ctx)
    except VerlConfigError:
        return []
    if result is None:
        return []
    return list(result) if isinstance(result, list) else [result]
