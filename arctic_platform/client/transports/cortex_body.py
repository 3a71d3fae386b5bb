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
"""What the client sends to Snowflake Cortex: the create body, the forward-backward frame, the step's learning rate,
and the settings Cortex has no place for (refused before any job exists).

**Create body** (SnowAPI ``SubJobConfig`` [8.1-8.3]): from the same job configs as an on-prem ``/initialize``. Sub-jobs
in the order sampling, log_probability, training; each with ``model_name``, ``dtype`` and ``seed`` when set. The
sampling sub-job's ``inference_config`` holds ``max_seq_len``, ``n_gpus`` and ``vllm_config`` (without
``max_model_len`` and ``tensor_parallel_size``: ``max_seq_len`` and ``n_gpus`` own them on this wire). The training
sub-job's ``training_config`` holds the typed fields ``max_seq_len``, ``n_gpus``, ``train_batch_size`` and
``optimizer`` (``{name: AdamW, lr, betas, eps, weight_decay}``), ``gradient_clipping`` (0 when clipping is off), and
in the open passthrough ``activation_checkpointing``, ``attn_implementation`` (when named; else the service's
default), ``model_provider`` (``liger``),
``sp_size`` (> 1 only) and ``ds_config`` (the DeepSpeed block with verl's batch sizing, without optimizer or
scheduler: those are the typed fields and the per-step learning rate).

**What has no place** (:func:`cortex_refusals`): LoRA, ``full_determinism``, ``cuda_ipc`` / ``low_memory`` (a
colocated server's weight-sync strategy), ``arctic_inference_config`` (FCA, speculative decoding), a log-prob
sub-job (Cortex has no public log-prob call [1.1], so it could never be used), a tensor-parallel size other than
the sampling GPUs, and a training job without ``train_batch_size`` (the typed create requires it [8.2]). The
checkpoint root is not sent (Cortex keeps checkpoints in its own store; ``save(path=...)`` is refused).

**The LR schedule** travels where SnowAPI has a place for it: ``/step``'s ``learning_rate`` [6.2]. The client runs
verl's own schedule (:func:`arctic_platform.schedule.build_scheduler`, the embedded server's) and sends every
step's rate; a tick follows each step the caller ticks (verl: the last mini-batch of a training step).

**Forward-backward** (:func:`forward_backward_frame`). SnowAPI leaves the frame's keys to the backend [10.3]; this is
the ArcticTraining "pluggable loss" contract Arctic-Platform's own Cortex RL recipe sends
(``cortex-client/recipes/rl_loop.py`` + ``neutrino_common.collate``) and its ``grpo`` loss reads
(``arctic_platform/rl/processors/grpo.py``), with the prompt length and verl's loss settings added::

    {"args": [],
     "kwargs": {"input_ids", "attention_mask"[, "position_ids"], "use_cache": False},      # [b, P+R], model inputs
     "context": {"input_ids",
                 "advantages", "loss_mask"[, "old_log_probs_shifted"][, "rollout_is_weights"],   # [b, P+R], shifted
                 "prompt_length": P, "response_length": R, "temperature": T},
     "processing": {"loss_fn": "grpo", "post": ["apply_temperature"],
                    "config": {"eps_clip", "eps_clip_higher", "c_clip", "loss_agg_mode", "entropy_coeff",
                               ["loss_scale_factor"], "global_batch_size", "batch_num_tokens", "dp_size",
                               "temperature"}}}

"Shifted" is the backend's convention [10.4]: column ``i`` holds the value of token ``i + 1`` (response token ``k``,
at column ``P + k``, is at column ``P + k - 1``). ``old_log_probs_shifted`` is sent only when the batch carries old
log-probs (verl's rollout ones, bypass mode); without it the ``grpo`` loss uses the current policy's, detached,
which is verl's on-policy value exactly when the batch is one mini-batch of one epoch (the plugin refuses anything
else at start-up). The prompt length and ``temperature`` travel in ``context`` (the seed put the lengths in
``kwargs``, which is handed to the model's ``forward``); the loss settings in ``processing.config``, under the
``grpo`` loss's names.
"""

from __future__ import annotations

from typing import Any

from ..config import ArcticRLClientConfig
from ..errors import ArcticRLError
from .snowapi import CREATE_JOB_TYPES

__all__ = [
    "FWD_BWD_CONTEXT",
    "FWD_BWD_CONFIG",
    "CortexSchedule",
    "cortex_refusals",
    "forward_backward_frame",
    "shift_left",
    "step_reply",
    "sub_job_configs",
]

