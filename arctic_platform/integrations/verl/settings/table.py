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
"""The table: every verl setting under ``actor_rollout_ref`` of each ``model_engine`` verl 0.9.1 ships (dp/FSDP,
megatron, torchtitan, veomni), and the few outside it whose meaning depends on the backend, with its role and its
check. A test walks verl's composed config of every engine and fails on any leaf no entry covers; at start-up a key
no entry covers (added with ``+``) is refused (:func:`uncovered`)."""

from __future__ import annotations

import fnmatch
from typing import Any, Optional

from omegaconf import OmegaConf

import verl

from ..refusal import Refusal, shown
from . import checks as C
from .model import ARR, BACKEND, PLACEMENT, REFUSED, VERL, Check, Setting, SettingsContext

__all__ = ["GLOBAL_CHECKS", "SETTINGS", "covering", "uncovered"]

A, R, M, F = C.A, C.R, C.M, C.F
OPT = f"{A}.optim"
_PLACE = "verl's own engine placement / kernels; no effect on the numbers (the backend's engine config places memory)"
_SAMPLER = "sent in the sampling job's vllm_config (vLLM engine arg); the torch sampler honours or refuses it"
_MASTER = "fp32 weights (verl's FSDP default); the backend keeps float32 master weights (reference: checkpoint dtype)"
_MIXED = (
    "verl's FSDP reads param_dtype (autocast dtype, bf16), reduce_dtype and buffer_dtype (fp32); the backend computes "
    "in the job's dtype over float32 weights, gradients and buffers"
)
_FSDP_DTYPE = "not read by verl 0.9.1's FSDP engine (only its Megatron engine reads engine dtype); no effect either way"
_SP = "Ulysses sequence parallelism (verl 0.9.1's key)"
_MCORE = "Megatron engine:"
_OWN_SCHEDULE = "the engine's own LR scheduler: honoured as a constant rate without warmup only (else refused)"


def uncovered(ctx: SettingsContext) -> list[Refusal]:
    """Keys under ``actor_rollout_ref`` no table entry covers (added with ``+``): never silently ignored."""
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


GLOBAL_CHECKS: tuple[Check, ...] = (C.verl_rejects, C.backend_options, uncovered)
"""Checks of the whole config: what verl's own dataclasses reject, the arctic options, keys no entry covers."""

