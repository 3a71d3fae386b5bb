#!/usr/bin/env bash
# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
# ./build.sh wall time cold (empty sdist cache: download; no build tools) vs warm (cached sdist, tools present,
# shipped content changed so the wheel is rebuilt), and the wheel size. Prints the ratio and writes CSV.
#   bash benchmarks/build/bench_build.sh [results dir]
set -euo pipefail
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-$REPO/benchmarks/results/cpu}"
mkdir -p "$OUT"
WORK="$(mktemp -d)"; trap 'rm -rf "$WORK"' EXIT
git clone -q "$REPO" "$WORK/checkout"
cd "$WORK/checkout"
export ARCTIC_CACHE_DIR="$WORK/cache"
t() { local s e; s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); python3 -c "print(round(($e - $s) / 1e9, 2))"; }
cold=$(t ./build.sh)
echo "# touch shipped content so the warm build really rebuilds the wheel" >> arctic_platform/__init__.py
warm=$(t ./build.sh)
noop=$(t ./build.sh)
whl=$(ls dist/*.whl)
size=$(stat -c %s "$whl")
echo "mode,seconds" > "$OUT/build_time.csv"
printf 'cold,%s\nwarm,%s\nup_to_date,%s\n' "$cold" "$warm" "$noop" >> "$OUT/build_time.csv"
echo "wheel,$(basename "$whl"),$size bytes" >> "$OUT/build_time.csv"
echo "build cold ${cold}s (download + tool venv), warm ${warm}s (cached sdist, rebuild), up-to-date ${noop}s"
echo "wheel $(basename "$whl") $((size / 1024)) KiB; cold/warm ratio $(python3 -c "print(round($cold/$warm,1))")x"