LOSS_FN = "grpo"
FWD_BWD_CONTEXT = (
    "input_ids", "advantages", "loss_mask", "old_log_probs_shifted", "rollout_is_weights",
    "prompt_length", "response_length", "temperature",
)  # fmt: skip
"""Every key :func:`forward_backward_frame` may put in ``context``."""
FWD_BWD_CONFIG = (
    "eps_clip", "eps_clip_higher", "c_clip", "loss_agg_mode", "entropy_coeff", "loss_scale_factor",
    "global_batch_size", "batch_num_tokens", "dp_size", "temperature",
)  # fmt: skip
"""Every key :func:`forward_backward_frame` may put in ``processing.config``."""
_SHIFTED = {"advantages": 0.0, "loss_mask": 0.0, "old_log_probs": 0.0, "rollout_is_weights": 1.0}
"""Response-aligned batch fields sent shifted, with their padding value."""


# ------------------------------------------------------------------------------------------------ create body


def cortex_refusals(config: ArcticRLClientConfig) -> list[str]:
    """What this config asks for that Cortex has no field for, one line each (empty: it can be created)."""
    t, s = config.training, config.sampling
    out = []
    if t.lora:
        out.append("training.lora: Cortex's typed create has no LoRA for this client (it would train the full model)")
    if t.full_determinism:
        out.append("training.full_determinism=true: Cortex's create has no determinism setting")
    if t.cuda_ipc or t.low_memory:
        out.append("training.cuda_ipc / low_memory: a colocated server's weight-sync strategy; Cortex places sub-jobs")
    if s.arctic_inference_config:
        out.append("sampling.arctic_inference_config (FCA / speculative decoding): Cortex's create has no such field")
    if config.log_prob_gpus > 0:
        out.append(
            f"log_prob_gpus={config.log_prob_gpus}: Cortex has no log-prob call, so a log_probability sub-job would "
            "hold its GPUs unused; set it to 0"
        )
    tp = s.vllm_config.get("tensor_parallel_size")
    if tp not in (None, config.sampling_gpus) and config.sampling_gpus > 0:
        out.append(
            f"sampling.vllm_config.tensor_parallel_size={tp}: Cortex's sampling sub-job uses its n_gpus "
            f"({config.sampling_gpus}) for it"
        )
    if config.training_gpus > 0 and t.train_batch_size is None:
        out.append("training.train_batch_size is unset: Cortex's create requires it (sequences per optimizer step)")
    return out


def sub_job_configs(config: ArcticRLClientConfig) -> list[dict[str, Any]]:
    """The ``sub_job_configs`` of the create body (see the module docstring)."""
    out = []
    for jt in ("sampling", "log_prob", "training"):
        gpus = config.job_gpus(jt)
        if gpus <= 0:
            continue
        sub: dict[str, Any] = {"job_type": CREATE_JOB_TYPES[jt], "model_name": config.model_name}
        if config.dtype is not None:
            sub["dtype"] = config.dtype
        if config.seed is not None:
            sub["seed"] = config.seed
        if jt == "training":
            sub["training_config"] = _training_config(config)
        else:
            vllm = {
                k: v
                for k, v in config.sampling.vllm_config.items()
                if k not in ("max_model_len", "tensor_parallel_size")
            }
            inference: dict[str, Any] = {"max_seq_len": config.max_seq_len, "n_gpus": gpus}
            if vllm:
                inference["vllm_config"] = vllm
            sub["inference_config"] = inference
        out.append(sub)
    return out


def _training_config(config: ArcticRLClientConfig) -> dict[str, Any]:
    t = config.training
    o = t.optimizer
    tc: dict[str, Any] = {
        "max_seq_len": config.max_seq_len,
        "n_gpus": config.training_gpus,
        "train_batch_size": t.train_batch_size,
        "optimizer": {
            "name": "AdamW",
            "lr": o.lr,
            "betas": list(o.betas),
            "eps": o.eps,
            "weight_decay": o.weight_decay,
        },
        "gradient_clipping": float(o.grad_clip) if o.grad_clip and o.grad_clip > 0 else 0.0,
    }
    wc = t.ds_worker_config or {}
    if "enable_gradient_checkpointing" in wc:
        tc["activation_checkpointing"] = bool(wc["enable_gradient_checkpointing"])
    if wc.get("attn_implementation"):  # unset: the service's own default for its GPUs
        tc["attn_implementation"] = wc["attn_implementation"]
    if wc.get("use_liger"):
        tc["model_provider"] = "liger"
    if t.sequence_parallel_size > 1:
        tc["sp_size"] = t.sequence_parallel_size
    ds = {k: v for k, v in config.training_ds_config().items() if k not in ("optimizer", "scheduler")}
    ds.pop("gradient_clipping", None)
    tc["ds_config"] = ds
    return tc