SETTINGS: tuple[Setting, ...] = (
    # ---- what the remote loop runs
    Setting("algorithm.adv_estimator", VERL, "verl's advantage step (V1 feeds uid, mask, rewards)", C.estimator),
    # ---- actor: the loss (meta.actor_config / meta.policy_loss_config of every /forward-backward)
    Setting(f"{A}.policy_loss.loss_mode", BACKEND, "selects the policy loss", C.loss_mode),
    Setting(f"{A}.policy_loss.*", BACKEND, "sent in meta.policy_loss_config (read by the selected loss)"),
    Setting(f"{A}.clip_ratio", BACKEND, "PPO clip ε (default of low/high)", C.clip_ratios),
    Setting(f"{A}.clip_ratio_low", BACKEND, "ε_low", C.clip_ratios),
    Setting(f"{A}.clip_ratio_high", BACKEND, "ε_high", C.clip_ratios),
    Setting(f"{A}.clip_ratio_c", BACKEND, "dual-clip c", C.clip_ratios),
    Setting(f"{A}.loss_agg_mode", BACKEND, "aggregation per sequence with the global denominators", C.agg_mode),
    Setting(
        f"{A}.loss_scale_factor",
        BACKEND,
        "K of seq-mean-token-sum-norm (sent as is; null = verl's per-micro-batch rule)",
    ),
    Setting(
        f"{A}.entropy_coeff",
        BACKEND,
        "entropy bonus; entropy is computed whenever it is non-zero (verl's rule)",
        C.cortex_entropy,
    ),
    Setting(f"{A}.calculate_entropy", BACKEND, "meta.calculate_entropy of the update"),
    Setting(f"{A}.use_kl_loss", BACKEND, "KL term against the reference job's log-probs", C.use_kl),
    Setting(f"{A}.kl_loss_coef", BACKEND, "KL weight"),
    Setting(f"{A}.kl_loss_type", BACKEND, "KL estimator", C.kl_type),
    Setting(f"{A}.tau_pos", BACKEND, "SAPO temperature (read by loss_mode=sapo)"),
    Setting(f"{A}.tau_neg", BACKEND, "SAPO temperature (read by loss_mode=sapo)"),
    Setting(
        f"{A}.calculate_sum_pi_squared",
        REFUSED,
        "Σπ² statistic of verl's FSDP actor",
        C.refuse_unless_default(f"{A}.calculate_sum_pi_squared", "does not compute the Σπ² statistic"),
    ),
    # ---- actor: batching (job bodies and the worker's mini-batch loop)
    Setting(
        f"{A}.ppo_mini_batch_size",
        BACKEND,
        "verl's mini-batch iterator; ds_config.train_batch_size = mini x n",
        C.cortex_mini_batches,
    ),
    Setting(
        f"{A}.ppo_micro_batch_size",
        BACKEND,
        "deprecated global size: per GPU = size / training_gpus (sent resolved, as ppo_micro_batch_size_per_gpu)",
        C.micro_batches,
    ),
    Setting(
        f"{A}.ppo_micro_batch_size_per_gpu",
        BACKEND,
        "ds_config.train_micro_batch_size_per_gpu (+ gas); must divide the mini-batch per GPU, as verl asserts",
        C.micro_batches,
    ),
    Setting(f"{A}.use_dynamic_bsz", BACKEND, "token-budget micro-batches", C.dynamic_bsz),
    Setting(f"{A}.ppo_max_token_len_per_gpu", BACKEND, "meta.max_token_len_per_gpu (token budget)"),
    Setting(f"{A}.ppo_epochs", VERL, "the worker's mini-batch loop runs this many epochs", C.ppo_epochs),
    Setting(f"{A}.shuffle", VERL, "verl's mini-batch iterator"),
    Setting(f"{A}.data_loader_seed", VERL, "verl's mini-batch iterator"),
    Setting(f"{A}.rollout_n", VERL, "verl (mirrors rollout.n)"),
    # ---- actor: the optimizer and the LR schedule, read through verl's optimizer dataclass of each engine
    Setting(f"{OPT}.optimizer", BACKEND, "AdamW (FSDP AdamW, Megatron adam, VeOmni adamw)", C.training_spec),
    Setting(f"{OPT}.optimizer_impl", BACKEND, "torch.optim only", C.training_spec),
    Setting(f"{OPT}.lr", BACKEND, "ds_config.optimizer.params.lr"),
    Setting(f"{OPT}.betas", BACKEND, "ds_config.optimizer.params.betas"),
    Setting(f"{OPT}.weight_decay", BACKEND, "ds_config.optimizer.params.weight_decay (decoupled)"),
    Setting(f"{OPT}.eps", BACKEND, "ds_config.optimizer.params.eps (engines without it: torch's AdamW default)"),
    Setting(f"{OPT}.clip_grad", BACKEND, "ds_config.gradient_clipping"),
    Setting(f"{OPT}.grad_clip", BACKEND, "deprecated alias of clip_grad (copied over it by verl's dataclass)"),
    Setting(
        f"{A}.grad_clip",
        VERL,
        "not read by verl's V1 engines (they clip at optim.clip_grad)",
        note=C.grad_clip_note,
    ),
    Setting(f"{OPT}.lr_scheduler_type", BACKEND, "extensions.lr_schedule / ds_config.scheduler", C.training_spec),
    Setting(f"{OPT}.lr_warmup_steps", BACKEND, "warmup (training steps)", C.lr_per_step),
    Setting(f"{OPT}.lr_warmup_steps_ratio", BACKEND, "warmup ratio of the horizon", C.lr_per_step),
    Setting(f"{OPT}.total_training_steps", VERL, "set by verl after the dataloader (the horizon, first /step)"),
    Setting(
        f"{OPT}.min_lr_ratio",
        BACKEND,
        "cosine floor: extensions.lr_schedule, or ds_config WarmupCosineLR cos_min_ratio (same floor)",
    ),
    Setting(
        f"{OPT}.num_cycles",
        BACKEND,
        "cosine cycles (extensions.lr_schedule; WarmupCosineLR is a half cosine)",
        C.cosine_options,
    ),
    Setting(f"{OPT}.zero_indexed_step", BACKEND, "cosine step origin (extensions.lr_schedule)", C.cosine_options),
    Setting(f"{OPT}.warmup_style", BACKEND, "deprecated alias of lr_scheduler_type (wins over it, as in verl)"),
    Setting(f"{OPT}.override_optimizer_config", REFUSED, "extra optimizer kwargs", C.training_spec),
    Setting(f"{OPT}.override_optimizer_config.*", REFUSED, "extra optimizer kwargs", C.training_spec),
    Setting(f"{OPT}.lr_decay_style", BACKEND, f"{_MCORE} constant / cosine are verl's schedules", C.training_spec),
    Setting(
        f"{OPT}.lr_warmup_init",
        BACKEND,
        f"{_MCORE} a cosine warmup's start (init_lr_ratio = lr_warmup_init / lr)",
        C.training_spec,
    ),
    Setting(f"{OPT}.lr_decay_steps", BACKEND, f"{_MCORE} the decay horizon: the run's (null) only", C.training_spec),
    Setting(f"{OPT}.min_lr", BACKEND, f"{_MCORE} the cosine floor (min_lr_ratio = min_lr / lr)"),
    Setting(
        f"{OPT}.weight_decay_incr_style",
        BACKEND,
        f"{_MCORE} verl starts and ends at weight_decay, so every style is a constant weight decay (as here)",
    ),
    Setting(f"{OPT}.lr_wsd_decay_style", BACKEND, f"{_MCORE} read with lr_decay_style=WSD only (refused)"),
    Setting(f"{OPT}.lr_wsd_decay_steps", BACKEND, f"{_MCORE} read with lr_decay_style=WSD only (refused)"),
    Setting(
        f"{OPT}.use_checkpoint_opt_param_scheduler",
        BACKEND,
        f"{_MCORE} resume takes the schedule's options from the config, its position from the checkpoint",
        C.training_spec,
    ),
    Setting(f"{OPT}.use_precision_aware_optimizer", BACKEND, f"{_MCORE} float32 optimizer state only", C.training_spec),
    Setting(f"{OPT}.main_grads_dtype", BACKEND, f"{_MCORE} read with use_precision_aware_optimizer only"),
    Setting(f"{OPT}.exp_avg_dtype", BACKEND, f"{_MCORE} read with use_precision_aware_optimizer only"),
    Setting(f"{OPT}.exp_avg_sq_dtype", BACKEND, f"{_MCORE} read with use_precision_aware_optimizer only"),
    Setting(f"{OPT}.use_layer_wise_distributed_optimizer", BACKEND, f"{_MCORE} read with optimizer=muon only"),
    Setting(f"{OPT}.use_layer_wise_param_layout", BACKEND, f"{_MCORE} read with optimizer=muon only"),
    Setting(f"{OPT}.muon_*", BACKEND, f"{_MCORE} read with optimizer=muon only (refused: AdamW only)"),
    Setting(f"{OPT}.name", BACKEND, "torchtitan engine: the optimizer (AdamW only)", C.training_spec),
    Setting(f"{OPT}.decay_type", BACKEND, f"torchtitan engine: {_OWN_SCHEDULE}", C.training_spec),
    Setting(f"{OPT}.min_lr_factor", BACKEND, f"torchtitan engine: {_OWN_SCHEDULE}", C.training_spec),
    Setting(f"{OPT}.lr_min", BACKEND, f"VeOmni engine: {_OWN_SCHEDULE}", C.training_spec),
    Setting(f"{OPT}.lr_start", BACKEND, f"VeOmni engine: {_OWN_SCHEDULE}", C.training_spec),
    Setting(f"{OPT}.lr_decay_ratio", BACKEND, f"VeOmni engine: {_OWN_SCHEDULE}", C.training_spec),
    # ---- actor: checkpoints and profiling
    Setting(
        f"{A}.checkpoint.save_contents",
        BACKEND,
        "model + optimizer + extra always; hf_model -> export_hf",
        C.save_contents,
    ),
    Setting(f"{A}.checkpoint.load_contents", BACKEND, "resume restores model, optimizer, scheduler and counters"),
    Setting(
        f"{A}.checkpoint.async_save",
        REFUSED,
        "asynchronous checkpoint writes",
        C.refuse_unless_default(f"{A}.checkpoint.async_save", "saves synchronously"),
    ),
    Setting(f"{A}.checkpoint.strict", VERL, "strict resume (the backend refuses a checkpoint of another model)"),
    Setting(f"{A}.checkpoint.*", PLACEMENT, "how verl's own engines write checkpoints (mbridge, ...)"),
    Setting(
        f"{A}.profiler.enable",
        BACKEND,
        "with global_profiler.steps: the backend's training-job trace (POST /profile) around each profiled step",
        note=C.profile_steps_note,
    ),
    Setting(
        f"{A}.profiler.tool_config.torch.*",
        BACKEND,
        "contents / discrete / schedule: the backend traces CPU (+CUDA) activity of every engine call of the step",
        note=C.actor_profiler_note,
    ),
    Setting(f"{A}.profiler.*", VERL, "verl's profiler config of the forwarder (ranks, save_path, hooks)"),
    # ---- actor: verl's own engines
    Setting(f"{A}.strategy", PLACEMENT, _PLACE),
    Setting(f"{A}.fsdp_config.model_dtype", BACKEND, _MASTER, C.master_weights("actor")),
    Setting(f"{A}.fsdp_config.mixed_precision.*", BACKEND, _MIXED, C.mixed_precision("actor")),
    Setting(f"{A}.fsdp_config.dtype", PLACEMENT, _FSDP_DTYPE),
    Setting(
        f"{A}.fsdp_config.ulysses_sequence_parallel_size",
        BACKEND,
        _SP,
        C.sequence_parallel(f"{A}.fsdp_config.ulysses_sequence_parallel_size"),
    ),
    Setting(f"{A}.fsdp_config.*", PLACEMENT, _PLACE),
    Setting(f"{A}.megatron.*", PLACEMENT, _PLACE),
    Setting(f"{A}.torchtitan.*", PLACEMENT, _PLACE),
    Setting(f"{A}.veomni.*", PLACEMENT, _PLACE),
    Setting(f"{A}.engine.*", PLACEMENT, _PLACE),
    Setting(f"{A}.use_torch_compile", PLACEMENT, _PLACE),
    Setting(f"{A}.use_fused_kernels", PLACEMENT, _PLACE),
    Setting(f"{A}.use_remove_padding", PLACEMENT, _PLACE),
    Setting(f"{A}.pad_to_length", PLACEMENT, _PLACE),
    Setting(f"{A}.entropy_from_logits_with_chunking", PLACEMENT, _PLACE),
    Setting(f"{A}.entropy_from_logits_chunk_size", PLACEMENT, _PLACE),
    Setting(f"{A}.entropy_checkpointing", PLACEMENT, _PLACE),
    Setting(f"{A}.use_prefix_grouper", PLACEMENT, _PLACE),
    Setting(f"{A}.freeze_vision_tower", PLACEMENT, "vision towers only (the arctic backends are text-only)"),
    Setting(
        f"{A}.ulysses_sequence_parallel_size",
        BACKEND,
        "deprecated: copied into fsdp_config.ulysses_sequence_parallel_size by verl",
        C.sequence_parallel(f"{A}.ulysses_sequence_parallel_size"),
    ),
    Setting(
        f"{A}.qat.*",
        REFUSED,
        "quantisation-aware training",
        C.refuse_unless_default(f"{A}.qat.enable", "has no quantisation-aware training"),
    ),
    Setting(
        f"{A}.router_replay.*",
        REFUSED,
        "MoE router record / replay (verl 0.9.0's actor tree)",
        C.router_replay("actor"),
    ),
    # ---- reference policy (the log_prob job)
    Setting(
        f"{F}.log_prob_micro_batch_size",
        BACKEND,
        "deprecated global: per GPU = size / log_prob_gpus -> log_prob_config and the /forward meta.micro_batch_size",
    ),
    Setting(
        f"{F}.log_prob_micro_batch_size_per_gpu",
        BACKEND,
        "log_prob_config.train_micro_batch_size_per_gpu and the reference /forward's meta.micro_batch_size",
    ),
    Setting(
        f"{F}.log_prob_use_dynamic_bsz",
        BACKEND,
        "the reference /forward's meta.use_dynamic_bsz (token-budget micro-batches; log-probs are per row)",
        note=C.log_prob_dynamic_note(F),
    ),
    Setting(f"{F}.log_prob_max_token_len_per_gpu", BACKEND, "the reference /forward's meta.max_token_len_per_gpu"),
    Setting(f"{F}.rollout_n", VERL, "verl (mirrors rollout.n)"),
    Setting(f"{F}.fsdp_config.model_dtype", BACKEND, _MASTER, C.master_weights("ref")),
    Setting(f"{F}.fsdp_config.mixed_precision.*", BACKEND, _MIXED, C.mixed_precision("ref")),
    Setting(f"{F}.fsdp_config.dtype", PLACEMENT, _FSDP_DTYPE),
    Setting(
        f"{F}.fsdp_config.ulysses_sequence_parallel_size",
        BACKEND,
        _SP,
        C.sequence_parallel(f"{F}.fsdp_config.ulysses_sequence_parallel_size"),
    ),
    Setting(
        f"{F}.ulysses_sequence_parallel_size",
        BACKEND,
        "verl's interpolation of actor.ulysses_sequence_parallel_size",
        C.sequence_parallel(f"{F}.ulysses_sequence_parallel_size"),
    ),
    Setting(
        f"{F}.router_replay.*", REFUSED, "MoE router record / replay (verl 0.9.0's ref tree)", C.router_replay("ref")
    ),
    Setting(f"{F}.*", PLACEMENT, _PLACE),
    # ---- model
    Setting(
        f"{M}.path",
        BACKEND,
        "every job's model_name (remote_backend.arctic.model_path overrides); text-only models and data",
        C.multimodal,
    ),
    Setting(f"{M}.tokenizer_path", VERL, "verl's tokenizer (dataset, reward)"),
    Setting(
        f"{M}.hf_config_path",
        REFUSED,
        "a config.json other than the model's",
        C.refuse_unless_default(f"{M}.hf_config_path", "loads the model's own config.json", "unset it"),
    ),
    Setting(f"{M}.use_shm", PLACEMENT, "how verl's own workers load the weights"),
    Setting(f"{M}.trust_remote_code", VERL, "verl's tokenizer; the backend loads transformers models"),
    Setting(f"{M}.custom_chat_template", VERL, "verl's chat template (dataset)"),
    Setting(f"{M}.external_lib", VERL, "imported by verl"),
    Setting(f"{M}.enable_gradient_checkpointing", BACKEND, "ds_worker_config.enable_gradient_checkpointing"),
    Setting(f"{M}.enable_activation_offload", PLACEMENT, _PLACE),
    Setting(f"{M}.use_remove_padding", PLACEMENT, _PLACE),
    Setting(f"{M}.use_fused_kernels", PLACEMENT, _PLACE),
    Setting(f"{M}.fused_kernel_options.*", PLACEMENT, _PLACE),
    Setting(f"{M}.tiled_mlp.*", PLACEMENT, _PLACE),
    Setting(f"{M}.use_liger", BACKEND, "ds_worker_config.use_liger", C.liger),
    Setting(
        f"{M}.override_config.*",
        BACKEND,
        "attn_implementation -> ds_worker_config",
        C.override_config,
        note=C.packed_attention_note,
    ),
    Setting(f"{M}.lora_rank", BACKEND, "LoRA through peft (extensions.lora): the adapter trains, syncs merge", C.lora),
    Setting(f"{M}.lora_alpha", BACKEND, "LoRA alpha"),
    Setting(f"{M}.target_modules", BACKEND, "LoRA target modules"),
    Setting(f"{M}.exclude_modules", BACKEND, "LoRA excluded modules"),
    Setting(f"{M}.target_parameters", BACKEND, "LoRA target parameters"),
    Setting(
        f"{M}.lora_adapter_path",
        REFUSED,
        "a LoRA adapter to start from",
        C.refuse_unless_default(f"{M}.lora_adapter_path", "starts LoRA from scratch", "unset it"),
    ),
    Setting(f"{M}.lora.rank", REFUSED, "Megatron-style LoRA block", C.megatron_lora),
    Setting(f"{M}.lora.*", BACKEND, "Megatron-style LoRA block (used only with lora.rank > 0)"),
    Setting(
        f"{M}.mtp.*",
        REFUSED,
        "multi-token prediction",
        C.refuse_unless_default(f"{M}.mtp.enable", "has no MTP heads"),
    ),
    # ---- rollout (the sampling job)
    Setting(f"{R}.name", BACKEND, "must be arctic", C.rollout_name),
    Setting(f"{R}.mode", VERL, "async agent loop (the only V1 mode)"),
    Setting(f"{R}.temperature", BACKEND, "sampling_params.temperature (and the log-prob temperature)"),
    Setting(f"{R}.top_k", BACKEND, "sampling_params.top_k"),
    Setting(f"{R}.top_p", BACKEND, "sampling_params.top_p"),
    Setting(f"{R}.seed", BACKEND, "the jobs' seed (remote_backend.arctic.seed overrides)"),
    Setting(f"{R}.full_determinism", PLACEMENT, "vLLM batch invariance; remote_backend.arctic.train.determinism"),
    Setting(f"{R}.prompt_length", VERL, "data.max_prompt_length (dense layout width P)"),
    Setting(f"{R}.response_length", BACKEND, "sampling_params.max_tokens"),
    Setting(f"{R}.ignore_eos", BACKEND, "sampling_params.ignore_eos"),
    Setting(f"{R}.do_sample", VERL, "verl's validation settings"),
    Setting(f"{R}.n", VERL, "verl repeats each prompt n times"),
    Setting(f"{R}.over_sample_rate", VERL, "verl's agent loop"),
    Setting(f"{R}.val_kwargs.*", VERL, "validation sampling params, sent per request"),
    Setting(f"{R}.multi_turn.*", VERL, "verl's agent loop"),
    Setting(f"{R}.agent.*", VERL, "verl's agent loop"),
    Setting(f"{R}.trace.*", VERL, "verl's rollout tracing"),
    Setting(
        f"{R}.profiler.*",
        VERL,
        "verl's rollout profiler config (the backend's sampling job has no profiler: a note)",
        note=C.rollout_profiler_note,
    ),
    Setting(f"{R}.calculate_log_probs", BACKEND, "sampling_params.logprobs", note=C.rollout_logprobs_note),
    Setting(f"{R}.logprobs_mode", BACKEND, "log-probs of the temperature-scaled distribution", C.logprobs_mode),
    Setting(f"{R}.gpu_memory_utilization", BACKEND, _SAMPLER),
    Setting(f"{R}.enforce_eager", BACKEND, _SAMPLER),
    Setting(f"{R}.enable_chunked_prefill", BACKEND, _SAMPLER + "; not sent to a CPU sampler (vLLM CPU bug)"),
    Setting(f"{R}.max_model_len", BACKEND, _SAMPLER),
    Setting(f"{R}.max_num_seqs", BACKEND, _SAMPLER),
    Setting(
        f"{R}.engine_kwargs.vllm.*",
        BACKEND,
        "merged into the sampling job's vllm_config (a key the engine rejects: its 422 names it)",
    ),
    Setting(f"{R}.engine_kwargs.*", VERL, "another engine's kwargs: no effect (a note)", note=C.engine_kwargs_note),
    Setting(f"{R}.max_num_batched_tokens", PLACEMENT, "vLLM scheduler budget (set it in engine_kwargs.vllm)"),
    Setting(f"{R}.enable_prefix_caching", PLACEMENT, "vLLM prefix cache (set it in engine_kwargs.vllm)"),
    Setting(f"{R}.cudagraph_capture_sizes", PLACEMENT, "vLLM CUDA graphs (set it in engine_kwargs.vllm)"),
    Setting(f"{R}.dtype", BACKEND, "the sampler's dtype: the job's (remote_backend.arctic.dtype)", C.rollout_dtype),
    Setting(f"{R}.free_cache_engine", BACKEND, "with remote_backend.arctic.colocate: sleep the sampler", C.colocate),
    Setting(f"{R}.multi_stage_wake_up", BACKEND, "colocated staged wake (weights, sync, kv_cache, reset)"),
    Setting(
        f"{R}.tensor_model_parallel_size",
        BACKEND,
        "the sampling job's vLLM tensor_parallel_size: remote_backend.arctic.sampling_gpus / TP replicas; refused "
        "where the sampler cannot (node.py)",
    ),
    Setting(f"{R}.data_parallel_size", BACKEND, "1: replicas come from sampling_gpus / TP (node.py)"),
    Setting(f"{R}.expert_parallel_size", PLACEMENT, _PLACE),
    Setting(f"{R}.pipeline_model_parallel_size", BACKEND, "1: the sampler runs no pipeline stages (node.py)"),
    Setting(f"{R}.nnodes", PLACEMENT, _PLACE),
    Setting(f"{R}.n_gpus_per_node", PLACEMENT, _PLACE),
    Setting(f"{R}.load_format", PLACEMENT, "the backend loads the model itself"),
    Setting(f"{R}.layered_summon", PLACEMENT, _PLACE),
    Setting(
        f"{R}.log_prob_micro_batch_size",
        BACKEND,
        "deprecated global: per GPU = size / training_gpus -> compute_log_prob's /forward meta.micro_batch_size",
    ),
    Setting(
        f"{R}.log_prob_micro_batch_size_per_gpu", BACKEND, "compute_log_prob's /forward meta.micro_batch_size"
    ),  # fmt: skip
    Setting(
        f"{R}.log_prob_use_dynamic_bsz",
        BACKEND,
        "compute_log_prob's /forward meta.use_dynamic_bsz (token-budget micro-batches; log-probs are per row)",
        note=C.log_prob_dynamic_note(R),
    ),
    Setting(f"{R}.log_prob_max_token_len_per_gpu", BACKEND, "compute_log_prob's /forward meta.max_token_len_per_gpu"),
    Setting(f"{R}.disable_log_stats", PLACEMENT, "vLLM logging"),
    Setting(f"{R}.scheduling_policy", PLACEMENT, "vLLM request order"),
    Setting(f"{R}.skip_tokenizer_init", PLACEMENT, "verl's own vLLM engines"),
    Setting(f"{R}.checkpoint_engine.*", VERL, "the remote_backend checkpoint engine (a no-op) replaces it"),
    Setting(f"{R}.moe_load_balance_metrics_interval", PLACEMENT, "verl's own vLLM metrics"),
    Setting(
        f"{R}.prometheus.*",
        REFUSED,
        "vLLM metrics server",
        C.refuse_unless_default(f"{R}.prometheus.enable", "runs no Prometheus exporter"),
    ),
    Setting(
        f"{R}.router_config_path",
        REFUSED,
        "request router",
        C.refuse_unless_default(f"{R}.router_config_path", "has one sampling job, no request router", "unset it"),
    ),
    Setting(
        f"{R}.enable_rollout_routing_replay",
        REFUSED,
        "MoE routing replay",
        C.refuse_unless_default(f"{R}.enable_rollout_routing_replay", "returns no routed experts"),
    ),
    Setting(
        f"{R}.quantization",
        REFUSED,
        "rollout quantisation",
        C.refuse_unless_default(f"{R}.quantization", "samples unquantised", "unset it"),
    ),
    Setting(
        f"{R}.quantization_config_file",
        REFUSED,
        "rollout quantisation",
        C.refuse_unless_default(f"{R}.quantization_config_file", "samples unquantised", "unset it"),
    ),
    Setting(
        f"{R}.mtp.*", REFUSED, "MTP speculative decoding (mirrors model.mtp: a sub-tree once verl resolves the config)"
    ),
    Setting(f"{R}.qat.*", REFUSED, "QAT rollout (mirrors actor qat: a sub-tree once verl resolves the config)"),
    Setting(
        f"{R}.disaggregation.*",
        REFUSED,
        "prefill/decode disaggregation",
        C.refuse_unless_default(f"{R}.disaggregation.enabled", "has one sampling job (no prefill/decode split)"),
    ),
    Setting(f"{ARR}.hybrid_engine", VERL, "verl's worker layout"),
    Setting(f"{ARR}.nccl_timeout", PLACEMENT, "verl's own process groups"),
    # ---- outside actor_rollout_ref: settings whose meaning depends on the backend
    Setting("algorithm.use_kl_in_reward", VERL, "verl's KL reward on the reference job's log-probs", C.kl_in_reward),
    Setting(
        "algorithm.rollout_correction.*",
        BACKEND,
        "rollout IS weights in batch.rollout_is_weights",
        C.rollout_correction,
    ),
    Setting("remote_backend.arctic.train.deepspeed.*", BACKEND, "ds_config (ZeRO stage)", C.zero_stage),
    Setting(
        "remote_backend.arctic.train.zorro_train.*",
        BACKEND,
        "ZoRRo training: an Arctic-Platform server's (ds_worker_config + meta); refused elsewhere",
        C.zorro_train,
    ),
    Setting(
        "remote_backend.arctic.train.logits.*",
        BACKEND,
        "meta.logits_* (and ds_worker_config with ZoRRo): the modes the backend computes",
        C.logits_optimization,
    ),
    Setting("trainer.default_hdfs_dir", REFUSED, "HDFS checkpoint copies", C.hdfs),
    Setting(
        "trainer.total_training_steps",
        VERL,
        "the horizon; verl derives it from the dataloader when null (reaches the backend with the first /step)",
        C.total_steps,
    ),
)


def covering(path: str) -> Optional[Setting]:
    """The first :data:`SETTINGS` entry covering ``path``: exact, a ``.*`` sub-tree (or its root), or a glob."""
    for s in SETTINGS:
        if s.pattern == path:
            return s
        if "*" in s.pattern and (
            fnmatch.fnmatchcase(path, s.pattern) or (s.pattern.endswith(".*") and path == s.pattern[:-2])
        ):
            return s
    return None
