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
"""docs/settings.md's table: every row of :data:`.table.SETTINGS` with what each backend profile says to a
non-default value of it (:data:`EXAMPLES`), the refusal lines exactly as the start-up check prints them."""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from arctic_platform.backend_profile import BackendProfile

from ..options import read_options
from ..verl_config import VerlConfigError
from .checks import A, F, M, R, run
from .model import BACKEND, PLACEMENT, VERL, Setting, SettingsContext
from .table import SETTINGS

__all__ = ["EXAMPLES", "Example", "example_context", "main", "render_table"]

OPT = f"{A}.optim"
ENGINES = ("dp", "megatron", "torchtitan", "veomni")
BASE = [
    "remote_backend=arctic",
    "actor_rollout_ref.rollout.name=arctic",
    "trainer.total_training_steps=10",
    # verl's actor dataclass needs a micro-batch size (verl's defaults name none)
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2",
]


@dataclass(frozen=True)
class Example:
    """A non-default value of a setting, the settings it needs to mean something, and the engine whose tree has it."""

    value: Any
    context: dict = field(default_factory=dict)
    engine: str = "dp"


def _ex(value: Any, engine: str = "dp", **context: Any) -> Example:
    return Example(value, {k.replace("__", "."): v for k, v in context.items()}, engine)


