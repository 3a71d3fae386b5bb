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
#   ARCTIC_BACKEND      local (default: embedded server on this node's GPUs) | onprem (needs ARCTIC_URL)
#   ARCTIC_URL          Arctic RL server URL for ARCTIC_BACKEND=onprem
#   ARCTIC_TOKEN_ENV    name of the env var holding the server's bearer token (onprem)
#   NNODES, GPUS        backend GPU counts (default 1 node x 8 GPUs: 4 training, 3 sampling, 1 reference)
#   TRAIN_GPUS, SAMPLING_GPUS, LOG_PROB_GPUS   override the split
#   ZORRO=1             forest cascade attention on the vLLM sampler (cudagraph_mode forced to PIECEWISE)
#   ATTN_IMPL           attention implementation; default chosen from the GPU name (flash_attention_3 on H100/H200)
#   EXTRA_ENV_CHECK=0   skip the nvidia-smi probe (for --dry-run on machines without GPUs)
# --dry-run composes and validates the whole Hydra config, prints it, and launches nothing.
set -euo pipefail

DRY_RUN=0
ARGS=()
for a in "$@"; do
  if [ "$a" = "--dry-run" ]; then DRY_RUN=1; else ARGS+=("$a"); fi
done

die() { echo "run_gsm8k_grpo_arl_v1: $*" >&2; exit 2; }
[ -n "${MODEL_PATH:-}" ] || die "MODEL_PATH is not set (a local HF model directory, e.g. /models/Qwen3-8B)"
[ -n "${DATA_DIR:-}" ] || die "DATA_DIR is not set (run: arctic-verl prepare-gsm8k --input <gsm8k files> --out DIR)"
if [ "$DRY_RUN" = 0 ]; then
  [ -d "$MODEL_PATH" ] || die "MODEL_PATH=$MODEL_PATH is not a directory"
  [ -f "$DATA_DIR/train.parquet" ] || die "$DATA_DIR/train.parquet missing (arctic-verl prepare-gsm8k)"
  [ -f "$DATA_DIR/test.parquet" ] || die "$DATA_DIR/test.parquet missing (arctic-verl prepare-gsm8k)"
fi

BACKEND="${ARCTIC_BACKEND:-local}"
case "$BACKEND" in
  local) BACKEND_ARGS=("remote_backend.arctic.backend.type=local" "remote_backend.arctic.device=cuda") ;;
  onprem)
    [ -n "${ARCTIC_URL:-}" ] || die "ARCTIC_BACKEND=onprem needs ARCTIC_URL"
    BACKEND_ARGS=("remote_backend.arctic.backend.type=onprem" "remote_backend.arctic.backend.url=$ARCTIC_URL")
    [ -n "${ARCTIC_TOKEN_ENV:-}" ] && BACKEND_ARGS+=("remote_backend.arctic.backend.token_env_var=$ARCTIC_TOKEN_ENV") ;;
  *) die "ARCTIC_BACKEND=$BACKEND is not one of local, onprem" ;;
esac

NNODES="${NNODES:-1}"
GPUS="${GPUS:-8}"
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

ZORRO_ARGS=()
if [ "${ZORRO:-0}" = 1 ]; then
  # The adapter passes the sampler's engine kwargs through arctic_platform.integrations.verl.vllm_config.fca_engine_overrides:
  # cudagraph_mode=PIECEWISE unless enforce_eager, forest_cascade_attn_configs="{}", and an error for full graphs.
  ZORRO_ARGS=("remote_backend.arctic.rollout.zorro_inference.enable=true")
fi

CMD=(python3 -m verl.trainer.main_ppo
  remote_backend=arctic
  actor_rollout_ref.rollout.name=arctic
  algorithm.adv_estimator=grpo
  "data.train_files=$DATA_DIR/train.parquet"
  "data.val_files=$DATA_DIR/test.parquet"
  data.train_batch_size=256
  data.max_prompt_length=512
  data.max_response_length=1024
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
  actor_rollout_ref.rollout.tensor_model_parallel_size=1
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
  "${BACKEND_ARGS[@]}"
  "${ZORRO_ARGS[@]}"
  "${ARGS[@]}")

if [ "$DRY_RUN" = 1 ]; then
  exec python3 -m arctic_platform.integrations.verl.compose_check "${CMD[@]:3}"
fi
exec "${CMD[@]}"
