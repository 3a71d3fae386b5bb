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
"""``ArcticV1ActorRolloutRefWorker``: the CPU forwarder that replaces verl's ``ActorRolloutRefWorker``.

verl's V1 trainer hands it TransferQueue batches of nested-jagged tensors. The worker densifies them to the Arctic
wire layout with the **configured** maxima (``data.max_prompt_length`` / ``data.max_response_length``: prompt
left-padded into [0, P), response right-padded into [P, P+R)), sends them to the backend and returns what verl
expects:

* ``compute_log_prob`` / ``compute_ref_log_prob``: full-sequence nested predict-next ``log_probs`` (+ ``entropy``)
  on the offsets of ``input_ids`` (slot i = log P(token i+1)), one row per input row, padding rows included;
* ``update_actor``: one forward-backward + one step per PPO mini-batch for ``ppo_epochs`` epochs, with the full
  actor config, returning verl's metric names plus ``mfu``, ``grad_norm`` and ``lr``;
* ``update_weights``: the backend's training -> sampling sync, tagged with ``global_steps`` as the policy version.

On Snowflake Cortex (``backend.type=cortex``) there is no ``/forward``: ``compute_log_prob`` returns zeros (exact:
the start-up check allows it only for one mini-batch of one epoch without KL, where the backend's loss uses the
current policy's log-probs, detached, as verl's on-policy update does) and ``update_actor`` then sends no old
log-probs; in verl's bypass mode the old log-probs are the rollout's and are sent. The client turns the batch into
Cortex's forward-backward contract (``arctic_platform.client.transports.cortex_body``), and the step and
forward-backward replies carry no ``metrics`` block (read flat).

All data-plane methods are plain ``async def`` under ``@register`` (the seam keeps their coroutine status), so the
worker needs no private event-loop thread. Never touches CUDA: the backend owns every device.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Optional

import torch
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDict

from arctic_platform.protocol import FORWARD_PROCESSING, RESPONSE_PAD_VALUES, UPDATE_PROCESSING
from verl.remote_backend.worker_utils import normalize_backend_metrics
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, make_nd_compute_dataproto_dispatch_fn, register
from verl.utils import tensordict_utils as tu

from ..adapter import ArcticRemoteBackend
from ..compat import SYNTHETIC_PADDING_PROMPT_LEN
from ..options import arctic_options, sleeps_between_rollouts
from ..verl_config import per_gpu

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

# response-aligned fields update_actor sends, with their pad values (rollout_is_weights pads with a neutral 1.0)
UPDATE_FIELDS = {k: RESPONSE_PAD_VALUES[k] for k in ("response_mask", "old_log_probs", "advantages", "ref_log_prob")}
IS_WEIGHTS = "rollout_is_weights"


def left_pad_response(t: torch.Tensor, prompt_len: int, value: float = 0) -> torch.Tensor:
    """A response-aligned ``[b, R]`` tensor as the reference layout's ``[b, P + R]``: ``prompt_len`` columns of
    ``value`` first (Arctic-Platform's engine unpacks only tensors shaped like ``attention_mask``)."""
    pad = torch.full((t.shape[0], prompt_len), value, dtype=t.dtype)
    return torch.cat([pad, t], dim=1)


def json_safe(value: Any) -> Any:
    """``value`` after a JSON round trip where anything that does not serialise becomes None (the reference
    adapter's ``_safe_serialize`` of ``vars(ActorConfig)``), without Hydra's ``_target_`` keys (not fields)."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "_target_"}
        return [strip(x) for x in v] if isinstance(v, list) else v

    return strip(json.loads(json.dumps(value, default=lambda _: None)))


def _nested_lengths(nt: torch.Tensor) -> torch.Tensor:
    lengths = nt.lengths()
    return lengths if lengths is not None else nt.offsets().diff()


def _row_ids(nt: torch.Tensor) -> torch.Tensor:
    """Row index of every packed value of a nested tensor (no holes)."""
    return torch.repeat_interleave(torch.arange(nt.size(0)), _nested_lengths(nt))


def _row_all(nt: torch.Tensor, predicate: torch.Tensor) -> torch.Tensor:
    """Bool [B]: ``predicate`` (over the packed values) holds for every value of the row (true for empty rows)."""
    bad = torch.zeros(nt.size(0), dtype=torch.long).index_add_(0, _row_ids(nt), (~predicate).long())
    return bad == 0


def synthetic_padding_rows(data: TensorDict, eos_token_id: Optional[int]) -> torch.Tensor:
    """Bool [B]: rows verl added with ``upsample_batch_to_divisible_size`` (EOS only, zero response mask).

    They carry no loss and may exceed the configured prompt length, so they never go to the backend; outputs for
    them are zeros (row counts still match).
    """
    prompt_len = _nested_lengths(data["prompts"])
    resp_len = _nested_lengths(data["responses"])
    mask = data["response_mask"]
    candidate = (prompt_len == SYNTHETIC_PADDING_PROMPT_LEN) & (resp_len == 1) & _row_all(mask, mask.values() == 0)
    if eos_token_id is not None and bool(candidate.any()):
        ids = data["input_ids"]
        candidate &= _row_all(ids, ids.values() == eos_token_id)
    return candidate


def _select_rows(nt: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Rows ``rows`` of a nested tensor, as a new nested tensor (one gather, no Python loop)."""
    lengths = _nested_lengths(nt)
    if len(rows) == nt.size(0):
        return nt
    sel_len = lengths[rows]
    values = nt.values()[_flat_positions(nt.offsets()[rows], sel_len)]
    offsets = torch.zeros(len(rows) + 1, dtype=torch.long)
    offsets[1:] = torch.cumsum(sel_len, 0)
    return torch.nested.nested_tensor_from_jagged(values, offsets)


def _flat_positions(starts: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Concatenation of ``arange(start, start + length)`` for each row."""
    within = torch.arange(int(lengths.sum())) - torch.repeat_interleave(torch.cumsum(lengths, 0) - lengths, lengths)
    return torch.repeat_interleave(starts, lengths) + within


def response_aligned_to_predict_next(flat: torch.Tensor) -> torch.Tensor:
    """Arctic-Platform's ZoRRo path returns log-probs / entropy response-aligned (slot t holds token t's value); verl
    reads them predict-next (slot t holds token t+1's): the flat values shifted left by one, the last slot 0, as
    Arctic-Platform's V1 worker does (a sequence's last slot is never read)."""
    return torch.cat([flat[1:], flat.new_zeros(1)]) if flat.numel() else flat


def _full_sequence_from_dense(dense: torch.Tensor, prompt_len: torch.Tensor, seq_len: torch.Tensor, P: int):
    """Cut each row's real tokens (columns [P - lp, P - lp + seq_len)) out of a dense [b, P+R] tensor, flat."""
    row = torch.repeat_interleave(torch.arange(len(seq_len)), seq_len)
    return dense[row, _flat_positions(P - prompt_len, seq_len)]


class ArcticV1ActorRolloutRefWorker(Worker):
    """Forwarder for verl's ``ActorRollout``/``ActorRolloutRef`` role (constructed by ``PPOTrainerRemoteBackend``)."""

    def __init__(
        self,
        config: DictConfig,
        role: str,
        distillation_config: Any = None,
        main_config: Optional[DictConfig] = None,
        backend_handle: Optional[dict[str, Any]] = None,
        **kwargs: Any,
    ):
        Worker.__init__(self)
        if main_config is None or backend_handle is None:
            raise ValueError(
                "ArcticV1ActorRolloutRefWorker needs main_config and backend_handle; run it with remote_backend=arctic "
                "(PPOTrainerRemoteBackend passes them)"
            )
        if distillation_config is not None and distillation_config.enabled:
            raise ValueError("distillation is not supported by the arctic backend (distillation.enabled=true)")
        self.config = config
        self.role = role
        self.main_config = main_config
        self.backend = ArcticRemoteBackend.from_config(main_config, handle=backend_handle)
        self.opts = arctic_options(main_config)
        self.max_prompt_len = int(main_config.data.max_prompt_length)
        self.max_response_len = int(main_config.data.max_response_length)
        self.rollout_n = int(config.rollout.n)
        self.pad_token_id: Optional[int] = None
        self.eos_token_id: Optional[int] = None
        self.policy_version: Optional[int] = None
        self._flops_counter = None
        self._warned_is_weights = False
        self._warned_metrics: set[str] = set()
        self.cortex = backend_handle.get("backend") == "cortex"  # what the driver connected to
        rc = main_config.algorithm.get("rollout_correction", None) or {}
        self.old_from_rollout = bool(rc.get("bypass_mode", False))
        """verl's bypass mode: ``old_log_probs`` are the rollout's (compute_log_prob is never called)."""
        # dispatch info: one forwarder is dp rank 0 and collects; "ref" only when this role serves a reference
        self._register_dispatch_collect_info("actor", dp_rank=self.rank, is_collect=True)
        if "ref" in role:
            self._register_dispatch_collect_info("ref", dp_rank=self.rank, is_collect=True)

    # ------------------------------------------------------------------ setup

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self):
        from transformers import AutoConfig, AutoTokenizer

        path = self.opts.model_path or self.config.model.path
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=self.config.model.get("trust_remote_code"))
        self.eos_token_id = tokenizer.eos_token_id
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        try:
            from verl.utils.flops_counter import FlopsCounter

            self._flops_counter = FlopsCounter(AutoConfig.from_pretrained(path))
        except Exception as e:  # mfu is a metric, never a reason to fail
            logger.warning(f"arctic forwarder: no FLOPs estimate for {path} ({e}); mfu reported as 0")

    # ------------------------------------------------------------------ layout

    def _densify(self, data: TensorDict, rows: torch.Tensor, fields: dict[str, float]) -> dict[str, torch.Tensor]:
        from arctic_platform.kernels.densify import densify

        present = {name: pad for name, pad in fields.items() if name in data.keys()}
        return densify(
            _select_rows(data["prompts"], rows),
            _select_rows(data["responses"], rows),
            max_prompt_len=self.max_prompt_len,
            max_response_len=self.max_response_len,
            pad_token_id=self.pad_token_id,
            fields={name: _select_rows(data[name], rows) for name in present},
            field_pads=present,
        )

    def _wire_batch(self, dense: dict[str, torch.Tensor], fields: dict[str, float]) -> dict[str, torch.Tensor]:
        """The reference layout: ``input_ids`` / ``attention_mask`` ``[b, P+R]``, ``prompts`` ``[b, P]``; for an update
        also ``responses`` ``[b, R]``, the response fields left-padded to ``[b, P+R]`` and ``loss_mask`` (a copy of
        the padded ``response_mask``)."""
        batch = {k: dense[k] for k in ("input_ids", "attention_mask", "prompts")}
        if not self.opts.log_prob.drop_position_ids:
            batch["position_ids"] = dense["position_ids"]
        if fields:
            batch["responses"] = dense["responses"]
            P = self.max_prompt_len
            for name, pad in fields.items():
                batch[name] = left_pad_response(dense[name], P, 1.0 if name == IS_WEIGHTS else 0)
            batch["loss_mask"] = batch["response_mask"].clone()
        return batch

    def _meta(self, temperature: float, calculate_entropy: bool, max_token_len: int) -> dict[str, Any]:
        """The ``meta`` keys Arctic-Platform's engine reads (the reference adapter's set, in its order)."""
        train = self.opts.train
        zorro = train.zorro_train
        return {
            "zorro_train_enable": bool(zorro.enable),
            "zorro_train_max_rollouts": int(zorro.max_rollouts or self.rollout_n),
            "load_balancer": bool(train.load_balancer),
            "rollout_n": self.rollout_n,
            "max_prompt_len": self.max_prompt_len,
            "max_response_len": self.max_response_len,
            "max_token_len_per_gpu": int(max_token_len),
            "temperature": float(temperature),
            "calculate_entropy": bool(calculate_entropy),
            "pad_token_id": self.pad_token_id,
            "drop_position_ids": bool(self.opts.log_prob.drop_position_ids),
            "logits_optimization": str(train.logits.optimization),
            "logits_optimization_peak_mem_size_in_gib": train.logits.optimization_peak_mem_size_in_gib,
            "logits_compute_in_fp32": bool(train.logits.compute_in_fp32),
        }

    # ------------------------------------------------------------------ log-probs

    def _cortex_zero_log_probs(self, data: TensorDict, *, ref: bool, want_entropy: bool) -> TensorDict:
        """Cortex: zeros shaped like the log-probs (never read by the update, see the module docstring)."""
        if ref:
            raise RuntimeError(
                "compute_ref_log_prob on cortex: the reference log-probs need /forward (KL is refused at start-up "
                "on cortex, so this call should not happen)"
            )
        offsets = data["input_ids"].offsets()
        zeros = torch.zeros(int(offsets[-1]), dtype=torch.float32)
        result = {"log_probs": torch.nested.nested_tensor_from_jagged(zeros, offsets)}
        if want_entropy:
            result["entropy"] = torch.nested.nested_tensor_from_jagged(zeros.clone(), offsets)
        return TensorDict(result, batch_size=[len(data)])

    async def _log_probs(self, data: TensorDict, *, ref: bool, want_entropy: bool, max_token_len: int) -> TensorDict:
        if self.cortex:
            return self._cortex_zero_log_probs(data, ref=ref, want_entropy=want_entropy)
        temperature = float(tu.get(data, "temperature", default=self.config.rollout.temperature))
        B = len(data)
        input_ids = data["input_ids"]
        offsets = input_ids.offsets()
        seq_len = _nested_lengths(input_ids)
        log_probs = torch.zeros(int(offsets[-1]), dtype=torch.float32)
        entropy = torch.zeros_like(log_probs) if want_entropy else None
        padding = synthetic_padding_rows(data, self.eos_token_id)
        rows = torch.nonzero(~padding).flatten()
        if len(rows):
            dense = self._densify(data, rows, {})
            reply = await (await self.backend.client()).forward(
                self._wire_batch(dense, {}),
                {**self._meta(temperature, want_entropy, max_token_len), **self._forward_micro_batching(ref)},
                dict(FORWARD_PROCESSING),  # with apply_temperature, as verl recomputes old log-probs (protocol §6.2)
                ref=ref,
            )
            prompt_len = _nested_lengths(data["prompts"])[rows]
            row_len = seq_len[rows]
            flat_index = _flat_positions(offsets[rows], row_len)
            out = reply["batch"]
            log_probs[flat_index] = _full_sequence_from_dense(
                out["logprobs"].float(), prompt_len, row_len, self.max_prompt_len
            )
            if want_entropy:
                if "entropy" not in out:
                    raise RuntimeError("the backend returned no entropy although calculate_entropy was set")
                entropy[flat_index] = _full_sequence_from_dense(
                    out["entropy"].float(), prompt_len, row_len, self.max_prompt_len
                )
        if self.opts.train.zorro_train.enable:  # response-aligned on the ZoRRo path
            log_probs = response_aligned_to_predict_next(log_probs)
            entropy = response_aligned_to_predict_next(entropy) if entropy is not None else None
        result = {"log_probs": torch.nested.nested_tensor_from_jagged(log_probs, offsets)}
        if want_entropy:
            result["entropy"] = torch.nested.nested_tensor_from_jagged(entropy, offsets)
        return TensorDict(result, batch_size=[B])

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))
    async def compute_log_prob(self, data: TensorDict) -> TensorDict:
        """Old-policy log-probs (training job); with ``no_lora_adapter`` the reference job (ref-in-actor)."""
        reference = bool(tu.get(data, "no_lora_adapter", default=False))
        want_entropy = bool(tu.get(data, "calculate_entropy", default=True)) and not reference
        budget = self.config.ref if reference else self.config.rollout
        return await self._log_probs(
            data, ref=reference, want_entropy=want_entropy, max_token_len=self._token_budget(budget)
        )

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="ref"))
    async def compute_ref_log_prob(self, data: TensorDict) -> TensorDict:
        """Reference log-probs from the backend's log_prob job; only ``log_probs`` (an ``entropy`` field would
        overwrite the policy entropy already in TransferQueue)."""
        return await self._log_probs(
            data, ref=True, want_entropy=False, max_token_len=self._token_budget(self.config.ref)
        )

    def _token_budget(self, block: DictConfig) -> int:
        """``log_prob_max_token_len_per_gpu`` of a rollout / ref block (verl resolves both to the actor's budget)."""
        v = block.get("log_prob_max_token_len_per_gpu", None)
        return int(v if v is not None else self.config.actor.ppo_max_token_len_per_gpu)

    # ------------------------------------------------------------------ update

    def _actor_config(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``meta.actor_config``: the whole actor block, JSON-safe (the reference adapter sends ``vars(ActorConfig)``;
        the embedded server builds verl's ActorConfig from it: loss keys, micro-batching; ``loss_scale_factor: null``
        stays null, the server applies verl's per-micro-batch rule); ``meta.policy_loss_config``: its ``policy_loss``
        block, which carries ``loss_mode``. The deprecated global ``ppo_micro_batch_size`` goes resolved, as
        ``ppo_micro_batch_size_per_gpu`` = size // training GPUs (verl's rule for it)."""
        actor = json_safe(OmegaConf.to_container(self.config.actor, resolve=True, throw_on_missing=False))
        if actor.get("rollout_n") in (None, "???"):
            actor["rollout_n"] = self.rollout_n
        if actor.get("ppo_micro_batch_size_per_gpu") is None and actor.get("ppo_micro_batch_size"):
            actor["ppo_micro_batch_size_per_gpu"] = per_gpu(
                self.config.actor, "ppo_micro_batch_size", int(self.opts.training_gpus)
            )
        policy_loss = actor.get("policy_loss") or {"loss_mode": "vanilla"}
        return actor, dict(policy_loss)

    def _forward_micro_batching(self, ref: bool) -> dict[str, Any]:
        """verl's log-prob micro-batching for ``/forward`` (``rollout.log_prob_*`` / ``ref.log_prob_*``; a deprecated
        global ``log_prob_micro_batch_size`` per GPU of the job that computes them)."""
        ref_block = ref and "ref" in self.config
        block = self.config.ref if ref_block else self.config.rollout
        if block.log_prob_use_dynamic_bsz:
            return {"use_dynamic_bsz": True, "max_token_len_per_gpu": int(block.log_prob_max_token_len_per_gpu)}
        gpus = int(self.opts.log_prob_gpus if ref_block else self.opts.training_gpus)
        mbs = per_gpu(block, "log_prob_micro_batch_size", gpus)
        return {"micro_batch_size": mbs} if mbs else {}

    @register(dispatch_mode=make_nd_compute_dataproto_dispatch_fn(mesh_name="actor"))
    async def update_actor(self, data: TensorDict) -> TensorDict:
        """One forward-backward + one step per PPO mini-batch, for ``ppo_epochs`` epochs (verl's iterator)."""
        t0 = time.perf_counter()
        mini_batch_size = int(tu.pop(data, "mini_batch_size", default=None) or len(data))
        global_batch_size = int(tu.pop(data, "global_batch_size", default=None) or mini_batch_size)
        epochs = int(tu.pop(data, "epochs", default=self.config.actor.ppo_epochs))
        seed = int(tu.pop(data, "seed", default=42))
        dataloader_kwargs = tu.pop(data, "dataloader_kwargs", default={}) or {}
        temperature = float(tu.get(data, "temperature", default=self.config.rollout.temperature))
        calculate_entropy = bool(tu.get(data, "calculate_entropy", default=False))
        if len(data) % mini_batch_size:
            raise ValueError(
                f"update_actor: batch of {len(data)} rows is not a multiple of mini-batch {mini_batch_size}"
            )
        fields = dict(UPDATE_FIELDS)
        if not self.config.actor.use_kl_loss:
            fields.pop("ref_log_prob")
        if self.cortex and not self.old_from_rollout:
            # the old log-probs are compute_log_prob's zeros: the backend uses the current policy's, which is exact
            # only for one mini-batch of one epoch (refused otherwise at start-up; checked again here)
            updates = len(data) // mini_batch_size * epochs
            if updates != 1:
                raise ValueError(
                    f"update_actor on cortex: {updates} optimizer steps ({epochs} epoch(s) of {len(data)} rows in "
                    f"mini-batches of {mini_batch_size}) need old log-probs, which cortex cannot compute"
                )
            fields.pop("old_log_probs")
        if IS_WEIGHTS in data.keys():
            profile = self.backend.profile
            if not profile.rollout_is_weights and not self._warned_is_weights:
                # the start-up check refuses algorithm.rollout_correction.rollout_is for such a backend, so only a
                # caller that bypassed it gets here; the weights still travel where the protocol puts them and the
                # backend answers for itself (Arctic-Platform main: a 500), never an update that drops them
                logger.error(
                    f"update_actor: the batch has rollout_is_weights, but {profile.name} does not apply IS weights; "
                    "set algorithm.rollout_correction.rollout_is=null or use a backend that applies them"
                )
                self._warned_is_weights = True
            fields[IS_WEIGHTS] = RESPONSE_PAD_VALUES[IS_WEIGHTS]
        for name in fields:
            if name not in data.keys():
                raise KeyError(f"update_actor: field {name!r} is missing from the batch")
        actor_config, policy_loss_config = self._actor_config()
        max_token_len = int(self.config.actor.ppo_max_token_len_per_gpu)
        client = await self.backend.client()
        metrics: dict[str, list] = {}
        tokens: list[int] = []
        iterator = tu.make_iterator(
            data, mini_batch_size=mini_batch_size, epochs=epochs, seed=seed, dataloader_kwargs=dataloader_kwargs
        )
        # verl ticks the LR schedule once per training step, after the last mini-batch's optimizer step; the horizon
        # is the one verl injected into actor.optim after building its dataloader
        last = len(data) // mini_batch_size * epochs - 1
        horizon = int(self.config.actor.optim.total_training_steps or 0)
        step_kw = {"total_training_steps": horizon} if horizon > 0 else {}
        for index, mini_batch in enumerate(iterator):
            padding = synthetic_padding_rows(mini_batch, self.eos_token_id)
            rows = torch.nonzero(~padding).flatten()
            if len(rows) == 0:
                if index == last:  # no optimizer update (no gradients), but the training step's schedule tick
                    step = await client.step(lr_scheduler_step=True, **step_kw)
                    metrics["lr"] = [float(step.get("metrics", step).get("lr", 0.0))]
                continue  # only synthetic padding rows: nothing to learn from, no optimizer step
            dense = self._densify(mini_batch, rows, fields)
            meta = self._meta(temperature, calculate_entropy, max_token_len)
            meta.update(
                actor_config=actor_config,
                policy_loss_config=policy_loss_config,
                global_batch_size=global_batch_size,
                batch_num_tokens=int(dense["response_mask"].sum()),
                rollout_is_weights=None,  # Arctic-Platform reads IS weights from meta; they travel in batch
            )
            reply = await client.forward_backward(self._wire_batch(dense, fields), meta, dict(UPDATE_PROCESSING))
            step = await client.step(lr_scheduler_step=index == last, **step_kw)
            reply_metrics = reply.get("metrics") or {}  # Cortex: may be empty, the loss in avg_loss
            for key, value in self._scalar_metrics(reply_metrics).items():
                metrics.setdefault(key.removeprefix("actor/"), []).append(value)
            if "loss" not in reply_metrics and reply.get("avg_loss") is not None:
                metrics.setdefault("loss", []).append(float(reply["avg_loss"]))
            step_metrics = step.get("metrics", step)  # tolerate both {metrics:{...}} and flat (Cortex) step replies
            if step_metrics.get("grad_norm") is not None:  # DeepSpeed may report none for a step
                metrics.setdefault("grad_norm", []).append(float(step_metrics["grad_norm"]))
            if index == last:  # verl reports the scheduled rate after the step's tick, once per training step
                metrics["lr"] = [float(step_metrics.get("lr", step_metrics.get("last_lr", 0.0)))]
            tokens.extend(_nested_lengths(mini_batch["input_ids"])[rows].tolist())
        metrics["mfu"] = [self._mfu(tokens, time.perf_counter() - t0)]
        compute_s = await self._backend_compute_s(client)
        if compute_s is not None:  # engine seconds since the previous update (generate, log-probs, update, sync)
            metrics["backend_compute_s"] = [compute_s]
        if self.policy_version is not None:  # the version that produced this batch's rollouts (sync training)
            metrics["policy_version"] = [self.policy_version]
        return tu.get_tensordict(tensor_dict={}, non_tensor_dict={"metrics": normalize_backend_metrics(metrics)})

    def _scalar_metrics(self, reply_metrics: dict) -> dict[str, float]:
        """The numeric metrics of a forward-backward reply; others (a backend's lists, strings) are logged once."""
        out = {}
        for key, value in reply_metrics.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out[key] = float(value)
            elif key not in self._warned_metrics:
                self._warned_metrics.add(key)
                logger.warning(
                    f"update_actor: the backend's metric {key!r} is not a number ({value!r:.80}); not logged"
                )
        return out

    async def _backend_compute_s(self, client) -> Optional[float]:
        """Delta of the backend's engine seconds (all jobs) since the last call; None if it does not report them."""
        if self.cortex:
            return None  # SnowAPI reports no engine seconds
        try:
            jobs = (await client.status()).get("jobs", {}).values()
            total = sum(float(j["compute_s"]) for j in jobs if "compute_s" in j)
        except Exception:  # a metric, never a reason to fail the update
            return None
        previous, self._compute_total = getattr(self, "_compute_total", None), total
        return total if previous is None else total - previous

    def _mfu(self, tokens: list[int], seconds: float) -> float:
        """Model FLOPs utilisation of the backend's training GPUs; 0 on a CPU backend (no peak to compare with).

        verl's FlopsCounter counts forward + backward (6 N per token + attention) in TFLOPS; the peak comes from the
        training job's GPU model name.
        """
        handle = self.backend.reconnect_handle()
        gpus = int(handle.get("training_gpus", 0))
        device = str(handle.get("device_name", ""))
        if not tokens or seconds <= 0 or gpus == 0 or not device or self._flops_counter is None:
            return 0.0  # no GPU model (Cortex reports none): no peak to compare with
        from verl.utils.flops_counter import get_device_flops

        achieved, _ = self._flops_counter.estimate_flops(tokens, seconds)
        peak = get_device_flops(device_name=device)
        return float(achieved / (peak * gpus)) if peak not in (0, float("inf")) else 0.0

    # ------------------------------------------------------------------ weights and checkpoints

    @register(dispatch_mode=Dispatch.ONE_TO_ALL, blocking=False)
    async def update_weights(self, global_steps: Optional[int] = None, mode: str = "auto"):
        """Sync the backend's sampler to the trained weights; ``global_steps`` becomes the policy version.

        Without a step (verl's ``_validate``) the current version is kept, so rollout tags stay equal to the
        version that produced them.
        """
        version = int(global_steps) if global_steps is not None else self.policy_version
        if sleeps_between_rollouts(self.main_config, self.opts):
            reply = await self._staged_update(version)
        else:
            reply = await self.backend.update_weights(policy_version=version)
        self.policy_version = int(reply.get("policy_version", version if version is not None else 0))
        return {}

    async def _staged_update(self, version: Optional[int]) -> dict:
        """A colocated backend's weight sync, as Arctic-Platform's own rollout stages it: wake the sampler's weights,
        sync, wake its KV cache (allocated only once training has released its memory), reset the prefix cache."""
        client = await self.backend.client()
        await client.wake_inference(["weights"])
        reply = await self.backend.update_weights(policy_version=version)
        await client.wake_inference(["kv_cache"])
        await client.reset_prefix_cache()
        return reply

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    async def save_checkpoint(self, local_path, hdfs_path=None, global_step=0, max_ckpt_to_keep=None):
        """Model + optimizer + scheduler + policy version, saved by the backend under ``local_path``; with ``hf_model``
        in ``actor.checkpoint.save_contents`` also a Hugging Face model in ``<checkpoint>/hf``."""
        if hdfs_path:
            raise ValueError("the arctic backend saves on its own filesystem; trainer.default_hdfs_dir is unsupported")
        # verl's max_actor_ckpt_to_keep: the server prunes (it tracks the job's saves across verl's step folders)
        keep = int(max_ckpt_to_keep) if max_ckpt_to_keep and int(max_ckpt_to_keep) > 0 else None
        contents = self.config.actor.checkpoint.save_contents or []
        return await self.backend.save_checkpoint(
            path=local_path, step=int(global_step), save_total_limit=keep, export_hf="hf_model" in contents
        )

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    async def load_checkpoint(self, local_path, hdfs_path=None, del_local_after_load=False):
        """Resume the training job from ``local_path`` (``trainer.resume_mode``);
        the next weight sync updates rollout."""
        reply = await (await self.backend.client()).load_checkpoint(path=local_path)
        logger.info(f"arctic forwarder: resumed training job from {reply.get('path')} step {reply.get('global_step')}")
        return reply

    # ------------------------------------------------------------------ profiling (global_profiler.steps)

    def _profile_dir(self) -> str:
        """verl's ``actor.profiler.save_path`` (which follows ``global_profiler.save_path``)."""
        return os.path.abspath(self.config.actor.profiler.save_path or self.main_config.global_profiler.save_path)

    async def _profiler_available(self) -> bool:
        """Whether this step's calls are traced: verl's ``actor.profiler.enable`` (verl's worker profiles only then,
        on rank 0 unless it names ranks; the forwarder is rank 0) and a backend with a profiler."""
        if not self.config.actor.profiler.enable:
            return False
        if getattr(self, "_profile_ok", None) is None:
            health = await (await self.backend.client()).health()
            self._profile_ok = "profile" in (health.get("capabilities") or [])
            if not self._profile_ok:
                logger.warning("arctic forwarder: the backend has no profiler (capability 'profile'); not profiling")
        return self._profile_ok

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    async def start_profile(self, **kwargs):
        """verl's ``start_profile(role=, profile_step=)``: the backend's training-engine profiler starts."""
        self._profile_step = kwargs.get("profile_step", None)
        if await self._profiler_available():
            await (await self.backend.client()).profile("start")

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    async def stop_profile(self, run_command: bool = True):
        """The backend writes its trace to ``<actor.profiler.save_path>/arctic_training_step_<n>.json``."""
        if await self._profiler_available():
            step = getattr(self, "_profile_step", None)
            tag = f"arctic_training_step_{step}" if step is not None else None
            reply = await (await self.backend.client()).profile("stop", path=self._profile_dir(), tag=tag)
            logger.info(f"arctic forwarder: backend profile written to {reply.get('trace')}")

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    async def destroy(self):
        """Close this worker's connections; the driver's backend owns and destroys the jobs."""
        await self.backend.aclose()
