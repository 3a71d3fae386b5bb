#!/usr/bin/env bash
# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
#
# GSM8K GRPO with verl's V1 trainer and the arctic remote backend on one or more H200 nodes.
#
#   MODEL_PATH=/models/Qwen3-8B DATA_DIR=/data/gsm8k bash $(arctic-verl launcher gsm8k-h200) [--dry-run] [overrides...]
#
# Environment:
#   MODEL_PATH          (required) HF model directory, local (no hub download)
#   DATA_DIR            (required) folder with train.parquet + test.parquet from `arctic-verl prepare-gsm8k`
#   ARCTIC_BACKEND      local (default) | onprem (needs ARCTIC_URL)
#     local:  the embedded server on this node, using all of it (GPUS, default 8). The split is printed before
#             anything starts (python -m arctic_platform.integrations.verl.node_plan): half the node trains (FSDP2
#             over those GPUs; more when the model's training state needs it: 16 B/param sharded), the reference
#             log-probs run sharded on the training GPUs (REFERENCE_DEVICES=training, the default; =own gives them
#             one GPU of their own), the rest samples as SAMPLING_GPUS / ROLLOUT_TP vLLM replicas, each pinned to
#             its own GPUs. On 8 GPUs at TP 1: training and reference cuda:0-3, sampling cuda:4-7 (4 replicas).
#             The memory each GPU needs is computed from the model's config and printed; a model that does not fit
#             is refused there. Why half: a GRPO step's update takes about as long as its generation, and the sharded
#             optimizer state shrinks with each training GPU.
#     onprem: an Arctic-Platform server (ARCTIC_URL) that shards each job over several GPUs. Defaults from
#             NNODES x GPUS (1 x 8): 4 training, 3 sampling, 1 reference.
#   ARCTIC_URL          Arctic RL server URL for ARCTIC_BACKEND=onprem
#   ARCTIC_TOKEN_ENV    name of the env var holding the server's bearer token (onprem)
#   NNODES, GPUS        GPU counts (default 1 node x 8 GPUs; local: one node)
#   TRAIN_GPUS, SAMPLING_GPUS, LOG_PROB_GPUS   override the split (all three, or none)
#   REFERENCE_DEVICES   local: training (the reference sharded on the training GPUs; the default, and with given sizes
#                       when LOG_PROB_GPUS = TRAIN_GPUS) | own (GPUs of its own)
#   ROLLOUT_TP          actor_rollout_ref.rollout.tensor_model_parallel_size (default 1: one replica per GPU)
#   ZORRO=1             forest cascade attention on the vLLM sampler (cudagraph_mode forced to PIECEWISE); needs an
#                       Arctic-Platform server (ARCTIC_BACKEND=onprem): the embedded server has no FCA
#   ATTN_IMPL           attention implementation; default: local: the first of flash_attention_3 / flash_attention_2
#                       / sdpa the embedded server loads here; onprem: chosen from the GPU name (FA3 on H100/H200)
#   EXTRA_ENV_CHECK=0   skip the nvidia-smi probe (for --dry-run on machines without GPUs)
#   RUN_DIR             Hydra's run directory (config + log); default runs/grpo_arl_v1/<UTC time> in the cwd
# --dry-run composes and validates the whole Hydra config, prints it, and launches nothing.
set -euo pipefail

DRY_RUN=0
ARGS=()
for a in "$@"; do
  if [ "$a" = "--dry-run" ]; then DRY_RUN=1; else ARGS+=("$a"); fi
done

die() { echo "gsm8k_h200: $*" >&2; exit 2; }
[ -n "${MODEL_PATH:-}" ] || die "MODEL_PATH is not set (a local HF model directory, e.g. /models/Qwen3-8B)"
[ -n "${DATA_DIR:-}" ] || die "DATA_DIR is not set (run: arctic-verl prepare-gsm8k --input <gsm8k files> --out DIR)"
if [ "$DRY_RUN" = 0 ]; then
  [ -d "$MODEL_PATH" ] || die "MODEL_PATH=$MODEL_PATH is not a directory"
  [ -f "$DATA_DIR/train.parquet" ] || die "$DATA_DIR/train.parquet missing (arctic-verl prepare-gsm8k)"
  [ -f "$DATA_DIR/test.parquet" ] || die "$DATA_DIR/test.parquet missing (arctic-verl prepare-gsm8k)"
fi

BACKEND="${ARCTIC_BACKEND:-local}"
case "$BACKEND" in
  local) BACKEND_ARGS=("remote_backend.arctic.backend.type=local" "remote_backend.arctic.device=cuda"
                       "remote_backend.arctic.backend.sampling_engine=vllm") ;;
  onprem)
    [ -n "${ARCTIC_URL:-}" ] || die "ARCTIC_BACKEND=onprem needs ARCTIC_URL"
    BACKEND_ARGS=("remote_backend.arctic.backend.type=onprem" "remote_backend.arctic.backend.url=$ARCTIC_URL")
    [ -n "${ARCTIC_TOKEN_ENV:-}" ] && BACKEND_ARGS+=("remote_backend.arctic.backend.token_env_var=$ARCTIC_TOKEN_ENV") ;;
  *) die "ARCTIC_BACKEND=$BACKEND is not one of local, onprem" ;;
esac
if [ "${ZORRO:-0}" = 1 ] && [ "$BACKEND" = local ]; then
  die "ZORRO=1 with ARCTIC_BACKEND=local: forest cascade attention needs ArcticInference's vLLM plugin, which the embedded server does not run; unset ZORRO, or use an Arctic-Platform server: ARCTIC_BACKEND=onprem ARCTIC_URL=..."
fi

