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
"""One rank of a sharded engine (:mod:`.fsdp_engine`): a process that holds one FSDP2 shard of the model.

The rank engines are the one-device engines with the model sharded, so the loss, micro-batching, LR schedule,
checkpoint format and HF export are the same code:

* :class:`RankTrainer` (a :class:`.training_engine.TrainingEngine`): the model built as verl's FSDP engine builds it
  (``FSDPEngine._build_module`` / ``_build_fsdp_module``): rank 0 loads the checkpoint on CPU, the other ranks start
  on the meta device (every rank loads when the embeddings are tied, as verl does); LoRA (peft) wraps it before
  sharding; ``fully_shard`` per decoder layer, then the root (verl's ``apply_fsdp2``); the full state is broadcast
  from rank 0 (``set_model_state_dict(broadcast_from_rank0=True)``) and the buffers after it, sorted by name.
  Precision: float32 master weights (float64 stays float64); a bfloat16 / float16 job computes with verl's
  ``MixedPrecisionPolicy(param_dtype=<job dtype>, reduce_dtype=float32)`` plus autocast, a float32 / float64 job
  shards and reduces in its own dtype. Gradients are reduce-scattered on every micro-batch and accumulate sharded
  (gradient memory 1/N of the model: no unsharded copy waits for the last micro-batch, as verl's
  ``_gradient_sync_context`` keeps one); clipping takes the global norm over the shards.
* :class:`RankForward` (a :class:`.logprob_engine.ForwardEngine`): the same build, inference only.

Checkpoints are the one-device format (full state: ``get_model_state_dict`` / ``get_optimizer_state_dict`` with
``full_state_dict=True``, written by rank 0), so a checkpoint written at N ranks resumes at any other N.

:func:`rank_main` is the process: it joins the process group (gloo on CPU, NCCL on CUDA, rendezvous through a file),
builds its engine, then answers the driver's messages on its pipe until ``close`` or EOF; it exits when the server
process dies (:func:`.engines.shared.watch_parent`).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import pickle
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from ...reasons import one_line
from ...schedule import TrainingSettings
from ..errors import RequestError
from ..logs import logger
from .logprob_engine import ForwardEngine
from .model_engine import EngineSettings, param_items, resolve_dtype
from .shared import apply_environ, export_tokenizer, nbytes, plan_buckets, watch_parent
from .training_engine import TrainingEngine

__all__ = ["RankForward", "RankTrainer", "rank_main", "receive", "send"]

_LOWER_PRECISION = (torch.bfloat16, torch.float16)


class _Shard:
    """What both rank engines add to a one-device engine: the FSDP2 build and gathers over the process group."""

    rank: int
    world: int
    mesh: Any
    model: Any
    device: torch.device
    param_dtype: torch.dtype
    compute_dtype: torch.dtype

    @property
    def is_writer(self) -> bool:
        return self.rank == 0

    def _no_grad(self):
        return torch.no_grad()

    def _load_sharded_source(self, settings: EngineSettings, train: bool):
        """The unsharded model on CPU (rank 0, or every rank with tied embeddings) or on the meta device."""
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM

        transformers.utils.logging.disable_progress_bar()
        dtype = resolve_dtype(settings.dtype)
        config = AutoConfig.from_pretrained(settings.model_path)
        tied = bool(getattr(config, "tie_word_embeddings", False))
        if self.rank == 0 or tied:
            model = AutoModelForCausalLM.from_pretrained(
                settings.model_path, dtype=dtype, attn_implementation=settings.attn_implementation
            )
        else:
            from accelerate import init_empty_weights

            with init_empty_weights():
                model = AutoModelForCausalLM.from_config(
                    config, dtype=dtype, attn_implementation=settings.attn_implementation
                )
        model.to(dtype)
        model.train(train)
        if not train:
            model.requires_grad_(False)
        return model

    def _fully_shard(self) -> None:
        """verl's ``apply_fsdp2`` + ``fsdp2_load_full_state_dict`` (with torch's own device handling)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict
        from torch.distributed.fsdp import MixedPrecisionPolicy

        from verl.utils.fsdp_utils import apply_fsdp2

        if self.compute_dtype in _LOWER_PRECISION and self.param_dtype != self.compute_dtype:
            mp = MixedPrecisionPolicy(
                param_dtype=self.compute_dtype, reduce_dtype=torch.float32, cast_forward_inputs=True
            )
        else:
            mp = MixedPrecisionPolicy()  # shard, compute and reduce in the parameters' own dtype
        full_state = self.model.state_dict()
        apply_fsdp2(self.model, {"mesh": self.mesh, "mp_policy": mp, "reshard_after_forward": True}, {})
        if self.rank == 0:
            self.model.to(self.device)
        else:
            self.model.to_empty(device=self.device)
        set_model_state_dict(
            self.model, full_state, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        )
        # buffers (rotary frequencies) are not in the state dict; sorted, so every rank broadcasts the same one
        for _, buf in sorted(self.model.named_buffers(), key=lambda kv: kv[0]):
            torch.distributed.broadcast(buf, src=0)

    def _gathered_state(self) -> dict[str, torch.Tensor]:
        """The full model state (float32 master weights, each tensor once) on rank 0, {} elsewhere (collective)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        sd = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if self.rank != 0:
            return {}
        return {n: sd[n].contiguous() for n, _ in param_items(self.model)}

    # ---- weight sync: buckets written straight from the gather ----
    def _exports(self) -> dict[str, tuple[list[int], torch.dtype, Any]]:
        """What a sync sends, in order: name -> (shape, dtype, ``full(dtype)``: the full tensor, gathered over the
        ranks (collective), cast to ``dtype`` before the gather (None: its own)). LoRA (training) is merged in: the
        base weights under the model folder's names (peft's prefix and ``.base_layer`` removed), as
        :class:`.training_engine.MergedWeights` names them."""
        params = param_items(self.model)
        if not getattr(self, "is_lora", False):
            return {n: (list(p.shape), p.dtype, _full_fn(p)) for n, p in params}
        from peft.tuners.lora import LoraLayer

        by_name = dict(params)
        merged: dict[str, Any] = {}
        for mname, mod in self.model.named_modules():
            if isinstance(mod, LoraLayer) and "default" in getattr(mod, "lora_A", {}):
                merged[f"{mname}.base_layer.weight"] = _merged_fn(
                    by_name[f"{mname}.base_layer.weight"],
                    by_name[f"{mname}.lora_A.default.weight"],
                    by_name[f"{mname}.lora_B.default.weight"],
                    mod,
                )
        out: dict[str, tuple[list[int], torch.dtype, Any]] = {}
        for n, p in params:
            if "lora_" in n:
                continue
            name = n.removeprefix("base_model.model.").replace(".base_layer", "")
            out[name] = (list(p.shape), p.dtype, merged.get(n) or _full_fn(p))
        return out

    def sync_plan(self, dtype: str | None, bucket_bytes: int) -> list[list]:
        """The buckets of a sync in ``dtype`` (:meth:`.engines.base.BucketedWeightSource.bucket_plan`)."""
        want = resolve_dtype(dtype) if dtype else None
        tensors = [(n, shape, nbytes(shape, want or dt)) for n, (shape, dt, _) in self._exports().items()]
        return plan_buckets(tensors, bucket_bytes)

    def write_sync_bucket(self, names: list[str], dtype: str | None, path: str) -> int:
        """Gather the tensors ``names`` in ``dtype`` (collective) and write them as ``path`` on rank 0; returns the
        tensor count."""
        want = resolve_dtype(dtype) if dtype else None
        exports = self._exports()
        out: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for n in names:
                t = exports[n][2](want)
                if self.rank == 0:
                    out[n] = t.to("cpu").contiguous()
        if self.rank == 0:
            _write_atomic(path, out)
        return len(names)

    def load_sync_bucket(self, path: str) -> int:
        """Copy one bucket file (full tensors, model folder names) into this rank's shards: every rank reads the
        file and keeps its own slice (``distribute_tensor`` with no source rank: nothing is sent)."""
        from safetensors.torch import load_file
        from torch.distributed.tensor import DTensor, distribute_tensor

        params = dict(param_items(self.model))
        state = load_file(path)
        with torch.no_grad():
            for n, full in state.items():
                p = params[n]
                full = full.to(p.device, p.dtype)
                if isinstance(p, DTensor):
                    local = distribute_tensor(full, p.device_mesh, p.placements, src_data_rank=None).to_local()
                    p.to_local().copy_(local)
                else:
                    p.copy_(full)
        return len(state)

    def _load_full_state(self, weights: dict[str, torch.Tensor]) -> None:
        """Every rank's shard from a full state that only rank 0 holds (collective)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        set_model_state_dict(
            self.model,
            weights if self.rank == 0 else {},
            options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True, strict=False),
        )


