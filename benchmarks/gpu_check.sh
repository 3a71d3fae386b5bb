#!/usr/bin/env bash
# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
#
# One prepared GPU check (< 8 min on one H200, compile time included) that starts on a BARE machine: python3 with
# torch, triton, transformers, httpx, pytest (+xdist); no network; only the git tree + named folders.
#
#   benchmarks/gpu_check.sh --prepare   HERE (network): build the wheel of this commit and download the wheels the
#                                       bare machine lacks (pytest-asyncio, pytest-timeout, fastapi, uvicorn,
#                                       pydantic + core cp312, starlette, anyio, ...; and what the engines step
#                                       imports through verl: benchmarks/gpu_carry.py ENGINES_IMPORTS, ray as a
#                                       16 MiB zip of its wheel without what `import ray` never loads) into
#                                       gpu_carry/ (git-ignored; size checked <= 60 MiB)
#   benchmarks/gpu_check.sh             THERE: install gpu_carry/ (pip --no-index --no-deps --target), then the steps
#   benchmarks/gpu_check.sh --dry       CPU, TRITON_INTERPRET=1, tiny shapes: every step's code path (CI runs it)
#
# Steps (each recorded pass/fail/skip in steps.csv; a failing step never stops the later ones; exit 1 at the end
# if any failed): versions (torch/triton/CUDA/driver) -> install -> import -> cascade (FCA correctness incl. CUDA
# graph replay; kernel-only timing vs no-share vs SDPA; GB/s vs 4.8 TB/s; wrapper cost; n_regs/n_spills) ->
# densify (do_bench_cudagraph, GB/s) -> engines (server engines on CUDA vs CPU) -> sanitizer (compute-sanitizer
# memcheck on a tiny case, 'skipped: not found' without it) -> pytest (the GPU test files).
#
# Env: ARCTIC_BENCH_OUT  results folder (CSV, PNG, summary.txt, steps.csv, logs/); default benchmarks/results/gpu-check
#      PYTHON            interpreter (default python3; the repo's .venv in --dry when present)
#      ARCTIC_GPU_CARRY  carry folder (default <repo>/gpu_carry)
#      ARCTIC_GPU_CHECK_ONLY  comma list of steps to run (others recorded 'skipped: not selected')
#      ARCTIC_GPU_CHECK_FAIL  name of one step whose result is corrupted on purpose (the dry-mode test uses it)
#      ARCTIC_GPU_CHECK_BUDGET  seconds for all steps (default 450); a step past it is recorded failed, not run
# On the device tool: run  ARCTIC_BENCH_OUT=$OUT bash benchmarks/gpu_check.sh  with carry=["gpu_carry"].
set -uo pipefail  # deliberately no -e: every step runs and is recorded
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODE=run
case "${1:-}" in
  --dry) MODE=dry ;;
  --prepare) MODE=prepare ;;
  "") ;;
  -h|--help) sed -n '4,29p' "$0"; exit 0 ;;
  *) echo "gpu_check: unknown argument $1 (--prepare, --dry or none)" >&2; exit 2 ;;
esac
CARRY="${ARCTIC_GPU_CARRY:-$REPO/gpu_carry}"
CARRY_LIMIT_MIB=60
# What the bare H200 lacks (the server stack, pytest-asyncio, pytest-timeout); their dependencies come along, minus
# what is there. Without a pytest plugin the pytest step still runs, with a minimal ini (gpu_pytest).
CARRY_PKGS=(pytest-asyncio pytest-timeout fastapi uvicorn pydantic)
CARRY_SKIP_RE='^(pytest|pluggy|iniconfig|packaging|pygments|torch|triton|numpy|filelock|fsspec|jinja2|markupsafe|networkx|sympy|mpmath|setuptools)-'