NNODES="${NNODES:-1}"
GPUS="${GPUS:-8}"
ROLLOUT_TP="${ROLLOUT_TP:-1}"
MAX_PROMPT=512
MAX_RESPONSE=1024
if [ "$BACKEND" = local ]; then
  [ "$NNODES" = 1 ] || die "NNODES=$NNODES with ARCTIC_BACKEND=local: the embedded server runs on one node"
  PLAN_ARGS=(--model "$MODEL_PATH" --gpus "$GPUS" --tp "$ROLLOUT_TP" --seq-len $((MAX_PROMPT + MAX_RESPONSE)))
  if [ -n "${TRAIN_GPUS:-}${SAMPLING_GPUS:-}${LOG_PROB_GPUS:-}" ]; then
    PLAN_ARGS+=(--training-gpus "${TRAIN_GPUS:-}" --sampling-gpus "${SAMPLING_GPUS:-}" --log-prob-gpus "${LOG_PROB_GPUS:-}")
  fi
  [ -n "${ATTN_IMPL:-}" ] && PLAN_ARGS+=(--attention "$ATTN_IMPL")
  [ -n "${REFERENCE_DEVICES:-}" ] && PLAN_ARGS+=(--reference-devices "$REFERENCE_DEVICES")
  # the plan goes to stderr (printed); its last stdout line is TRAIN_GPUS=.. SAMPLING_GPUS=.. LOG_PROB_GPUS=..
  # LOG_PROB_DEVICES=.. ATTN_IMPL=..
  PLAN="$(python3 -m arctic_platform.integrations.verl.node_plan "${PLAN_ARGS[@]}")" || exit 2
  eval "$(tail -n1 <<<"$PLAN")"
else
  LOG_PROB_DEVICES=own  # an Arctic-Platform server places its own jobs
  TOTAL=$((NNODES * GPUS))
  TRAIN_GPUS="${TRAIN_GPUS:-$((TOTAL / 2))}"
  LOG_PROB_GPUS="${LOG_PROB_GPUS:-1}"
  SAMPLING_GPUS="${SAMPLING_GPUS:-$((TOTAL - TRAIN_GPUS - LOG_PROB_GPUS))}"
  # Flash-attention choice by GPU name: FA3 on Hopper (H100/H200), FA2 elsewhere.
  if [ -z "${ATTN_IMPL:-}" ]; then
    GPU_NAME=""
    if [ "${EXTRA_ENV_CHECK:-1}" = 1 ] && command -v nvidia-smi >/dev/null 2>&1; then
      GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)"
    fi
    case "$GPU_NAME" in
      *H100*|*H200*|*H800*|*H20*) ATTN_IMPL=flash_attention_3 ;;
      "") ATTN_IMPL=sdpa ;;
      *) ATTN_IMPL=flash_attention_2 ;;
    esac
  fi
fi

ZORRO_ARGS=()
if [ "${ZORRO:-0}" = 1 ]; then
  # The adapter passes the sampler's engine kwargs through arctic_platform.integrations.verl.vllm_config.fca_engine_overrides:
  # cudagraph_mode=PIECEWISE unless enforce_eager, forest_cascade_attn_configs="{}", and an error for full graphs.
  ZORRO_ARGS=("remote_backend.arctic.rollout.zorro_inference.enable=true")
fi

CMD=(python3 -m verl.trainer.main_ppo
  remote_backend=arctic
  "hydra.run.dir=${RUN_DIR:-runs/grpo_arl_v1/$(date -u +%Y-%m-%d_%H-%M-%S)}"
  actor_rollout_ref.rollout.name=arctic
  algorithm.adv_estimator=grpo
  "data.train_files=$DATA_DIR/train.parquet"
  "data.val_files=$DATA_DIR/test.parquet"
  data.train_batch_size=256
  "data.max_prompt_length=$MAX_PROMPT"
  "data.max_response_length=$MAX_RESPONSE"
  "actor_rollout_ref.model.path=$MODEL_PATH"
  "+actor_rollout_ref.model.override_config.attn_implementation=$ATTN_IMPL"
  actor_rollout_ref.actor.optim.lr=1e-6
  actor_rollout_ref.actor.ppo_mini_batch_size=64
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8
  actor_rollout_ref.actor.use_kl_loss=true
  actor_rollout_ref.actor.kl_loss_coef=0.001
  actor_rollout_ref.actor.kl_loss_type=low_var_kl
  actor_rollout_ref.actor.entropy_coeff=0
  actor_rollout_ref.rollout.n=8
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8
  "actor_rollout_ref.rollout.tensor_model_parallel_size=$ROLLOUT_TP"
  actor_rollout_ref.rollout.data_parallel_size=1
  actor_rollout_ref.rollout.pipeline_model_parallel_size=1
  trainer.n_gpus_per_node=1
  trainer.nnodes=1
  trainer.total_epochs=15
  trainer.v1.sampler.poll_interval=0.2
  trainer.logger=[console]
  trainer.project_name=arctic_gsm8k
  trainer.experiment_name=grpo_arl_v1
  "remote_backend.arctic.training_gpus=$TRAIN_GPUS"
  "remote_backend.arctic.sampling_gpus=$SAMPLING_GPUS"
  "remote_backend.arctic.log_prob_gpus=$LOG_PROB_GPUS"
  "remote_backend.arctic.log_prob_devices=$LOG_PROB_DEVICES"
  "${BACKEND_ARGS[@]}"
  "${ZORRO_ARGS[@]}"
  "${ARGS[@]}")

if [ "$DRY_RUN" = 1 ]; then
  exec python3 -m arctic_platform.integrations.verl.compose_check "${CMD[@]:3}"
fi
exec "${CMD[@]}"
