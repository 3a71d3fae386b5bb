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
"""Policy engine (job ``training``): verl policy loss, grad clipping + AdamW + LR schedule, checkpoints
(safetensors + JSON, ``save_total_limit`` pruning).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from . import loss as L
from .batch import _check_processing, _num, parse_dense_batch
from .errors import RequestError
from .model_engine import (
    EngineSettings,
    _ModelEngine,
    _param_items,
    _temperature,
    entropy_from_logits,
    model_logits,
    token_logprobs,
)
from .schedule import TrainingSettings, _lr_lambda_factory

logger = logging.getLogger("arctic_platform.server")


class TrainingEngine(_ModelEngine):
    """Policy engine (job ``training``)."""

    kind = "training"

    def __init__(self, settings: EngineSettings, training: TrainingSettings):
        super().__init__(settings, train=True)
        self.training = training
        self.param_names = [n for n, p in _param_items(self.model) if p.requires_grad]
        params = dict(self.model.named_parameters())
        self.params = [params[n] for n in self.param_names]
        self.optimizer = torch.optim.AdamW(
            self.params,
            lr=training.lr,
            betas=tuple(training.betas),
            eps=training.eps,
            weight_decay=training.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, _lr_lambda_factory(training))
        self.global_steps = 0
        self.policy_version = 0
        self.saved: list[tuple[int, Path]] = []  # (step, target) of this job's saves, oldest first: pruning
        self.model.zero_grad(set_to_none=True)

    # ---- loss ----
    def forward_backward(self, batch: dict, meta: dict, processing: dict | None = None) -> dict:
        """verl policy loss on one mini-batch; gradients accumulate until :meth:`step`."""
        meta = meta or {}
        _check_processing(processing, forward_only=False)
        try:
            cfg = L.LossConfig.from_actor_config(meta.get("actor_config"), meta.get("policy_loss_config"))
        except L.LossConfigError as e:
            raise RequestError(str(e)) from None
        temperature = _temperature(meta.get("temperature"))
        db = parse_dense_batch(
            batch, meta, vocab_size=self.vocab_size, max_seq_len=self.settings.max_seq_len, need_response=True
        )
        if cfg.use_kl_loss and "ref_log_prob" not in db.resp:
            raise RequestError("batch.ref_log_prob is missing (actor_config.use_kl_loss=True needs it)")
        want_entropy = bool(meta.get("calculate_entropy", False)) or cfg.entropy_coeff != 0.0
        P, R = db.prompt_len, db.response_len
        mask = db.resp["response_mask"]
        # Global denominators (docs/arctic-rl-protocol.md §5 meta): for the whole mini-batch, else this call's own.
        bnt = _num(meta, "batch_num_tokens")
        gbs = _num(meta, "global_batch_size")
        micro = meta.get("micro_batch_size") or self.training.micro_batch_size or len(db.input_ids)
        if isinstance(micro, bool) or not isinstance(micro, int) or micro < 1:
            raise RequestError(f"meta.micro_batch_size must be a positive int, got {micro!r}")
        if P == 0:
            raise RequestError("prompt length 0: the first response token has no predicting position")
        n = len(db.input_ids)
        single = micro >= n
        if not single:  # splitting must not change the loss: fix the denominators from the whole call
            if bnt is None:
                bnt = mask.sum().item()
            if gbs is None:
                gbs = (mask.sum(-1) > 0).sum().item()
        totals: dict[str, Any] = {}
        self.model.train()
        for s in range(0, n, micro):
            sl = slice(s, s + micro)
            ids = self._to(db.input_ids[sl])
            logits = model_logits(
                self.model, ids, self._to(db.attention_mask[sl]), self._to(db.position_ids[sl]), temperature
            )
            # response token k sits at column P + k and is predicted by column P + k - 1
            resp_logits = logits[:, P - 1 : P + R - 1]
            labels = ids[:, P : P + R]
            log_prob = token_logprobs(resp_logits, labels)
            entropy = entropy_from_logits(resp_logits) if want_entropy else None
            r = {k: self._to(v[sl]) for k, v in db.resp.items()}
            loss, parts = L.ppo_loss(
                log_prob,
                r["old_log_probs"],
                r["advantages"],
                r["response_mask"],
                cfg,
                entropy=entropy,
                ref_log_prob=r.get("ref_log_prob"),
                rollout_is_weights=r.get("rollout_is_weights"),
                batch_num_tokens=bnt,
                global_batch_size=gbs,
            )
            loss.backward()
            parts["loss"] = loss.detach()
            parts["count"] = r["response_mask"].sum().detach()
            for k, v in parts.items():
                totals[k] = totals.get(k, 0) + v.to("cpu", torch.float64) if not single else v
        metrics = self._metrics(totals, single, cfg)
        return {"metrics": metrics, "avg_loss": metrics["loss"]}

    @staticmethod
    def _metrics(t: dict, single: bool, cfg: L.LossConfig) -> dict[str, float]:
        if single:
            m = {
                "actor/pg_clipfrac": t["pg_clipfrac"].item(),
                "actor/ppo_kl": t["ppo_kl"].item(),
                "actor/pg_clipfrac_lower": t["pg_clipfrac_lower"].item(),
            }
        else:  # token means over the whole call (equal to verl's per-mini-batch metric with one micro-batch)
            denom = t["count"] + 1e-8
            m = {
                "actor/pg_clipfrac": (t["clipfrac_sum"] / denom).item(),
                "actor/ppo_kl": (t["ppo_kl_sum"] / denom).item(),
                "actor/pg_clipfrac_lower": (t["clipfrac_lower_sum"] / denom).item(),
            }
        m["actor/pg_loss"] = float(t["pg_loss"])
        if "entropy_loss" in t:
            m["actor/entropy_loss"] = float(t["entropy_loss"])
        if "kl_loss" in t:
            m["actor/kl_loss"] = float(t["kl_loss"])
            m["actor/kl_coef"] = float(cfg.kl_loss_coef)
        m["loss"] = float(t["loss"])
        return m

    def step(self, learning_rate: float | None = None) -> dict:
        """Clip gradients, take one AdamW step (skipped when the norm is not finite), advance the schedule."""
        max_norm = self.training.grad_clip if self.training.grad_clip and self.training.grad_clip > 0 else math.inf
        grads_present = any(p.grad is not None for p in self.params)
        if grads_present:  # parameters without a gradient are skipped by AdamW, as in torch and verl
            grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm=max_norm)
        else:
            grad_norm = torch.zeros(())
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
        self.scheduler.step()
        self.global_steps += 1
        return {
            "metrics": {"grad_norm": float(grad_norm), "last_lr": float(used_lr)},
            "global_steps": self.global_steps,
            "skipped": not (grads_present and finite),
        }

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

        root.mkdir(parents=True, exist_ok=True)
        name = f"checkpoint-{int(step)}" if step is not None else "checkpoint"
        target = root / name if step is not None else root
        tmp = root / f".{name}.tmp-{os.getpid()}-{time.monotonic_ns()}"
        tmp.mkdir()
        try:
            save_file(
                {n: p.detach().to("cpu").contiguous() for n, p in _param_items(self.model)},
                str(tmp / "model.safetensors"),
            )
            opt_tensors: dict[str, torch.Tensor] = {}
            sd = self.optimizer.state_dict()
            for idx, st in sd["state"].items():
                pname = self.param_names[idx]
                for k, v in st.items():
                    if not isinstance(v, torch.Tensor):
                        raise RuntimeError(f"optimizer state {pname}.{k} is not a tensor")
                    opt_tensors[f"{pname}::{k}"] = v.detach().to("cpu").contiguous()
            opt_tensors["__rng__::cpu"] = torch.get_rng_state()
            save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
            state = {
                "format": "arctic-rl-checkpoint-v1",
                "global_steps": self.global_steps,
                "policy_version": self.policy_version,
                "param_names": self.param_names,
                "param_groups": sd["param_groups"],
                "scheduler": {k: v for k, v in self.scheduler.state_dict().items() if k != "lr_lambdas"},
                "training": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(self.training).items()},
            }
            (tmp / "trainer_state.json").write_text(json.dumps(state, indent=1, sort_keys=True))
            hf_path = None
            if export_hf:
                self.model.save_pretrained(tmp / "hf")
                hf_path = str(target / "hf")
            if step is not None:
                if target.exists():
                    shutil.rmtree(target)
                os.replace(tmp, target)
            else:  # into root itself, file by file (root also holds checkpoint-* children)
                if (root / "hf").exists() and (tmp / "hf").exists():
                    shutil.rmtree(root / "hf")
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

    def load(self, target: Path) -> dict:
        """Restore model, optimizer, scheduler, step counters and RNG from a checkpoint folder."""
        from safetensors.torch import load_file

        state = json.loads((target / "trainer_state.json").read_text())
        if state.get("format") != "arctic-rl-checkpoint-v1":
            raise RequestError(f"{target} is not an arctic-rl checkpoint", 400)
        if state["param_names"] != self.param_names:
            raise RequestError(f"{target}: parameter names differ from this job's model", 409)
        weights = load_file(str(target / "model.safetensors"))
        params = dict(_param_items(self.model))
        if set(weights) != set(params):
            raise RequestError(f"{target}: model.safetensors names differ from this job's model", 409)
        with torch.no_grad():
            for n, p in params.items():
                if weights[n].shape != p.shape:
                    raise RequestError(f"{target}: weight {n} has shape {list(weights[n].shape)}", 409)
                p.copy_(weights[n].to(p.device, p.dtype))
        opt = load_file(str(target / "optimizer.safetensors"))
        rng = opt.pop("__rng__::cpu", None)
        per_param: dict[int, dict[str, torch.Tensor]] = {}
        index = {n: i for i, n in enumerate(self.param_names)}
        for key, v in opt.items():
            pname, _, k = key.rpartition("::")
            per_param.setdefault(index[pname], {})[k] = v.to(self.device) if k != "step" else v
        self.optimizer.load_state_dict({"state": per_param, "param_groups": state["param_groups"]})
        sched = self.scheduler.state_dict()
        sched.update(state["scheduler"])
        self.scheduler.load_state_dict(sched)
        if rng is not None:
            torch.set_rng_state(rng)
        self.global_steps = int(state["global_steps"])
        self.policy_version = int(state["policy_version"])
        self.model.zero_grad(set_to_none=True)
        return {"path": str(target), "global_step": self.global_steps, "policy_version": self.policy_version}