PROFILED = {"global_profiler.steps": [2], f"{A}.profiler.enable": True}
EXAMPLES: dict[str, Example] = {
    "algorithm.adv_estimator": _ex("remax"),
    f"{A}.policy_loss.loss_mode": _ex("gspo"),
    # verl's config sets both clip_ratio_low and clip_ratio_high: unset them, so clip_ratio stands in for them
    f"{A}.clip_ratio": Example(0.1, {f"{A}.clip_ratio_low": None, f"{A}.clip_ratio_high": None}),
    f"{A}.clip_ratio_low": _ex(0.1),
    f"{A}.clip_ratio_high": _ex(0.28),
    f"{A}.clip_ratio_c": _ex(10.0),
    f"{A}.loss_agg_mode": _ex("seq-mean-token-mean"),
    f"{A}.use_kl_loss": _ex(True),
    f"{A}.kl_loss_type": Example("k3+", {f"{A}.use_kl_loss": True}),
    f"{A}.calculate_sum_pi_squared": _ex(True),
    f"{A}.use_dynamic_bsz": _ex(True),
    f"{A}.ppo_epochs": _ex(2),
    f"{A}.ppo_mini_batch_size": Example(2, {"data.train_batch_size": 4}),
    f"{A}.entropy_coeff": _ex(0.01),
    f"{OPT}.optimizer": _ex("SGD"),
    f"{OPT}.optimizer_impl": _ex("bitsandbytes.optim"),
    f"{OPT}.lr_scheduler_type": _ex("cosine", engine="veomni"),
    f"{OPT}.lr_warmup_steps": Example(10, {"data.train_batch_size": 4, f"{A}.ppo_mini_batch_size": 2}),
    f"{OPT}.lr_warmup_steps_ratio": Example(0.1, {"data.train_batch_size": 4, f"{A}.ppo_mini_batch_size": 2}),
    f"{OPT}.num_cycles": Example(1.0, {f"{OPT}.lr_scheduler_type": "cosine"}),
    f"{OPT}.zero_indexed_step": Example(False, {f"{OPT}.lr_scheduler_type": "cosine"}),
    f"{OPT}.override_optimizer_config": _ex({"amsgrad": True}),
    f"{OPT}.override_optimizer_config.*": _ex({"amsgrad": True}),
    f"{OPT}.lr_decay_style": _ex("linear", engine="megatron"),
    f"{OPT}.lr_warmup_init": Example(1e-7, {f"{OPT}.lr_warmup_steps": 2}, "megatron"),
    f"{OPT}.lr_decay_steps": Example(100, {f"{OPT}.lr_decay_style": "cosine"}, "megatron"),
    f"{OPT}.use_checkpoint_opt_param_scheduler": _ex(True, engine="megatron"),
    f"{OPT}.use_precision_aware_optimizer": Example(True, {f"{OPT}.exp_avg_dtype": "bf16"}, "megatron"),
    f"{OPT}.name": _ex("Adam", engine="torchtitan"),
    f"{OPT}.decay_type": _ex("cosine", engine="torchtitan"),
    f"{OPT}.min_lr_factor": _ex(0.1, engine="torchtitan"),
    f"{OPT}.lr_min": _ex(1e-7, engine="veomni"),
    f"{OPT}.lr_start": _ex(1e-7, engine="veomni"),
    f"{OPT}.lr_decay_ratio": _ex(0.5, engine="veomni"),
    f"{A}.grad_clip": _ex(0.5),
    f"{A}.ppo_micro_batch_size": Example(3, {f"{A}.ppo_micro_batch_size_per_gpu": None}),
    f"{A}.ppo_micro_batch_size_per_gpu": _ex(3),
    f"{A}.fsdp_config.model_dtype": _ex("bf16"),
    f"{A}.fsdp_config.mixed_precision.*": _ex({"param_dtype": "fp32"}),
    f"{A}.fsdp_config.ulysses_sequence_parallel_size": _ex(2),
    f"{F}.fsdp_config.model_dtype": _ex("bf16"),
    f"{F}.fsdp_config.mixed_precision.*": _ex({"param_dtype": "fp32"}),
    f"{F}.fsdp_config.ulysses_sequence_parallel_size": _ex(2),
    f"{F}.ulysses_sequence_parallel_size": _ex(2),
    f"{F}.log_prob_use_dynamic_bsz": _ex(True),
    f"{R}.log_prob_use_dynamic_bsz": _ex(True),
    f"{R}.dtype": _ex("float32"),
    "trainer.total_training_steps": Example(None, {f"{OPT}.lr_scheduler_type": "cosine"}),
    f"{A}.checkpoint.save_contents": _ex(["model", "hf_model"]),
    f"{A}.checkpoint.async_save": _ex(True),
    f"{A}.profiler.enable": Example(True, {"global_profiler.steps": [2]}),
    f"{A}.profiler.tool_config.torch.*": Example({"discrete": True}, PROFILED),
    f"{R}.profiler.*": Example({"enable": True}, PROFILED),
    f"{A}.ulysses_sequence_parallel_size": _ex(2),
    f"{A}.qat.*": _ex({"enable": True}),
    f"{A}.router_replay.*": _ex({"mode": "R3"}),
    f"{F}.router_replay.*": _ex({"mode": "R2"}),
    f"{M}.path": _ex("/models/a-text-model"),
    f"{M}.hf_config_path": _ex("/other/config"),
    f"{M}.use_liger": _ex(True),
    f"{M}.override_config.*": _ex({"attn_implementation": "flash_attention_2"}),
    f"{M}.lora_rank": _ex(8),
    f"{M}.lora_adapter_path": _ex("/some/adapter"),
    f"{M}.lora.rank": _ex(8),
    f"{M}.mtp.*": _ex({"enable": True}),
    f"{R}.name": _ex("vllm"),
    f"{R}.calculate_log_probs": _ex(True),
    f"{R}.logprobs_mode": _ex("raw_logprobs"),
    f"{R}.free_cache_engine": Example(True, {"remote_backend.arctic.colocate": True}),
    f"{R}.engine_kwargs.*": _ex({"sglang": {"attention_backend": "flashinfer"}}),
    f"{R}.prometheus.*": _ex({"enable": True}),
    f"{R}.router_config_path": _ex("/router.yaml"),
    f"{R}.enable_rollout_routing_replay": _ex(True),
    f"{R}.quantization": _ex("fp8"),
    f"{R}.quantization_config_file": _ex("/q.json"),
    f"{R}.disaggregation.*": _ex({"enabled": True}),
    "algorithm.use_kl_in_reward": _ex(True),
    "algorithm.rollout_correction.*": _ex({"rollout_is": "token"}),
    "remote_backend.arctic.train.deepspeed.*": _ex({"zero_optimization": {"stage": 0}}),
    "remote_backend.arctic.train.zorro_train.*": _ex({"enable": True}),
    "remote_backend.arctic.train.logits.*": _ex({"optimization": "memory"}),
    "trainer.default_hdfs_dir": _ex("hdfs://x"),
}
"""For the table: a non-default value of each checked or noted setting (the table shows what each profile says)."""