if [ "$MODE" = prepare ]; then
  set -e
  PY="${PYTHON:-$(command -v python3)}"
  rm -rf "$CARRY"; mkdir -p "$CARRY"
  (cd "$REPO" && ./build.sh build)
  WHL="$(ls -t "$REPO"/dist/verl-*+arctic.*-py3-none-any.whl | head -n1)"
  cp "$WHL" "$CARRY/"
  # Pin to the versions the CPU test environment (.venv) has, so the H200 runs what CI tested.
  PINS=("${CARRY_PKGS[@]}")
  if [ -x "$REPO/.venv/bin/python" ]; then
    mapfile -t PINS < <("$REPO/.venv/bin/python" - "${CARRY_PKGS[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
for name in sys.argv[1:]:
    try:
        print(f"{name}=={version(name)}")
    except PackageNotFoundError:
        print(name)
PY
)
  fi
  echo "gpu_check --prepare: downloading ${PINS[*]} (+ dependencies) for cp312 manylinux x86_64"
  DL=(-q --only-binary :all: --python-version 3.12 --implementation cp --abi cp312 --platform manylinux2014_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --platform any)
  "$PY" -m pip download "${DL[@]}" --dest "$CARRY" "${PINS[@]}"
  for f in "$CARRY"/*.whl; do
    base="$(basename "$f" | tr 'A-Z_' 'a-z-')"
    if [[ "$base" =~ $CARRY_SKIP_RE ]]; then rm -f "$f"; fi
  done
  # the engines step imports verl, which imports ray, tensordict, omegaconf, ...: what of that the bare image lacks,
  # pinned to the CPU test environment (no dependencies resolved again: gpu_carry.py lists the closure); ray stripped
  [ -x "$REPO/.venv/bin/python" ] || { echo "gpu_check --prepare: no .venv (run ./build.sh test first)" >&2; exit 1; }
  mapfile -t VERL_DEPS < <("$REPO/.venv/bin/python" "$REPO/benchmarks/gpu_carry.py" list)
  VERL_DEPS+=("ray==$("$REPO/.venv/bin/python" -c 'from importlib.metadata import version; print(version("ray"))')")
  echo "gpu_check --prepare: downloading ${VERL_DEPS[*]} (no dependencies) for the engines step's verl import"
  RAYDL="$(mktemp -d)"
  # --no-deps lets pip take an sdist where a release has no wheel (antlr4-python3-runtime 4.9.3): built here below
  "$PY" -m pip download "${DL[@]/:all:/:none:}" --prefer-binary --no-deps --dest "$RAYDL" "${VERL_DEPS[@]}"
  for f in "$RAYDL"/*; do
    case "$(basename "$f")" in
      ray-*.whl) "$PY" "$REPO/benchmarks/gpu_carry.py" strip-ray "$f" "$CARRY/$(basename "$f" .whl)-core.zip" ;;
      *.whl) mv "$f" "$CARRY/" ;;
      *) "$PY" -m pip wheel -q --no-deps --wheel-dir "$CARRY" "$f" ;;  # a pure-Python sdist
    esac
  done
  rm -rf "$RAYDL"
  (cd "$REPO" && git rev-parse HEAD) > "$CARRY/COMMIT"
  if [ -n "$(cd "$REPO" && git status --porcelain --untracked-files=no)" ]; then
    echo "gpu_check --prepare: WARNING: uncommitted changes; the wheel holds them, COMMIT says $(cat "$CARRY/COMMIT")" >&2
    echo "dirty" >> "$CARRY/COMMIT"
  fi
  size=$(du -sm "$CARRY" | cut -f1)
  ls -1 "$CARRY"
  if [ "$size" -gt "$CARRY_LIMIT_MIB" ]; then
    echo "gpu_check --prepare: $CARRY is ${size} MiB > ${CARRY_LIMIT_MIB} MiB (the device tool carries 64 MiB)" >&2
    exit 1
  fi
  echo "gpu_check --prepare: $CARRY ready (${size} MiB, commit $(cat "$CARRY/COMMIT")); carry it as gpu_carry/"
  exit 0
fi

if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"
elif [ "$MODE" = dry ] && [ -x "$REPO/.venv/bin/python" ]; then PY="$REPO/.venv/bin/python"
else PY="$(command -v python3)"; fi
OUTDIR="${ARCTIC_BENCH_OUT:-$REPO/benchmarks/results/gpu-check}"
mkdir -p "$OUTDIR/logs"
OUTDIR="$(cd "$OUTDIR" && pwd)"
STEPS_CSV="$OUTDIR/steps.csv"
SUMMARY="$OUTDIR/summary.txt"
echo "step,status,seconds,note" > "$STEPS_CSV"
: > "$SUMMARY"
BUDGET="${ARCTIC_GPU_CHECK_BUDGET:-450}"
T0=$(date +%s)
FAILED=()
WORK="$(mktemp -d)"  # neutral cwd: the repo root would shadow the installed arctic_platform with the source tree
trap 'rm -rf "$WORK"' EXIT
export ARCTIC_GPU_CHECK_FAIL="${ARCTIC_GPU_CHECK_FAIL:-}"
BENCH_DRY=()
if [ "$MODE" = dry ]; then
  export TRITON_INTERPRET=1 CUDA_VISIBLE_DEVICES=""
  BENCH_DRY=(--dry)
else
  unset TRITON_INTERPRET
fi

say() { echo "== gpu_check [$(( $(date +%s) - T0 ))s] $*"; }
record() {  # record STEP STATUS SECONDS NOTE
  local note="${4//,/;}"
  echo "$1,$2,$3,\"${note//\"/\'}\"" >> "$STEPS_CSV"
  printf '%-10s %-5s %4ss  %s\n' "$1" "$2" "$3" "$4" >> "$SUMMARY"
  say "step $1: $2 ($3s) $4"
}
selected() { [ -z "${ARCTIC_GPU_CHECK_ONLY:-}" ] || [[ ",$ARCTIC_GPU_CHECK_ONLY," == *",$1,"* ]]; }
# step NAME LIMIT_S CMD...: run CMD with a timeout (the smaller of LIMIT_S and the budget left), log to logs/NAME.log
# and the console, record pass/fail. A command that prints 'SKIPPED: why' as its last line and exits 0 is a skip.
step() {
  local name="$1" limit="$2"; shift 2
  if ! selected "$name"; then record "$name" skip 0 "not selected"; return; fi
  local left=$(( BUDGET - ($(date +%s) - T0) ))
  if [ "$left" -le 5 ]; then record "$name" fail 0 "no time left in the ${BUDGET}s budget"; FAILED+=("$name"); return; fi
  [ "$limit" -gt "$left" ] && limit="$left"
  say "step $name (limit ${limit}s)"
  local t=$(date +%s) log="$OUTDIR/logs/$name.log" rc
  # bash -c: a step may be a shell function (exported below); timeout can only run programs
  (cd "$WORK" && timeout --kill-after=10 "$limit" bash -c '"$@"' _ "$@") 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local dt=$(( $(date +%s) - t )) last
  last="$(grep -v '^\s*$' "$log" | tail -n1 | cut -c1-200)"
  if [ "$rc" = 0 ] && [ "$ARCTIC_GPU_CHECK_FAIL" = "$name" ] && ! grep -q "injected" "$log"; then
    rc=99; last="ARCTIC_GPU_CHECK_FAIL=$name (injected at the shell)"
  fi
  if [ "$rc" = 0 ] && [[ "$last" == SKIPPED:* ]]; then record "$name" skip "$dt" "${last#SKIPPED: }"
  elif [ "$rc" = 0 ]; then record "$name" pass "$dt" "$last"
  else
    [ "$rc" = 124 ] && last="timed out after ${limit}s; $last"
    record "$name" fail "$dt" "exit $rc: $last"; FAILED+=("$name")
  fi
}

# ---- steps -------------------------------------------------------------------------------------------------------
versions() {
  "$PY" - <<'PY'
import platform, subprocess, sys
import torch
try:
    import triton
    tv = triton.__version__
except ImportError:
    tv = "missing"
drv = "n/a"
try:
    drv = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=20).stdout.strip().replace("\n", " | ") or "n/a"
except (OSError, subprocess.SubprocessError):
    pass
dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
print(f"python {platform.python_version()} | torch {torch.__version__} (CUDA {torch.version.cuda}) | triton {tv} | "
      f"{dev} x{torch.cuda.device_count()} | driver {drv}")
PY
}

install_carry() {
  if [ ! -d "$CARRY" ]; then
    if (cd "$WORK" && "$PY" -c 'import arctic_platform.kernels.cascade, arctic_platform.server.engines') 2>/dev/null; then
      echo "SKIPPED: no carry folder; arctic_platform already importable"
      return 0
    fi
    echo "no carry folder $CARRY and arctic_platform is not importable: run benchmarks/gpu_check.sh --prepare here and carry gpu_carry/" >&2
    return 1
  fi
  local whls=("$CARRY"/*.whl) zips=()
  [ -e "${whls[0]}" ] || { echo "$CARRY holds no wheel" >&2; return 1; }
  for z in "$CARRY"/*.zip; do [ -e "$z" ] && zips+=("$z"); done
  if "$PY" -m pip --version >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --find-links "$CARRY" --target "$SITE" "${whls[@]}" || return 1
  else  # no pip on the machine: a wheel is a zip archive laid out for site-packages
    echo "pip not available for $PY: unpacking the wheels"
    "$PY" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' "$SITE" "${whls[@]}" || return 1
  fi
  if [ ${#zips[@]} -gt 0 ]; then  # packages carried as site-packages zips (ray, stripped: gpu_carry.py)
    "$PY" -c 'import sys, zipfile; [zipfile.ZipFile(z).extractall(sys.argv[1]) for z in sys.argv[2:]]' "$SITE" "${zips[@]}" || return 1
  fi
  echo "installed ${#whls[@]} wheels and ${#zips[@]} zips from $CARRY (commit $(cat "$CARRY/COMMIT" 2>/dev/null || echo '?')) into $SITE"
}

import_check() {
  "$PY" - <<'PY'
import arctic_platform.kernels.cascade as c, arctic_platform.kernels.densify, arctic_platform.server.engines
import os, sys
repo = os.environ["ARCTIC_REPO"]
if os.path.realpath(c.__file__).startswith(os.path.realpath(repo) + os.sep) and "/.venv/" not in c.__file__:
    sys.exit(f"arctic_platform resolves to the source tree ({c.__file__}), not an installed wheel")
print(f"arctic_platform.kernels from {os.path.dirname(c.__file__)}")
PY
}

sanitizer() {
  local cs
  cs="$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n1 || true)"
  if [ "$MODE" = dry ]; then
    "$PY" "$REPO/benchmarks/kernels/sanitize_case.py" || return 1
    echo "SKIPPED: dry mode (tiny case ran without compute-sanitizer)"
    return 0
  fi
  if [ -z "$cs" ]; then
    "$PY" "$REPO/benchmarks/kernels/sanitize_case.py" || return 1
    echo "SKIPPED: compute-sanitizer not found (tiny case ran without it)"
    return 0
  fi
  # no caching allocator: every tensor is its own allocation, so an out-of-bounds access is outside any allocation
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$cs" --tool memcheck --error-exitcode 3 --print-limit 20 \
    "$PY" "$REPO/benchmarks/kernels/sanitize_case.py"
}

gpu_pytest() {
  local files=(tests/kernels/test_cascade_graph.py tests/kernels/test_cascade.py tests/kernels/test_densify.py)
  [ "$MODE" = dry ] && files=(tests/kernels/test_exports_on_cpu.py)  # the command line itself, cheaply
  local args=(-p no:randomly -q -p no:cacheprovider) missing=() plugin
  # pyproject's [tool.pytest.ini_options] needs all three: --strict-config rejects its timeout and asyncio_* keys
  # without their plugins, and its addopts' --dist is an xdist option
  for plugin in pytest_timeout:pytest-timeout pytest_asyncio:pytest-asyncio xdist:pytest-xdist; do
    "$PY" -c "import ${plugin%%:*}" 2>/dev/null || missing+=("${plugin#*:}")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    args+=(-c "$REPO/pyproject.toml" --rootdir "$REPO")
  else  # a minimal ini instead, and only the options of the plugins that are there
    printf '[pytest]\nmarkers =\n    cpu: cpu\n    slow: slow\n    gpu: gpu\n' > "$WORK/pytest.ini"
    args+=(-c "$WORK/pytest.ini" --rootdir "$REPO" --import-mode=importlib)
    echo "${missing[*]} missing: running with a minimal ini (no --strict-config)"
  fi
  [[ " ${missing[*]} " == *" pytest-timeout "* ]] || args+=(--timeout 150)
  [[ " ${missing[*]} " == *" pytest-xdist "* ]] || [ "$MODE" = dry ] || args+=(-n 4)
  "$PY" -m pytest "${args[@]}" "${files[@]/#/$REPO/}"
}

# ---- run ---------------------------------------------------------------------------------------------------------
SITE="$WORK/site"
mkdir -p "$SITE"
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" ARCTIC_REPO="$REPO" MPLBACKEND=Agg
export PY REPO CARRY SITE WORK MODE
export -f versions install_carry import_check sanitizer gpu_pytest
say "mode $MODE, python $PY, results in $OUTDIR"
if [ "$MODE" = run ] && ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "gpu_check: FAILED: no CUDA device visible to $PY; use --dry on CPU" >&2
  record preflight fail 0 "no CUDA device visible"
  exit 1
fi
step versions 60 versions
step install 120 install_carry
step import 60 import_check
step cascade 240 "$PY" "$REPO/benchmarks/kernels/bench_cascade.py" "${BENCH_DRY[@]}" --out "$OUTDIR"
if [ "$MODE" = dry ]; then DENSIFY_ARGS=(--dry); else DENSIFY_ARGS=(--device cuda); fi
step densify 90 "$PY" "$REPO/benchmarks/kernels/bench_densify.py" "${DENSIFY_ARGS[@]}" --out "$OUTDIR"
step engines 210 "$PY" "$REPO/benchmarks/server/engines_check.py" "${BENCH_DRY[@]}" --out "$OUTDIR"
step sanitizer 120 sanitizer
step pytest 200 gpu_pytest

{
  echo
  echo "figures:"
  for f in "$OUTDIR"/logs/cascade.log "$OUTDIR"/logs/densify.log "$OUTDIR"/logs/engines.log; do
    [ -f "$f" ] && grep -E '^(ex[0-9]|dry|densify|engines_check:|kernel )' "$f"
  done
  echo "total $(( $(date +%s) - T0 ))s"
} >> "$SUMMARY"
cat "$SUMMARY"
LABEL="GPU CHECK"; [ "$MODE" = dry ] && LABEL="GPU CHECK (dry)"
if [ "${#FAILED[@]}" -gt 0 ]; then
  say "$LABEL FAILED: ${FAILED[*]} (see $STEPS_CSV and $OUTDIR/logs/)"
  exit 1
fi
say "$LABEL OK"
exit 0