class RankTrainer(_Shard, TrainingEngine):
    """One rank of a sharded training engine (see the module docstring)."""

    def __init__(self, settings: EngineSettings, training: TrainingSettings, *, rank: int, world: int, mesh):
        self.rank, self.world, self.mesh = rank, world, mesh
        super().__init__(settings, training)

    def _load_model(self, settings: EngineSettings, train: bool):
        return self._load_sharded_source(settings, train)

    def _shard(self) -> None:
        if self.is_lora:
            _check_lora_layers(self.model)
        self._fully_shard()

    def _clip_grad_norm(self, max_norm: float) -> torch.Tensor:
        from torch.distributed.tensor import DTensor

        norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm=max_norm)
        return norm.full_tensor() if isinstance(norm, DTensor) else norm

    # ---- checkpoints: full state, written by rank 0 ----
    def _full_weights(self) -> dict[str, torch.Tensor]:
        return self._gathered_state()

    def _full_optimizer_state(self) -> tuple[dict[str, torch.Tensor], list[dict]]:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        sd = get_optimizer_state_dict(
            self.model, self.optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )
        if self.rank != 0:
            return {}, []
        index = {n: i for i, n in enumerate(self.param_names)}
        tensors: dict[str, torch.Tensor] = {}
        for pname, st in sd["state"].items():
            for k, v in st.items():
                if not isinstance(v, torch.Tensor):
                    raise RuntimeError(f"optimizer state {pname}.{k} is not a tensor")
                tensors[f"{pname}::{k}"] = v.detach().to("cpu").contiguous()
        groups = [{**g, "params": [index[p] for p in g["params"]]} for g in sd["param_groups"]]
        return tensors, groups

    def _export_state(self) -> dict[str, torch.Tensor] | None:
        """What a sync sends (LoRA merged in), gathered tensor by tensor onto rank 0's CPU ({} elsewhere)."""
        out: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for n, (_, _, full) in self._exports().items():
                t = full(None)
                if self.rank == 0:
                    out[n] = t.to("cpu").contiguous()
        return out

    def _save_adapter(self, out: Path, weights: dict[str, torch.Tensor]) -> None:
        self.model.save_pretrained(out, state_dict=weights)

    def _write_hf(self, out: Path, state: dict[str, torch.Tensor] | None) -> None:
        base = self.model.get_base_model() if self.is_lora else self.model
        base.save_pretrained(out, state_dict=state)
        export_tokenizer(self.settings.model_path, out)

    def _load_weights_and_read_optimizer(self, target: Path) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
        # the driver checked names and shapes against the model before sending the load
        from safetensors.torch import load_file

        self._load_full_state(load_file(str(target / "model.safetensors")) if self.rank == 0 else {})
        opt = load_file(str(target / "optimizer.safetensors"))
        return opt, opt.pop("__rng__::cpu", None)

    def _load_optimizer_state(self, opt: dict[str, torch.Tensor], param_groups: list[dict]) -> None:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        state: dict[str, dict[str, torch.Tensor]] = {}
        for key, v in opt.items():
            pname, _, k = key.rpartition("::")
            state.setdefault(pname, {})[k] = v
        groups = [{**g, "params": [self.param_names[i] for i in g["params"]]} for g in param_groups]
        set_optimizer_state_dict(
            self.model,
            self.optimizer,
            {"state": state, "param_groups": groups},
            options=StateDictOptions(full_state_dict=True),
        )


