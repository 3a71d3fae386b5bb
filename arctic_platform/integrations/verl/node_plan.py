# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""How the H200 launcher uses a node with the embedded server: the jobs' GPUs and the memory each GPU needs.

``python -m arctic_platform.integrations.verl.node_plan --model DIR [--gpus 8] [--tp 1] ...`` prints the plan
(stderr) and the launcher's variables (stdout: ``TRAIN_GPUS=4 SAMPLING_GPUS=4 LOG_PROB_GPUS=4
LOG_PROB_DEVICES=training ATTN_IMPL=...``), or exits 2 with one line when the model does not fit.

* **Split** (:func:`arctic_platform.server.placement.split_node`): all the node's GPUs; half train (FSDP2, as many
  as the training state needs when that is more), the rest sample as ``sampling / TP`` vLLM replicas. The reference
  log-probs run sharded on the training GPUs (``--reference-devices training``, the default: a bf16 forward-only
  copy beside the training shards, used between the training phases, as stock verl colocates its reference; on an
  8B model that is 4x the reference's GPUs and one more sampling GPU, see docs/cost-model.md), or on one GPU of
  their own (``--reference-devices own``). Given job sizes (``--training-gpus`` ...) are kept and only checked.
* **Memory per GPU**, from the model's config (its parameters counted on the meta device, no weights read):
  training ``16 B/param / training GPUs`` (fp32 master weights, fp32 gradients and AdamW's two fp32 moments, all
  sharded: verl's FSDP2 mixed precision; the gradients are reduce-scattered on every micro-batch, so they accumulate
  sharded too: docs/arctic-rl-server.md, "Memory") plus the unsharded fp32 gradients of the two decoder layers a
  backward reduces at a time plus two gathered bf16 decoder layers (the one computing and the one prefetched);
  sampling bf16 weights ``/ TP`` and the KV cache vLLM gets at ``gpu_memory_utilization`` (tokens and sequences of
  ``--seq-len`` it holds); the reference's bf16 weights (``/ training GPUs`` when they sit beside training's, and then
  counted in the training GPUs' static memory). Activations come on top and depend on the
  micro-batch: the plan refuses a split whose static training memory exceeds :data:`TRAINING_SHARE` of a GPU.
* **Attention**: the first of flash_attention_3 / flash_attention_2 / sdpa the embedded server's engines load here
  (:func:`arctic_platform.server.capabilities.default_attention`).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from arctic_platform.protocol import JOB_TYPES
from arctic_platform.server.placement import PlacementError, describe_devices, place_jobs, replica_count, split_node

__all__ = ["GIB", "H200_GIB", "ModelFacts", "Plan", "PlanError", "main", "make_plan", "model_facts"]

H200_GIB = 143771 / 1024
"""An H200's memory as ``nvidia-smi`` reports it (143,771 MiB), used when no GPU is visible (a dry run)."""
TRAINING_BYTES_PER_PARAM = 16
"""fp32 master weight + fp32 gradient + AdamW ``exp_avg`` + ``exp_avg_sq`` (verl's FSDP2 mixed precision)."""
INFLIGHT_GRAD_BYTES_PER_PARAM = 4
"""fp32 gradients of a layer between its backward and its reduce-scatter (unsharded; two layers at a time)."""
BF16 = 2
TRAINING_SHARE = 0.5
"""Most of a GPU the training state may take statically; the rest is for activations and the allocator."""
GIB = 1024**3
LAUNCHER_VARS = ("TRAIN_GPUS", "SAMPLING_GPUS", "LOG_PROB_GPUS")
"""The launcher's variable of each job type's GPUs, in ``JOB_TYPES`` order."""


class PlanError(ValueError):
    """A model that does not fit the node (one line naming the numbers and the way out)."""


@dataclass(frozen=True)
class ModelFacts:
    """What the plan reads from a model's config."""

    name: str
    params: int
    """Unique parameters (a tied ``lm_head`` counts once)."""
    largest_layer: int
    """Parameters of the largest decoder layer (one FSDP unit)."""
    layers: int
    kv_heads: int
    head_dim: int


def model_facts(model_dir: str) -> ModelFacts:
    """:class:`ModelFacts` of the Hugging Face model folder ``model_dir``, built on the meta device (nothing loaded)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(cfg)
    unique = {id(p): p.numel() for p in model.parameters()}
    split = set(getattr(model, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in split]
    largest = max((sum(p.numel() for p in m.parameters()) for m in layers), default=max(unique.values()))
    text = getattr(cfg, "text_config", None) or cfg
    heads = int(text.num_attention_heads)
    head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // heads)
    return ModelFacts(
        name=(getattr(cfg, "architectures", None) or [type(model).__name__])[0],
        params=sum(unique.values()),
        largest_layer=int(largest),
        layers=int(text.num_hidden_layers),
        kv_heads=int(getattr(text, "num_key_value_heads", None) or heads),
        head_dim=head_dim,
    )


@dataclass(frozen=True)
class Plan:
    """The jobs' GPUs and the memory per GPU of each (bytes)."""

    gpus: int
    gpu_bytes: float
    tp: int
    counts: dict
    devices: dict
    training_state: float
    training_gathered: float
    training_inflight: float
    sampling_weights: float
    kv_cache: float
    kv_tokens: int
    kv_sequences: int
    log_prob_weights: float
    attention: str
    why: str
    log_prob_devices: str = "own"

    @property
    def training_static(self) -> float:
        """A training GPU's memory before activations: its shard, two layers' gradients in flight, two gathered
        layers, and the reference's shard when it runs there."""
        ref = self.log_prob_weights if self.log_prob_devices == "training" else 0.0
        return self.training_state + self.training_inflight + self.training_gathered + ref

    def lines(self, facts: ModelFacts, gpu_name: str, seq_len: int, utilization: float) -> list[str]:
        gib = lambda b: f"{b / GIB:.1f} GiB"  # noqa: E731
        c, d = self.counts, self.devices
        out = [
            f"node plan: {self.gpus} x {gpu_name} ({gib(self.gpu_bytes)} each), {facts.name} with "
            f"{facts.params / 1e9:.3g} B parameters",
            f"  training  {c['training']} GPU(s) {describe_devices(d['training'])}: FSDP2 over {c['training']} "
            "rank(s); "
            f"{TRAINING_BYTES_PER_PARAM} B/param sharded = {gib(self.training_state)} + fp32 gradients of 2 layers "
            f"in flight {gib(self.training_inflight)} + 2 gathered bf16 layers "
            f"{gib(self.training_gathered)}"
            + (
                f" + the reference's bf16 shard {gib(self.log_prob_weights)}"
                if self.log_prob_devices == "training"
                else ""
            )
            + f" = {gib(self.training_static)} per GPU before activations",
            f"  sampling  {c['sampling']} GPU(s) {describe_devices(d['sampling'])}: {c['sampling'] // self.tp} vLLM "
            f"replica(s) x TP {self.tp}; bf16 weights {gib(self.sampling_weights)} per GPU; KV cache at "
            f"gpu_memory_utilization {utilization:g}: {gib(self.kv_cache)} per GPU = {self.kv_tokens:,} tokens per "
            f"replica ({self.kv_sequences:,} sequences of {seq_len})",
        ]
        if c["log_prob"]:
            where = " (the training GPUs: FSDP2 forward-only, sharded)" if self.log_prob_devices == "training" else ""
            out.append(
                f"  log_prob  {c['log_prob']} GPU(s) {describe_devices(d['log_prob'])}{where}: reference log-probs, "
                f"bf16 weights {gib(self.log_prob_weights)} per GPU"
            )
        out.append(f"  attention {self.attention}; split: {self.why}")
        return out


def make_plan(
    facts: ModelFacts,
    *,
    gpus: int,
    gpu_bytes: float,
    tp: int = 1,
    reference: bool = True,
    utilization: float = 0.5,
    seq_len: int = 1536,
    counts: Optional[dict] = None,
    attention: str = "sdpa",
    reference_devices: Optional[str] = None,
) -> Plan:
    """The plan for ``facts`` on ``gpus`` GPUs of ``gpu_bytes`` (``counts``: given job sizes, else the default split).

    Raises:
        PlanError: a training state above :data:`TRAINING_SHARE` of a GPU, sampling weights above the vLLM budget,
            or job sizes that do not fit the node.
    """
    if counts is not None:
        counts = {j: int(counts.get(j, 0)) for j in JOB_TYPES}
    if reference_devices is None:  # the split's default; given sizes say it themselves (LOG_PROB_GPUS = TRAIN_GPUS)
        given_own = counts is not None and counts["log_prob"] != counts["training"]
        reference_devices = "own" if given_own else "training"
    on_training = reference and reference_devices == "training"
    ref_weights = BF16 * facts.params
    state = TRAINING_BYTES_PER_PARAM * facts.params + (ref_weights if on_training else 0)
    gathered = 2 * BF16 * facts.largest_layer
    inflight = 2 * INFLIGHT_GRAD_BYTES_PER_PARAM * facts.largest_layer
    room = TRAINING_SHARE * gpu_bytes - inflight - gathered  # what is left on a GPU for the sharded state
    if room <= 0:
        raise PlanError(
            f"{facts.name}: 2 of its decoder layers' unsharded fp32 gradients ({inflight / GIB:.1f} GiB, in flight "
            f"before their reduce-scatter) and 2 gathered layers exceed {TRAINING_SHARE:.0%} of a "
            f"{gpu_bytes / GIB:.0f} GiB GPU: no number of training GPUs fits; train a smaller model"
        )
    least = max(1, math.ceil(state / room))
    if counts is None:
        try:
            split = split_node(
                gpus,
                tensor_parallel_size=tp,
                reference=reference,
                min_training=least,
                reference_on_training=on_training,
            )
        except PlacementError as e:
            raise PlanError(f"the model's training state needs {least} GPU(s) of this node: {e}") from None
        counts = {j: split[j] for j in JOB_TYPES}
        why = (
            f"half the node trains ({max(gpus // 2, least)} wanted, training state {state / GIB:.1f} GiB needs "
            f"{least}), "
            + ("the reference on the training GPUs" if on_training else f"{counts['log_prob']} for the reference")
            + f", the rest samples in replicas of TP {tp}"
        )
    else:
        why = "as given (TRAIN_GPUS / SAMPLING_GPUS / LOG_PROB_GPUS)"
        on_training = on_training and counts["log_prob"] > 0
        if on_training and counts["log_prob"] != counts["training"]:
            raise PlanError(
                f"LOG_PROB_GPUS={counts['log_prob']} with the reference on the training GPUs: it needs "
                f"TRAIN_GPUS={counts['training']} (or --reference-devices own)"
            )
        if sum(counts.values()) - (counts["log_prob"] if on_training else 0) > gpus:
            given = " + ".join(f"{v}={counts[j]}" for j, v in zip(JOB_TYPES, LAUNCHER_VARS, strict=True))
            raise PlanError(f"{given} = {sum(counts.values())} GPUs, but the node has {gpus} (GPUS); lower them")
    try:
        devices = place_jobs(
            counts, device="cuda", device_count=gpus, log_prob_devices="training" if on_training else "own"
        )
    except PlacementError as e:
        raise PlanError(str(e)) from None
    n_train = max(1, counts["training"])
    try:
        replica_count(counts["sampling"], tp)
    except PlacementError:
        raise PlanError(f"SAMPLING_GPUS={counts['sampling']} is not a multiple of the rollout TP {tp}") from None
    per_gpu_state = TRAINING_BYTES_PER_PARAM * facts.params / n_train
    ref_shard = ref_weights / n_train if on_training else 0.0
    if per_gpu_state + ref_shard + inflight + gathered > TRAINING_SHARE * gpu_bytes:
        raise PlanError(
            f"{facts.name}: {TRAINING_BYTES_PER_PARAM} B/param over {n_train} training GPU(s) and 4 layers "
            + ("and the reference's shard " if on_training else "")
            + f"are {(per_gpu_state + ref_shard + inflight + gathered) / GIB:.1f} GiB per GPU, above "
            f"{TRAINING_SHARE:.0%} of a {gpu_bytes / GIB:.0f} GiB GPU; give training at least {least} GPU(s) "
            "(TRAIN_GPUS)"
        )
    weights = BF16 * facts.params / tp
    kv = utilization * gpu_bytes - weights
    if kv <= 0:
        raise PlanError(
            f"{facts.name}: bf16 weights {weights / GIB:.1f} GiB per sampling GPU exceed gpu_memory_utilization "
            f"{utilization:g} of {gpu_bytes / GIB:.0f} GiB; raise the rollout TP or gpu_memory_utilization"
        )
    kv_per_token = 2 * facts.layers * max(1, math.ceil(facts.kv_heads / tp)) * facts.head_dim * BF16
    tokens = int(kv // kv_per_token)
    return Plan(
        gpus=gpus,
        gpu_bytes=gpu_bytes,
        tp=tp,
        counts=counts,
        devices=devices,
        training_state=per_gpu_state,
        training_gathered=gathered,
        training_inflight=inflight,
        sampling_weights=weights,
        kv_cache=kv,
        kv_tokens=tokens,
        kv_sequences=tokens // max(1, seq_len),
        log_prob_weights=ref_shard if on_training else ref_weights,
        attention=attention,
        why=why,
        log_prob_devices="training" if on_training else "own",
    )


def _gpu() -> tuple[str, float]:
    """This node's GPU name and memory; an H200's figures when none is visible (a dry run)."""
    import torch

    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        return p.name, float(p.total_memory)
    return "H200 (assumed: no GPU visible)", H200_GIB * GIB


def _verl_gpu_memory_utilization() -> float:
    from .options import verl_defaults

    return float(verl_defaults().actor_rollout_ref.rollout.gpu_memory_utilization)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="node_plan", description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the Hugging Face model folder")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs of the node (default 8)")
    ap.add_argument("--tp", type=int, default=1, help="actor_rollout_ref.rollout.tensor_model_parallel_size")
    ap.add_argument("--no-reference", action="store_true", help="no reference log_prob job")
    ap.add_argument(
        "--reference-devices",
        choices=("training", "own"),
        default=None,
        help="the reference sharded on the training GPUs, or on GPUs of its own (default: training; with given "
        "sizes, training when LOG_PROB_GPUS equals TRAIN_GPUS)",
    )
    ap.add_argument("--seq-len", type=int, default=1536, help="prompt + response tokens")
    ap.add_argument("--gpu-memory-utilization", type=float, default=None, help="vLLM's (default: verl's)")
    for job in JOB_TYPES:
        ap.add_argument(f"--{job.replace('_', '-')}-gpus", default=None, help=f"given {job} GPUs")
    ap.add_argument("--attention", default=None, help="attention implementation (default: the fastest available)")
    args = ap.parse_args(argv)
    given = {j: getattr(args, f"{j}_gpus") or None for j in JOB_TYPES}
    counts = None if all(v is None for v in given.values()) else given
    if counts is not None:
        if None in counts.values() or not all(str(v).isdigit() for v in counts.values()):
            print(
                f"node_plan: TRAIN_GPUS / SAMPLING_GPUS / LOG_PROB_GPUS are {list(counts.values())}: give all three "
                "(whole numbers) or none of them",
                file=sys.stderr,
            )
            return 2
        counts = {j: int(v) for j, v in counts.items()}
    utilization = args.gpu_memory_utilization or _verl_gpu_memory_utilization()
    if args.attention is None:
        from arctic_platform.server.capabilities import default_attention

        args.attention = default_attention()
    gpu_name, gpu_bytes = _gpu()
    facts = model_facts(str(Path(args.model).expanduser()))
    try:
        plan = make_plan(
            facts,
            gpus=args.gpus,
            gpu_bytes=gpu_bytes,
            tp=args.tp,
            reference=not args.no_reference,
            utilization=utilization,
            seq_len=args.seq_len,
            counts=counts,
            attention=args.attention,
            reference_devices=args.reference_devices,
        )
    except PlanError as e:
        print(f"node_plan: {e}", file=sys.stderr)
        return 2
    for line in plan.lines(facts, gpu_name, args.seq_len, utilization):
        print(line, file=sys.stderr)
    c = plan.counts
    print(
        f"TRAIN_GPUS={c['training']} SAMPLING_GPUS={c['sampling']} LOG_PROB_GPUS={c['log_prob']} "
        f"LOG_PROB_DEVICES={plan.log_prob_devices} ATTN_IMPL={plan.attention}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