# ------------------------------------------------------------------------------------------------ LR schedule


class CortexSchedule:
    """verl's LR schedule of a training config, evaluated client-side (Cortex's ``/step`` takes ``learning_rate``).

    ``rate()`` is the rate of the next step; ``tick()`` advances the schedule (verl: once per training step). The
    horizon may come late (``set_horizon``: verl counts its dataloader after the job exists).

    The position (ticks, and the optimizer steps sent through it) travels in a reconnect handle, so a client
    re-attached after N steps goes on at N. The service counts every ``/step`` of the job (``global_steps``): when
    its count differs from this schedule's (a handle older than the job's last steps, or another client stepping
    the job), :meth:`observe` moves the schedule to where the service's count puts it, ``(global_steps - 1) //
    optimizer_steps_per_tick`` ticks before this step's own tick (verl's pattern: the tick follows the last of a
    training step's optimizer steps), and says so.
    """

    def __init__(self, config: ArcticRLClientConfig):
        from ...ds_config import schedule_settings
        from ...schedule import TrainingSettings

        t = config.training
        self.settings = TrainingSettings(lr=t.optimizer.lr, **schedule_settings(t.lr_schedule))
        self.per_tick = int(t.optimizer_steps_per_tick)
        self.ticks = 0
        self.steps = 0
        self._scheduler = None

    def position(self) -> dict:
        """Where the schedule stands (JSON): ticks, optimizer steps sent through it, the horizon if known."""
        return {"ticks": self.ticks, "steps": self.steps, "total_steps": self.settings.total_steps}

    def restore(self, position: dict) -> None:
        """Go on from a :meth:`position` (a reconnect handle's)."""
        self.ticks, self.steps = int(position["ticks"]), int(position["steps"])
        if position.get("total_steps") is not None:
            self.set_horizon(int(position["total_steps"]))

    def observe(self, global_steps: Any) -> str | None:
        """Count the optimizer step just taken (before its tick, if it ticks) and compare with the service's
        ``global_steps`` after it; on a difference, move to the service's position and return a line saying so
        (None when they agree or the reply has no count)."""
        self.steps += 1
        if not isinstance(global_steps, int) or isinstance(global_steps, bool) or global_steps == self.steps:
            return None
        was_ticks, was_steps = self.ticks, self.steps
        self.steps, self.ticks = global_steps, (global_steps - 1) // self.per_tick
        return (
            f"cortex: the job has taken {global_steps} optimizer step(s), this client's LR schedule counted "
            f"{was_steps}: it moves from tick {was_ticks} to tick {self.ticks} (optimizer_steps_per_tick "
            f"{self.per_tick}); the step just taken used the rate of tick {was_ticks}"
        )

    def set_horizon(self, total: int) -> None:
        have = self.settings.total_steps
        if have is not None and int(have) != int(total):
            raise ArcticRLError(
                None, f"total_training_steps {total} contradicts the schedule's horizon {have}", "/step"
            )
        self.settings.total_steps = int(total)

    def _lr_after(self, ticks: int) -> float:
        import torch

        from ...schedule import build_scheduler

        st = self.settings
        if st.lr_scheduler_type == "constant" and st.warmup_steps <= 0 and st.warmup_steps_ratio <= 0:
            return float(st.lr)  # verl's constant schedule without warmup: the peak rate throughout
        if self.settings.needs_horizon() and not self.settings.total_steps:
            raise ArcticRLError(
                None,
                f"the {self.settings.lr_scheduler_type} LR schedule needs its horizon: pass total_training_steps to "
                "step() (or set training.lr_schedule.total_training_steps)",
                "/step",
            )
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=self.settings.lr)
        sched = build_scheduler(opt, self.settings)
        for _ in range(ticks):
            opt.step()
            sched.step()
        return float(sched.get_last_lr()[0])

    def rate(self) -> float:
        """The rate of the next step."""
        return self._lr_after(self.ticks)

    def tick(self) -> float:
        """Advance one tick; the rate after it (verl's ``lr`` metric)."""
        self.ticks += 1
        return self._lr_after(self.ticks)


# ------------------------------------------------------------------------------------------------ forward-backward


def shift_left(full, pad: float = 0.0):
    """``[b, S]`` -> ``[b, S]`` with column ``i`` holding column ``i + 1`` (the last column ``pad``)."""
    import torch

    out = torch.full_like(full, pad)
    out[:, :-1] = full[:, 1:]
    return out


