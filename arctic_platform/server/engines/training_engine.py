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
"""Policy engine (job ``training``): verl's actor update on one device.

* **Loss**: verl's own functions (:mod:`.loss`: ``get_policy_loss_fn(loss_mode)``, ``agg_loss``, ``kl_penalty``) on
  each micro-batch, with the mini-batch's global denominators, so micro-batching leaves the loss and gradient of a
  ``/forward-backward`` unchanged; metrics are reduced over micro-batches as verl's engine reduces them.
* **Micro-batches** as verl's engine cuts them: a fixed number of rows (``ppo_micro_batch_size_per_gpu``) or a token
  budget (``use_dynamic_bsz`` + ``ppo_max_token_len_per_gpu``, verl's ``rearrange_micro_batches``).
* **Precision**: float32 master weights always; the job's dtype (bfloat16 on CUDA by default) is the autocast dtype
  of forward and loss, as verl's FSDP mixed precision; float32 jobs (CPU default) run without autocast.
* **Step**: gradient clipping, AdamW (skipped when the norm is not finite), then verl's LR schedule ticks unless the
  client says ``lr_scheduler_step: false`` (verl ticks once per training step).
* **LoRA** (peft, as verl): only the adapter trains; weight syncs and the HF export carry merged weights.
* Gradient checkpointing (HF, ``use_reentrant=False``), a torch profiler, checkpoints (safetensors + JSON,
  ``save_total_limit`` pruning, the LoRA adapter in peft's format, an optional HF export).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ...schedule import TrainingSettings, build_scheduler
from .. import loss as L
from ..batch import DenseBatch, check_processing, meta_number, parse_dense_batch
from ..errors import RequestError
from ..logs import logger
from .base import EngineSpec, TrainingInterface, WeightSource
from .model_engine import (
    EngineSettings,
    ModelEngine,
    entropy_from_logits,
    logits_temperature,
    model_logits,
    param_items,
    real_columns,
    token_logprobs,
)
from .shared import export_tokenizer


@dataclass
class UpdatePlan:
    """A validated ``/forward-backward`` call: verl's loss config, the batch, its micro-batches and the mini-batch's
    global denominators."""

    cfg: Any
    db: DenseBatch
    parts: list[list[int]]
    temperature: float
    want_entropy: bool
    batch_num_tokens: float
    global_batch_size: float
    micro_batching: L.MicroBatching
    actor_config: dict | None = None
    policy_loss_config: dict | None = None


def plan_update(
    batch: dict,
    meta: dict,
    processing: dict | None,
    *,
    vocab_size: int,
    max_seq_len: int,
    default_micro_batch_size: int | None,
) -> UpdatePlan:
    """Validate a ``/forward-backward`` call (422 / 400 naming the key) and cut it into micro-batches."""
    meta = meta or {}
    check_processing(processing, forward_only=False)
    try:
        cfg = L.actor_config_from_meta(meta.get("actor_config"), meta.get("policy_loss_config"))
        mb = L.micro_batching_from_meta(meta, default_micro_batch_size)
    except L.LossConfigError as e:
        raise RequestError(str(e)) from None
    temperature = logits_temperature(meta, processing)
    db = parse_dense_batch(batch, meta, vocab_size=vocab_size, max_seq_len=max_seq_len, need_response=True)
    if cfg.use_kl_loss and "ref_log_prob" not in db.resp:
        raise RequestError("batch.ref_log_prob is missing (actor_config.use_kl_loss=True needs it)")
    want_entropy = bool(meta.get("calculate_entropy", False)) or cfg.entropy_coeff != 0.0
    if db.prompt_len == 0:
        raise RequestError("prompt length 0: the first response token has no predicting position")
    mask = db.resp["response_mask"]
    # The mini-batch's global denominators (docs/arctic-rl-protocol.md §4 meta), else this call's own: every
    # micro-batch is normalised by the same T and N, so their sum is the whole call's loss.
    bnt = meta_number(meta, "batch_num_tokens")
    gbs = meta_number(meta, "global_batch_size")
    if bnt is None:
        bnt = int(mask.sum())
    if gbs is None:
        gbs = int((mask.sum(-1) > 0).sum())
    try:
        parts = L.micro_batch_rows(db.attention_mask.sum(-1), mb)
    except L.LossConfigError as e:
        raise RequestError(str(e)) from None
    return UpdatePlan(
        cfg,
        db,
        parts,
        temperature,
        want_entropy,
        bnt,
        gbs,
        mb,
        meta.get("actor_config"),
        meta.get("policy_loss_config"),
    )


def read_checkpoint_state(target: Path, param_names: list[str]) -> dict:
    """``trainer_state.json`` of an arctic-rl checkpoint whose trainable parameters are ``param_names``.

    Raises:
        RequestError: 400 not an arctic-rl checkpoint, 409 other parameter names.
    """
    state = json.loads((target / "trainer_state.json").read_text())
    if state.get("format") != "arctic-rl-checkpoint-v1":
        raise RequestError(f"{target} is not an arctic-rl checkpoint", 400)
    if state["param_names"] != param_names:
        raise RequestError(f"{target}: parameter names differ from this job's model", 409)
    return state


class MergedWeights:
    """The weights a sampler serves: base parameter names, LoRA deltas merged in (``named_parameters()`` only).

    Built without touching the training model (W + ΔW per LoRA layer, peft's ``get_delta_weight``), so training
    continues on exactly the weights it had.
    """

    def __init__(self, peft_model):
        self._model = peft_model

    def named_parameters(self):
        from peft.tuners.lora import LoraLayer

        base = self._model.get_base_model()
        deltas: dict[str, torch.Tensor] = {}
        for mname, mod in base.named_modules():
            if isinstance(mod, LoraLayer) and "default" in getattr(mod, "lora_A", {}):
                deltas[f"{mname}.base_layer.weight"] = mod.get_delta_weight("default")
        with torch.no_grad():
            for name, p in base.named_parameters():
                if "lora_" in name:
                    continue
                value = p.detach()
                if name in deltas:
                    value = value + deltas[name].to(value.dtype)
                yield name.replace(".base_layer", ""), value


class TrainingEngine(ModelEngine, TrainingInterface):
    """Policy engine (job ``training``, kind ``torch``: one process, one device)."""

    kind = "training"

    def __init__(self, settings: EngineSettings, training: TrainingSettings):
        if settings.dtype == "float16":
            raise RequestError("float16 training needs loss scaling, which this server does not do; use bfloat16", 422)
        # float32 master weights (float64 stays float64): the job's dtype is the autocast dtype
        super().__init__(settings, train=True, param_dtype="float64" if settings.dtype == "float64" else "float32")
        self.training = training
        if training.lora:
            self._wrap_lora(training.lora)
        if training.gradient_checkpointing:
            self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self._shard()
        self.param_names = [n for n, p in param_items(self.model) if p.requires_grad]
        params = dict(self.model.named_parameters())
        self.params = [params[n] for n in self.param_names]
        self.optimizer = torch.optim.AdamW(
            self.params,
            lr=training.lr,
            betas=tuple(training.betas),
            eps=training.eps,
            weight_decay=training.weight_decay,
        )
        self.scheduler = None
        self._creation_horizon = training.total_steps
        self._horizon_from_checkpoint = False  # set by load(): a later /step horizon may replace it
        if not training.needs_horizon() or training.total_steps:
            self.scheduler = build_scheduler(self.optimizer, training)
        self.global_steps = 0
        self.policy_version = 0
        self.profiler = None
        self.saved: list[tuple[int, Path]] = []  # (step, target) of this job's saves, oldest first: pruning
        self.model.zero_grad(set_to_none=True)

    @classmethod
    def from_spec(cls, spec: EngineSpec) -> TrainingEngine:
        return cls(spec.settings, spec.training)

    def describe(self) -> dict:
        return {
            "global_steps": self.global_steps,
            "policy_version": self.policy_version,
            "param_dtype": str(self.param_dtype).removeprefix("torch."),  # float32 master weights; dtype: autocast
            "lora": self.training.lora,
            "lr_scheduler_steps": None if self.scheduler is None else int(self.scheduler.last_epoch),
        }

    def _shard(self) -> None:
        """After LoRA and gradient checkpointing, before the optimizer: a sharded engine shards its model here."""

    def _wrap_lora(self, lora: dict) -> None:
        """peft LoRA over the loaded model, with verl's settings (``_build_lora_module``)."""
        from peft import LoraConfig, TaskType, get_peft_model

        self.model.enable_input_require_grads()
        cfg = LoraConfig(
            task_type=TaskType.CAUSAL_LM,
            r=int(lora["rank"]),
            lora_alpha=lora["alpha"],
            target_modules=lora.get("target_modules"),
            target_parameters=lora.get("target_parameters"),
            exclude_modules=lora.get("exclude_modules"),
            bias="none",
        )
        # the adapter's initial values come from the job's seed (the global RNG is left as it was), so a run is
        # reproducible and every rank of a sharded engine starts from the same adapter
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(self.settings.seed))
            self.model = get_peft_model(self.model, cfg)

    @property
    def is_lora(self) -> bool:
        return bool(self.training.lora)

    def weights_for_sync(self) -> WeightSource:
        """What ``/weight-sync`` and ``/weight-norm`` read: the model, or its merged view under LoRA."""
        return MergedWeights(self.model) if self.is_lora else self.model

    def weight_norm(self) -> tuple[float, int]:
        return TrainingInterface.weight_norm(self)

    # ---- loss ----
    def forward_backward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        """verl's actor loss on one mini-batch, micro-batch by micro-batch; gradients accumulate until :meth:`step`."""
        with self._profiled("forward_backward"):
            return self._forward_backward(batch, meta, processing)

    def _forward_backward(self, batch: dict, meta: dict, processing: dict | None) -> dict:
        plan = plan_update(
            batch,
            meta,
            processing,
            vocab_size=self.vocab_size,
            max_seq_len=self.settings.max_seq_len,
            default_micro_batch_size=self.training.micro_batch_size,
        )
        acc = self.run_update(plan, plan.db, plan.parts)
        out = acc.result()
        return {"metrics": out, "avg_loss": out["loss"], "micro_batches": len(plan.parts)}

    def run_update(
        self, plan: UpdatePlan, db: DenseBatch, parts: list[list[int]], dp_size: int = 1
    ) -> L.MetricAccumulator:
        """Forward, verl's loss and backward for each micro-batch of ``parts`` (row indices into ``db``), with the
        plan's global denominators; gradients accumulate. ``dp_size``: data-parallel ranks sharing the mini-batch
        (verl's ``agg_loss`` scales by it, which the ranks' gradient averaging cancels). An empty part runs row 0
        with its loss times zero: a sharded model's ranks must run the same number of micro-batches."""
        cfg, P = plan.cfg, db.prompt_len
        resp_len = db.attention_mask[:, P:].sum(-1)  # each row's response length
        acc = L.MetricAccumulator()
        self.model.train()
        for i, rows in enumerate(parts):
            idx = torch.tensor(rows or [0], dtype=torch.long)
            # verl pads a micro-batch's response fields to its longest response (nested -> padded): same width here
            width = max(1, int(resp_len[idx].max()))
            # the micro-batch's real tokens only: from its longest prompt's first column to its longest response's
            # end (padding in every row outside), and logits at the response's predicting columns alone
            lo = min(real_columns(db.attention_mask[idx])[0], P - 1)
            ids = self._to(db.input_ids[idx, lo : P + width])
            with self.autocast():
                # response token k sits at column P + k and is predicted by column P + k - 1: the last width + 1
                # columns' logits, without the last
                logits = model_logits(
                    self.model,
                    ids,
                    self._to(db.attention_mask[idx, lo : P + width]),
                    self._to(db.position_ids[idx, lo : P + width]),
                    plan.temperature,
                    keep_last=width + 1,
                )
                resp_logits = logits[:, :width]
                log_prob = token_logprobs(resp_logits, ids[:, P - lo : P - lo + width])
                entropy = entropy_from_logits(resp_logits) if plan.want_entropy else None
                r = {k: self._to(v[idx, :width]) for k, v in db.resp.items()}
                try:
                    loss, metrics = L.actor_loss(
                        cfg,
                        log_prob=log_prob,
                        entropy=entropy,
                        old_log_prob=r["old_log_probs"],
                        advantages=r["advantages"],
                        response_mask=r["response_mask"],
                        ref_log_prob=r.get("ref_log_prob"),
                        rollout_is_weights=r.get("rollout_is_weights"),
                        batch_num_tokens=plan.batch_num_tokens,
                        global_batch_size=plan.global_batch_size,
                        dp_size=dp_size,
                    )
                except L.LossConfigError as e:
                    raise RequestError(str(e)) from None
            if not rows:
                loss = loss * 0.0
            loss.backward()
            if rows:
                acc.add(loss, metrics)
            del logits, resp_logits, log_prob, entropy, loss
        return acc

    def _clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        """Clip the gradients to ``max_norm`` (global 2-norm); returns the norm before clipping."""
        return torch.nn.utils.clip_grad_norm_(self.params, max_norm=max_norm)

    def _set_horizon(self, total: int) -> None:
        have = self.training.total_steps
        if have is not None and int(have) != int(total) and self._horizon_from_checkpoint:
            # resumed from a checkpoint of a run with another horizon: verl's resumed scheduler uses the new one
            last = self.scheduler.last_epoch
            self.training.total_steps = int(total)
            self.scheduler = build_scheduler(self.optimizer, self.training, last_epoch=last)
            self._horizon_from_checkpoint = False
            return
        if have is not None and int(have) != int(total):
            raise RequestError(
                f"/step total_training_steps {total} contradicts the job's schedule horizon {have} "
                "(extensions.lr_schedule.total_training_steps)",
                422,
            )
        if self.scheduler is None:
            self.training.total_steps = int(total)
            self.scheduler = build_scheduler(self.optimizer, self.training)

    def step(
        self,
        learning_rate: float | None = None,
        *,
        lr_scheduler_step: bool | None = None,
        total_training_steps: int | None = None,
    ) -> dict:
        """Clip gradients, take one AdamW step (skipped when the norm is not finite), advance the schedule.

        Args:
            learning_rate: this step's rate instead of the schedule's (the schedule is not changed).
            lr_scheduler_step: False: no schedule tick after this step (verl ticks on a training step's last
                mini-batch only); None / True: tick.
            total_training_steps: the schedule's horizon, when the job was created without it.

        Returns:
            ``metrics.last_lr`` is the rate this step used; ``metrics.lr`` the scheduled rate after the tick (what
            verl's engine reports as ``lr``).
        """
        with self._profiled("step"):
            return self._step(learning_rate, lr_scheduler_step, total_training_steps)

    def _step(self, learning_rate, lr_scheduler_step, total_training_steps) -> dict:
        if total_training_steps is not None:
            self._set_horizon(total_training_steps)
        if self.scheduler is None:
            raise RequestError(
                f"the {self.training.lr_scheduler_type} LR schedule (warmup ratio {self.training.warmup_steps_ratio}) "
                "needs its horizon: send total_training_steps in /step or extensions.lr_schedule",
                422,
            )
        max_norm = self.training.grad_clip if self.training.grad_clip and self.training.grad_clip > 0 else math.inf
        grads_present = any(p.grad is not None for p in self.params)
        if grads_present:  # parameters without a gradient are skipped by AdamW, as in torch and verl
            grad_norm = self._clip_grad_norm(max_norm)
        else:
            grad_norm = torch.zeros(())
        scheduled = [g["lr"] for g in self.optimizer.param_groups]
        if learning_rate is not None:
            for g in self.optimizer.param_groups:
                g["lr"] = float(learning_rate)
        used_lr = self.optimizer.param_groups[0]["lr"]
        finite = bool(torch.isfinite(grad_norm))
        if grads_present and finite:
            self.optimizer.step()
        elif not finite:
            logger.warning("grad_norm is not finite (%s); skipping the optimizer step", grad_norm.item())
        self.optimizer.zero_grad(set_to_none=True)
        for g, lr in zip(self.optimizer.param_groups, scheduled, strict=True):
            g["lr"] = lr
        if lr_scheduler_step is None or lr_scheduler_step:
            self.scheduler.step()
        self.global_steps += 1
        return {
            "metrics": {
                "grad_norm": float(grad_norm),
                "last_lr": float(used_lr),
                "lr": float(self.scheduler.get_last_lr()[0]),
            },
            "global_steps": self.global_steps,
            "lr_scheduler_steps": int(self.scheduler.last_epoch),
            "skipped": not (grads_present and finite),
        }

    # ---- profiling ----
    def profile(self, action: str, path: Path, tag: str | None = None) -> dict:
        """``start``: every following engine call (forward-backward, step, forward) runs under a torch profiler (CPU,
        and CUDA on a GPU) until ``stop``, which writes their events as one chrome trace ``<path>/<tag>.json``.

        One profiler per call, opened and closed in the call's own thread: the server runs calls on a thread pool,
        and torch's profiler must start and stop in the same thread. The traces share one clock, so they merge.
        """
        if action == "start":
            if self.profiler is not None:
                raise RequestError("the profiler is already running; stop it first", 409)
            self.profiler = {"events": [], "base": None}
            return {"profiling": True}
        if action == "stop":
            prof, self.profiler = self.profiler, None
            if prof is None:
                raise RequestError("the profiler is not running; start it first", 409)
            path.mkdir(parents=True, exist_ok=True)
            out = path / f"{tag or f'training_step_{self.global_steps}'}.json"
            trace = {"traceEvents": prof["events"], "displayTimeUnit": "ms"}
            if prof["base"] is not None:
                trace["baseTimeNanoseconds"] = prof["base"]
            out.write_text(json.dumps(trace))
            return {"profiling": False, "trace": str(out), "events": len(prof["events"])}
        raise RequestError(f"profile action {action!r} is not 'start' or 'stop'", 422)

    @contextlib.contextmanager
    def _profiled(self, name: str):
        prof = self.profiler
        if prof is None:
            yield
            return
        import tempfile

        activities = [torch.profiler.ProfilerActivity.CPU]
        if self.device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=activities) as p, torch.profiler.record_function(f"arctic::{name}"):
            yield
        with tempfile.TemporaryDirectory() as tmp:
            p.export_chrome_trace(f"{tmp}/trace.json")
            trace = json.loads(Path(f"{tmp}/trace.json").read_text())
        prof["events"].extend(trace.get("traceEvents", []))
        if prof["base"] is None:
            prof["base"] = trace.get("baseTimeNanoseconds")

    def forward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        with self._profiled("forward"):
            return super().forward(batch, meta, processing)

    # ---- checkpoints ----
    def save(self, root: Path, step: int | None, save_total_limit: int | None, export_hf: bool = False) -> dict:
        """Save as the reference does (docs/arctic-rl-protocol.md §8): with ``step``, into ``root/checkpoint-<step>/``
        (atomically) and ``root/latest`` = the step; without, into ``root`` itself. ``global_step`` is the engine's
        optimizer step count.

        ``save_total_limit=N`` keeps the N newest (by step) of: the ``checkpoint-*`` children of ``root`` and the
        step checkpoints this job saved under other roots (verl saves every step under its own
        ``global_step_<n>/actor`` root). A pruned checkpoint's root loses its ``latest`` when it named it, and the
        root goes when left empty. The server is the one owner of checkpoint pruning.
        """
        from safetensors.torch import save_file

        # gathered first: in a sharded engine every rank takes part, and only the writer (rank 0) holds the result
        weights = self._full_weights()
        opt_tensors, param_groups = self._full_optimizer_state()
        hf_state = self._export_state() if export_hf else None
        if not self.is_writer:
            return {}
        root.mkdir(parents=True, exist_ok=True)
        name = f"checkpoint-{int(step)}" if step is not None else "checkpoint"
        target = root / name if step is not None else root
        tmp = root / f".{name}.tmp-{os.getpid()}-{time.monotonic_ns()}"
        tmp.mkdir()
        try:
            save_file(weights, str(tmp / "model.safetensors"))
            opt_tensors["__rng__::cpu"] = torch.get_rng_state()
            save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
            state = {
                "format": "arctic-rl-checkpoint-v1",
                "global_steps": self.global_steps,
                "policy_version": self.policy_version,
                "param_names": self.param_names,
                "param_groups": param_groups,
                "scheduler": None
                if self.scheduler is None
                else {k: v for k, v in self.scheduler.state_dict().items() if k != "lr_lambdas"},
                "training": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(self.training).items()},
            }
            (tmp / "trainer_state.json").write_text(json.dumps(state, indent=1, sort_keys=True))
            if self.is_lora:  # the adapter alone, in peft's format (adapter_config.json + adapter_model.safetensors)
                self._save_adapter(tmp / "lora_adapter", weights)
            hf_path = None
            if export_hf:
                self._write_hf(tmp / "hf", hf_state)
                hf_path = str(target / "hf")
            if step is not None:
                if target.exists():
                    shutil.rmtree(target)
                os.replace(tmp, target)
            else:  # into root itself, file by file (root also holds checkpoint-* children)
                for sub in ("hf", "lora_adapter"):
                    if (root / sub).exists() and (tmp / sub).exists():
                        shutil.rmtree(root / sub)
                for f in sorted(tmp.iterdir(), key=lambda x: x.name == "trainer_state.json"):
                    os.replace(f, root / f.name)  # trainer_state.json last: it marks the checkpoint complete
                tmp.rmdir()
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if step is not None:
            latest_tmp = root / f".latest.tmp-{os.getpid()}"
            latest_tmp.write_text(f"{int(step)}\n")  # the reference writes the step number
            os.replace(latest_tmp, root / "latest")
            done = target.resolve()
            self.saved = [(st, q) for st, q in self.saved if q != done] + [(int(step), done)]
        if save_total_limit is not None and save_total_limit > 0:
            self._prune(root.resolve(), target.resolve(), save_total_limit)
        return {"path": str(target), "hf_path": hf_path, "global_step": self.global_steps}

    def export_hf(self, out: Path) -> None:
        """A Hugging Face model folder (``save_pretrained``: config, generation config, safetensors, tokenizer) of
        the current weights, LoRA merged in (verl's ``save_contents: [hf_model]``)."""
        state = self._export_state()
        if self.is_writer:
            self._write_hf(out, state)

    # ---- what a checkpoint holds (a sharded engine gathers it from its ranks) ----
    is_writer = True
    """Whether this engine writes checkpoints (a sharded engine: rank 0 only)."""

    def _full_weights(self) -> dict[str, torch.Tensor]:
        """Every parameter (each tensor once, LoRA unmerged) as a contiguous CPU tensor."""
        return {n: p.detach().to("cpu").contiguous() for n, p in param_items(self.model)}

    def _full_optimizer_state(self) -> tuple[dict[str, torch.Tensor], list[dict]]:
        """AdamW's state as ``{"<param>::<key>": tensor}`` and its parameter groups (parameters as indices into
        ``param_names``)."""
        opt_tensors: dict[str, torch.Tensor] = {}
        sd = self.optimizer.state_dict()
        for idx, st in sd["state"].items():
            pname = self.param_names[idx]
            for k, v in st.items():
                if not isinstance(v, torch.Tensor):
                    raise RuntimeError(f"optimizer state {pname}.{k} is not a tensor")
                opt_tensors[f"{pname}::{k}"] = v.detach().to("cpu").contiguous()
        return opt_tensors, sd["param_groups"]

    def _export_state(self) -> dict[str, torch.Tensor] | None:
        """The weights of an HF export, LoRA merged in (None: the model's own ``save_pretrained``)."""
        if not self.is_lora:
            return None
        return {n: t.detach().to("cpu").contiguous() for n, t in MergedWeights(self.model).named_parameters()}

    def _save_adapter(self, out: Path, weights: dict[str, torch.Tensor]) -> None:
        """The LoRA adapter in peft's format."""
        self.model.save_pretrained(out)

    def _write_hf(self, out: Path, state: dict[str, torch.Tensor] | None) -> None:
        if self.is_lora:
            self.model.get_base_model().save_pretrained(out, state_dict=state)
        elif state is not None:
            self.model.save_pretrained(out, state_dict=state)
        else:
            self.model.save_pretrained(out)
        export_tokenizer(self.settings.model_path, out)

    def _prune(self, root: Path, target: Path, keep: int) -> None:
        here = {
            p: int(m.group(1))
            for p in root.iterdir()
            if p.is_dir() and (m := re.fullmatch(r"checkpoint-(\d+)", p.name))
        }
        order = {p: i for i, (_, p) in enumerate(self.saved)}  # a tie in steps: the earlier save goes first
        ckpts = sorted(
            {**{p: st for st, p in self.saved}, **here}.items(), key=lambda kv: (kv[1], order.get(kv[0], -1))
        )
        for p, _ in ckpts[: max(0, len(ckpts) - keep)]:
            if p == target:
                continue
            shutil.rmtree(p, ignore_errors=True)
            latest = p.parent / "latest"
            if latest.is_file() and latest.read_text().strip() in (p.name, p.name.removeprefix("checkpoint-")):
                latest.unlink()
                with contextlib.suppress(OSError):
                    p.parent.rmdir()  # only when empty: a root may hold other files
        self.saved = [(st, p) for st, p in self.saved if p.exists()]

    def _load_weights_and_read_optimizer(self, target: Path) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        """Copy ``model.safetensors`` into the model (409 on a name or shape it does not have); returns the tensors
        of ``optimizer.safetensors`` and the saved CPU RNG state."""
        from safetensors.torch import load_file

        weights = load_file(str(target / "model.safetensors"))
        params = dict(param_items(self.model))
        if set(weights) != set(params):
            raise RequestError(f"{target}: model.safetensors names differ from this job's model", 409)
        with torch.no_grad():
            for n, p in params.items():
                if weights[n].shape != p.shape:
                    raise RequestError(f"{target}: weight {n} has shape {list(weights[n].shape)}", 409)
                p.copy_(weights[n].to(p.device, p.dtype))
        opt = load_file(str(target / "optimizer.safetensors"))
        return opt, opt.pop("__rng__::cpu", None)

    def _load_optimizer_state(self, opt: dict[str, torch.Tensor], param_groups: list[dict]) -> None:
        """AdamW's state from ``{"<param>::<key>": tensor}`` and the saved parameter groups."""
        per_param: dict[int, dict[str, torch.Tensor]] = {}
        index = {n: i for i, n in enumerate(self.param_names)}
        for key, v in opt.items():
            pname, _, k = key.rpartition("::")
            per_param.setdefault(index[pname], {})[k] = v.to(self.device) if k != "step" else v
        self.optimizer.load_state_dict({"state": per_param, "param_groups": param_groups})

    def load(self, target: Path) -> dict:
        """Restore model, optimizer, scheduler, step counters and RNG from a checkpoint folder."""
        state = read_checkpoint_state(target, self.param_names)
        opt, rng = self._load_weights_and_read_optimizer(target)
        # the schedule's horizon as the checkpoint had it (a checkpoint saved before a late horizon arrived has none:
        # the next /step brings it again); the scheduler is built before the optimizer state is loaded, because
        # building one sets the rate of every parameter group
        # A resumed run's own horizon wins (verl rebuilds its scheduler from the current config and restores only the
        # step count); the checkpoint's is used only when this job has none yet, and a later /step may replace it.
        saved = (state.get("training") or {}).get("total_steps")
        self.training.total_steps = self._creation_horizon or saved
        self._horizon_from_checkpoint = self._creation_horizon is None and saved is not None
        if state.get("scheduler") is not None or not self.training.needs_horizon() or self.training.total_steps:
            self.scheduler = build_scheduler(self.optimizer, self.training)
        else:
            self.scheduler = None
        self._load_optimizer_state(opt, state["param_groups"])
        if state.get("scheduler") is not None:
            sched = self.scheduler.state_dict()
            sched.update(state["scheduler"])
            self.scheduler.load_state_dict(sched)
        if rng is not None:
            torch.set_rng_state(rng)
        self.global_steps = int(state["global_steps"])
        self.policy_version = int(state["policy_version"])
        self.model.zero_grad(set_to_none=True)
        return {"path": str(target), "global_step": self.global_steps, "policy_version": self.policy_version}