class RankForward(_Shard, ForwardEngine):
    """One rank of a sharded forward-only engine (job ``log_prob``)."""

    def __init__(self, settings: EngineSettings, *, rank: int, world: int, mesh):
        self.rank, self.world, self.mesh = rank, world, mesh
        super().__init__(settings)
        self._fully_shard()

    def _load_model(self, settings: EngineSettings, train: bool):
        return self._load_sharded_source(settings, train)


def _full_fn(p):
    def full(dtype: torch.dtype | None) -> torch.Tensor:
        from torch.distributed.tensor import DTensor

        t = p.detach()
        if dtype is not None and t.dtype != dtype:
            t = t.to(dtype)  # before the gather: bf16 moves half the bytes of the fp32 master weights
        return t.full_tensor() if isinstance(t, DTensor) else t

    return full


def _merged_fn(base, lora_a, lora_b, mod):
    """peft's ``Linear.get_delta_weight`` merged into the base weight, on the gathered tensors (their own dtype),
    then cast."""

    def full(dtype: torch.dtype | None) -> torch.Tensor:
        from peft.utils.other import transpose

        w, a, b = _full_fn(base)(None), _full_fn(lora_a)(None), _full_fn(lora_b)(None)
        t = w + (transpose(b @ a, mod.fan_in_fan_out) * mod.scaling["default"]).to(w.dtype)
        return t.to(dtype) if dtype is not None else t

    return full


