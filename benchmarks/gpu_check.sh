#!/usr/bin/env bash
# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
#
# Every GPU check of the kernels in one short script (< 10 min on one H200):
#   1. forest cascade attention correctness at the real shape (Hq 32, Hkv 8, D 128, bf16 + fp32, block 16)
#   2. do_bench: FCA vs the same kernel without sharing vs torch SDPA on gathered KV, GB/s vs 4.8 TB/s
#   3. densify at B=1024, P=512, R=1024 (Triton vs torch on the GPU) vs its ~17.5 us roofline
#   4. the GPU pytest files (tests/kernels/test_densify.py, test_cascade.py) when pytest + the test extras exist
#
#   benchmarks/gpu_check.sh          needs a CUDA device; fails loudly without one
#   benchmarks/gpu_check.sh --dry    tiny shapes on CPU under TRITON_INTERPRET=1 (what CI runs)
#
# Env: PYTHON (interpreter with torch + triton; default: the repo's .venv if present, else python3),
#      ARCTIC_BENCH_OUT (results folder; default benchmarks/results/<device>/).
# arctic_platform.kernels must be importable; if it is not, the wheel in dist/ is unpacked (pip --no-deps
# --target, no network) into a temporary folder put on PYTHONPATH.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DRY=0
case "${1:-}" in
  --dry) DRY=1 ;;
  "") ;;
  -h|--help) sed -n '4,19p' "$0"; exit 0 ;;
  *) echo "gpu_check: unknown argument $1 (only --dry)" >&2; exit 2 ;;
esac
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"
elif [ -x "$REPO/.venv/bin/python" ]; then PY="$REPO/.venv/bin/python"
else PY="$(command -v python3)"; fi
OUT_ARGS=()
[ -n "${ARCTIC_BENCH_OUT:-}" ] && OUT_ARGS=(--out "$ARCTIC_BENCH_OUT")
T0=$(date +%s)
step() { echo "== gpu_check [$(( $(date +%s) - T0 ))s] $*"; }
# Python from a neutral folder: the repo root would shadow the installed arctic_platform with the source tree.
pyc() { (cd /tmp && "$PY" -c "$@"); }

if [ "$DRY" = 1 ]; then
  export TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES=""
  step "dry mode: CPU, TRITON_INTERPRET=1, tiny shapes (numbers meaningless)"
else
  unset TRITON_INTERPRET
  if ! pyc 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu_check: FAILED: no CUDA device visible to $PY (torch $(pyc 'import torch; print(torch.__version__)' 2>/dev/null || echo missing)); use --dry on CPU" >&2
    exit 1
  fi
  step "device: $(pyc 'import torch, triton; print(torch.cuda.get_device_name(0), "| torch", torch.__version__, "| triton", triton.__version__)')"
fi

if ! pyc 'import arctic_platform.kernels.cascade, arctic_platform.kernels.densify' >/dev/null 2>&1; then
  WHL="$(ls "$REPO"/dist/verl-*+arctic.*-py3-none-any.whl 2>/dev/null | head -n1 || true)"
  [ -n "$WHL" ] || { echo "gpu_check: arctic_platform.kernels is not importable and dist/ has no wheel: run ./build.sh" >&2; exit 1; }
  SITE="$(mktemp -d)"
  trap 'rm -rf "$SITE"' EXIT
  "$PY" -m pip install -q --no-deps --no-index --target "$SITE" "$WHL"
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  step "using $(basename "$WHL") unpacked into a temporary folder"
fi

if [ "$DRY" = 1 ]; then
  step "cascade: correctness + timing (dry)"
  "$PY" "$REPO/benchmarks/kernels/bench_cascade.py" --dry "${OUT_ARGS[@]}"
  step "densify: CPU providers incl. the interpreted Triton kernel (dry)"
  "$PY" "$REPO/benchmarks/kernels/bench_densify.py" --dry "${OUT_ARGS[@]}"
  step "GPU CHECK (dry) OK"
  exit 0
fi

step "cascade: correctness at the real shape, then do_bench"
"$PY" "$REPO/benchmarks/kernels/bench_cascade.py" "${OUT_ARGS[@]}"
step "densify: Triton vs torch on the GPU, GB/s vs roofline"
"$PY" "$REPO/benchmarks/kernels/bench_densify.py" --device cuda "${OUT_ARGS[@]}"
if pyc 'import pytest, xdist, pytest_timeout, pytest_asyncio' >/dev/null 2>&1; then
  step "GPU pytest files"
  PYTEST="$(dirname "$PY")/pytest"
  [ -x "$PYTEST" ] || PYTEST="$(command -v pytest)"
  (cd "$REPO" && "$PYTEST" -p no:randomly -q -n 4 tests/kernels/test_densify.py tests/kernels/test_cascade.py)
else
  step "GPU pytest files SKIPPED: pytest with xdist/timeout/asyncio not installed for $PY (the checks above still ran)"
fi
step "GPU CHECK OK"