def _full_width(name: str, t, P: int, S: int, pad: float):
    """A response-aligned field as ``[b, S]``: ``[b, R]`` placed at columns ``P..``, ``[b, S]`` (left-padded) kept."""
    import torch

    if t.dim() != 2:
        raise ArcticRLError(None, f"batch.{name} must be 2-D, got shape {list(t.shape)}", "/forward-backward")
    if t.shape[1] == S:
        return t
    if t.shape[1] == S - P:
        out = torch.full((t.shape[0], S), pad, dtype=t.dtype)
        out[:, P:] = t
        return out
    raise ArcticRLError(
        None, f"batch.{name} has {t.shape[1]} columns: expected the response length {S - P} or {S}", "/forward-backward"
    )


def forward_backward_frame(batch: dict, meta: dict, *, dp_size: int) -> dict[str, Any]:
    """The Cortex forward-backward frame of an on-prem ``(batch, meta)`` (see the module docstring).

    Raises:
        ArcticRLError: a field is missing or mis-shaped, or the loss asks for what the ``grpo`` contract cannot carry
            (a loss mode other than vanilla, a KL loss).
    """
    where = "/forward-backward"
    for key in ("input_ids", "attention_mask", "advantages", "response_mask"):
        if key not in batch:
            raise ArcticRLError(None, f"batch.{key} is missing", where)
    ids = batch["input_ids"]
    S = int(ids.shape[1])
    if "prompts" in batch:
        P = int(batch["prompts"].shape[1])
    elif meta.get("max_prompt_len") is not None:
        P = int(meta["max_prompt_len"])
    else:
        raise ArcticRLError(None, "the prompt length is unknown: send batch.prompts or meta.max_prompt_len", where)
    if not 0 < P < S:
        raise ArcticRLError(None, f"prompt length {P} must be in (0, {S})", where)
    ac = meta.get("actor_config") or {}
    pl = {**(ac.get("policy_loss") or {}), **(meta.get("policy_loss_config") or {})}
    if pl.get("loss_mode", "vanilla") != "vanilla":
        raise ArcticRLError(
            None, f"loss_mode={pl['loss_mode']!r}: Cortex's grpo loss is verl's vanilla PPO only", where
        )
    if ac.get("use_kl_loss"):
        raise ArcticRLError(None, "use_kl_loss=true: Cortex has no reference log-probs", where)

    mask = batch.get("loss_mask", batch["response_mask"])
    context: dict[str, Any] = {"input_ids": ids}
    for name, src in (("advantages", "advantages"), ("loss_mask", None), ("old_log_probs_shifted", "old_log_probs"),
                      ("rollout_is_weights", "rollout_is_weights")):  # fmt: skip
        t = mask if src is None else batch.get(src)
        if t is None:
            continue
        pad = _SHIFTED[src or "loss_mask"]
        context[name] = shift_left(_full_width(src or "loss_mask", t, P, S, pad).float(), pad)
    temperature = float(meta.get("temperature", 1.0))
    context.update(prompt_length=P, response_length=S - P, temperature=temperature)

    clip = float(ac.get("clip_ratio", 0.2))
    config: dict[str, Any] = {
        "eps_clip": float(ac.get("clip_ratio_low") if ac.get("clip_ratio_low") is not None else clip),
        "eps_clip_higher": float(ac.get("clip_ratio_high") if ac.get("clip_ratio_high") is not None else clip),
        "c_clip": float(ac.get("clip_ratio_c", 3.0)),
        "loss_agg_mode": str(ac.get("loss_agg_mode", "token-mean")),
        "entropy_coeff": float(ac.get("entropy_coeff", 0.0) or 0.0),
        "global_batch_size": int(meta.get("global_batch_size") or int((mask.sum(-1) > 0).sum())),
        "batch_num_tokens": int(meta.get("batch_num_tokens") or int(mask.sum())),
        "dp_size": int(dp_size),
        "temperature": temperature,
    }
    if ac.get("loss_scale_factor") is not None:
        config["loss_scale_factor"] = ac["loss_scale_factor"]
    kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": batch["attention_mask"], "use_cache": False}
    if "position_ids" in batch:
        kwargs["position_ids"] = batch["position_ids"]
    return {
        "args": [],
        "kwargs": kwargs,
        "context": context,
        "processing": {"loss_fn": LOSS_FN, "post": ["apply_temperature"], "config": config},
    }


def step_reply(reply: Any, next_lr: float | None) -> dict:
    """A Cortex step result (``{global_steps, last_lr[, peak_memory]}``, no ``metrics`` [6.2]) with ``lr``, the
    scheduled rate after this step's tick (verl's metric), added by the client."""
    out = dict(reply) if isinstance(reply, dict) else {"result": reply}
    lr = out.get("last_lr")
    if isinstance(lr, (list, tuple)) and lr:
        out["last_lr"] = float(lr[0])
    if next_lr is not None:
        out["lr"] = next_lr
    return out