def _write_atomic(path: str, state: dict[str, torch.Tensor]) -> None:
    from safetensors.torch import save_file

    save_file(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def _check_lora_layers(model) -> None:
    """The sharded engine merges LoRA into full weights itself (:meth:`_Shard._exports`), for peft's linear
    layers; anything else is refused when the job is built."""
    from peft.tuners.lora import LoraLayer
    from peft.tuners.lora.layer import Linear

    for name, mod in model.named_modules():
        if isinstance(mod, LoraLayer) and (type(mod) is not Linear or any(mod.use_dora.values())):
            raise RequestError(
                f"extensions.lora on {name} ({type(mod).__name__}): a sharded training job merges LoRA for linear "
                "layers only (no DoRA, embedding or parameter targets); use training_gpus=1 or target linear layers",
                422,
            )


# ------------------------------------------------------------------------------------------------
# the rank process
# ------------------------------------------------------------------------------------------------


def send(conn, obj) -> None:
    """Send ``obj`` over a pipe by value (plain pickle): tensors travel as bytes, not as shared-memory handles a
    dead peer would leave dangling."""
    conn.send_bytes(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def receive(conn):
    """The next object :func:`send` sent on ``conn``."""
    return pickle.loads(conn.recv_bytes())


def _init_group(rank: int, world: int, device: str, init_file: str, timeout_s: float):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.set_device(torch.device(device))
    dist.init_process_group(
        "nccl" if cuda else "gloo",
        init_method=f"file://{init_file}",
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=timeout_s),
    )
    return init_device_mesh("cuda" if cuda else "cpu", (world,))


def rank_main(
    conn, rank: int, world: int, job_type: str, spec: dict, init_file: str, parent_pid: int, threads: int, env: dict
):
    """The body of one rank process (see the module docstring). Messages are dicts with an ``op``; every reply is
    ``{"ok": True, "value": ...}`` or ``{"ok": False, "kind": "request" | "internal", "error": ..., "status": ...}``.
    ``env``: the server's own values of what a vLLM build sets process-wide (:func:`.shared.own_environ`), set before
    any device is touched."""
    apply_environ(env)
    faulthandler.enable()  # a crash in native code (exit code -11, -6) leaves its Python stack in the server's log
    watch_parent(lambda: os._exit(3), parent_pid, interval_s=1.0)
    torch.set_num_threads(max(1, threads))
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    try:
        device = spec["settings"]["device"]
        mesh = _init_group(rank, world, device, init_file, float(spec.get("timeout_s", 1800.0)))
        eng = _build(job_type, spec, rank=rank, world=world, mesh=mesh)
    except RequestError as e:
        send(conn, {"ok": False, "kind": "request", "error": e.reason, "status": e.status})
        return
    except Exception as e:  # the build failure is the job's reason
        logger.exception("rank %d: build failed", rank)
        send(conn, {"ok": False, "kind": "internal", "error": one_line(e)})
        return
    send(conn, {"ok": True, "value": _hello(eng)})
    try:
        _serve(conn, eng, rank)
    finally:
        with contextlib.suppress(Exception):
            torch.distributed.destroy_process_group()


def _build(job_type: str, spec: dict, *, rank: int, world: int, mesh):
    """The rank engine of a job: :class:`RankTrainer` for training, :class:`RankForward` for log_prob."""
    settings = EngineSettings(**spec["settings"])
    if spec.get("full_determinism"):
        from ..jobs import enable_full_determinism

        enable_full_determinism(int(settings.seed))
    if job_type == "training":
        return RankTrainer(settings, TrainingSettings(**spec["training"]), rank=rank, world=world, mesh=mesh)
    return RankForward(settings, rank=rank, world=world, mesh=mesh)


def _hello(eng) -> dict:
    """What the driver needs to validate requests without a model: names, shapes, dtypes."""
    params = param_items(eng.model)
    return {
        "vocab_size": eng.vocab_size,
        "param_shapes": {n: list(p.shape) for n, p in params},
        "trainable": list(getattr(eng, "param_names", [])),
        "param_dtype": str(eng.param_dtype).removeprefix("torch."),
        "describe": eng.describe(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def _serve(conn, eng, rank: int) -> None:
    from .model_engine import ForwardPlan
    from .training_engine import UpdatePlan

    while True:
        try:
            msg = receive(conn)
        except (EOFError, OSError):
            return
        op = msg.get("op")
        if op == "close":
            return
        try:
            if "policy_version" in msg:
                eng.policy_version = msg["policy_version"]
            if op == "forward_backward":
                from .. import loss as L

                cfg = L.actor_config_from_meta(msg["actor_config"], msg["policy_loss_config"])
                plan = UpdatePlan(cfg=cfg, db=msg["db"], parts=msg["parts"], micro_batching=None, **msg["numbers"])
                with eng._profiled("forward_backward"):
                    acc = eng.run_update(plan, plan.db, plan.parts, dp_size=msg["dp_size"])
                value: Any = acc.state()
            elif op == "forward":
                plan = ForwardPlan(msg["db"], msg["parts"], msg["temperature"], msg["want_entropy"])
                ctx = eng._profiled("forward") if isinstance(eng, TrainingEngine) else contextlib.nullcontext()
                with ctx:
                    lp, ent = eng.forward_rows(plan.db, plan.parts, plan.temperature, plan.want_entropy)
                value = {"logprobs": lp, "entropy": ent}
            elif op == "step":
                value = eng.step(msg["learning_rate"], **msg["kw"])
            elif op == "save":
                value = eng.save(Path(msg["root"]), msg["step"], msg["save_total_limit"], msg["export_hf"])
            elif op == "load":
                value = eng.load(Path(msg["target"]))
            elif op == "export_hf":
                eng.export_hf(Path(msg["out"]))
                value = None
            elif op == "profile":
                value = eng.profile(msg["action"], Path(msg["path"]), msg["tag"])
            elif op == "offload":
                value = eng.offload(msg["mode"])
            elif op == "reload":
                value = eng.reload()
            elif op == "empty_cache":
                value = eng.empty_cache()
            elif op == "sync_plan":
                value = eng.sync_plan(msg["dtype"], msg["bucket_bytes"])
            elif op == "write_sync_bucket":
                value = eng.write_sync_bucket(msg["names"], msg["dtype"], msg["path"])
            elif op == "load_sync_bucket":
                value = eng.load_sync_bucket(msg["path"])
            elif op == "log_probs_text":
                value = eng.log_probs_text(eng.tokenizer(), msg["prompts"], msg["completions"], msg["top_k"])
            else:
                raise RuntimeError(f"unknown op {op!r}")
            reply = {"ok": True, "value": value, "describe": eng.describe()}
        except RequestError as e:
            reply = {"ok": False, "kind": "request", "error": e.reason, "status": e.status}
        except Exception as e:  # reported to the driver, which fails the job
            logger.exception("rank %d: %s failed", rank, op)
            reply = {"ok": False, "kind": "internal", "error": f"rank {rank}: {op}: {one_line(e)}"}
        try:
            send(conn, reply)
        except (EOFError, OSError):
            return


def rank_settings(settings: EngineSettings, device: str) -> dict:
    """The settings dict a rank process is started with (its own device)."""
    from dataclasses import asdict

    return asdict(replace(settings, device=device))