def example_context(
    setting: Setting, cfgs: dict[str, DictConfig], profile: BackendProfile, cortex: bool = False
) -> Optional[tuple[SettingsContext, str]]:
    """``(ctx, shown)``: the composed config of the example's engine (``cfgs``) with :data:`EXAMPLES`' value of
    ``setting`` and the settings it needs, as the check sees it; None when the setting has no example."""
    path = setting.pattern
    example = EXAMPLES.get(path)
    if example is None:
        return None
    c = copy.deepcopy(cfgs[example.engine])  # DictConfig.copy() copies as deeply, at twice the cost
    OmegaConf.set_struct(c, False)
    updates = dict(example.context)
    if path.endswith(".*"):
        for k, v in example.value.items():
            updates[f"{path[:-2]}.{k}"] = v
    else:
        updates[path] = example.value
    for k, v in updates.items():
        OmegaConf.update(c, k, v, force_add=True, merge=False)
    opts, _ = read_options(c)
    if cortex:
        opts.backend.type = "cortex"
    stem = path.removesuffix(".*")
    shown = ", ".join(f"{k.rsplit('.', 1)[-1]}={v!r}" for k, v in updates.items() if k.startswith(stem))
    return SettingsContext(c, opts, profile), shown


def example_refusals(setting: Setting, ctx: SettingsContext) -> list[str]:
    """The refusals ``setting``'s check gives its example that are about it (a check shared by several rows, like
    the optimizer mapping, also reports the engine's other values)."""
    leaf = setting.pattern.removesuffix(".*").rsplit(".", 1)[-1]
    return [r for r in run(setting.check, ctx) if leaf in r]


def _example_verdict(setting: Setting, cfgs: dict[str, DictConfig], profile: BackendProfile) -> str:
    example = example_context(setting, cfgs, profile)
    if example is None or (setting.check is None and setting.note is None):
        return {VERL: "verl (unchanged)", PLACEMENT: "no effect (placement)"}.get(setting.role, "honoured")
    ctx, shown = example
    refusals = example_refusals(setting, ctx) if setting.check is not None else []
    if refusals:
        return "refused: " + "<br>".join(refusals)
    note = None
    if setting.note is not None:
        try:
            note = setting.note(ctx)
        except VerlConfigError:
            note = None
    if note:
        return f"honoured, with a start-up note: {note}"
    if setting.role == BACKEND or setting.check is not None:
        return f"{shown}: honoured"
    return f"{shown}: verl (unchanged)"


def render_table(cfgs: dict[str, DictConfig], profiles: tuple[BackendProfile, ...]) -> str:
    """Markdown: every setting, its role, how it is honoured, and per profile what it says to a non-default value."""
    head = "| setting | role | how | " + " | ".join(p.name for p in profiles) + " |"
    lines = [head, "|" + "---|" * (3 + len(profiles))]
    for s in SETTINGS:
        cells = [_example_verdict(s, cfgs, p).replace("|", "\\|") for p in profiles]
        lines.append(f"| `{s.pattern}` | {s.role} | {s.how} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compose_engines() -> dict[str, DictConfig]:
    """The default config of each ``model_engine`` verl ships, composed with ``remote_backend=arctic``."""
    from ..options import compose_config

    return {e: compose_config([*BASE, f"model_engine={e}"]) for e in ENGINES}


def main(argv: list[str] | None = None) -> int:
    """Print docs/settings.md's table (the embedded server as on a CPU host: eager and sdpa attention)."""
    from arctic_platform.backend_profile import ARCTIC_PLATFORM_MAIN, embedded_profile

    cfgs = compose_engines()
    print(render_table(cfgs, (embedded_profile(attn_implementations=("eager", "sdpa")), ARCTIC_PLATFORM_MAIN)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
