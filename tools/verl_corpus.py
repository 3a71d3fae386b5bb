# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Record the Hydra overrides verl's own launch scripts pass to ``python3 -m verl.*`` (the corpus test's data).

``python3 tools/verl_corpus.py --repo GIT_DIR --ref TAG --out FILE [SCRIPT ...]`` exports the scripts' folders of
``GIT_DIR`` at ``TAG`` into a scratch folder, runs each script there with ``bash`` and a shim first on ``PATH``: a fake
``python3`` / ``python`` that writes its argv as JSON when called as ``-m verl.<module> ...`` and exits 0, and fails
(exit 1, as on a host without the package) for anything else (the scripts' ``python3 -c 'import torch_npu'`` device
probes). Nothing of verl runs. The environment is empty except ``HOME`` (a scratch folder), ``PATH`` (the shim, then
``/usr/bin:/bin``) and ``BASH_ENV`` (a ``ulimit`` that never fails: some scripts raise the open-files limit past what a
container allows; a ``date`` that prints ``DATE``, so the record is reproducible), so each script's own defaults
apply (GPU, vLLM, 8 GPUs per node as the scripts assume).

``FILE`` gets the upstream repository, tag and commit, and per script its path, the module it launches and the argv
after ``-m <module>`` exactly as bash expanded it (and the variables :data:`SCRIPT_ENV` gave it), with the scratch
``$HOME`` written as ``${HOME}`` and the scripts' checkout (their working directory) as ``${VERL_REPO}``, so the data
does not depend on the scratch folder. Only the recorded overrides are kept, never the scripts. Standard library only.

The default script list is the corpus of ``tests/arctic_platform/integrations/verl/test_verl_corpus_on_cpu.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

SCRIPTS = (
    "examples/grpo_trainer/run_qwen3_8b_fsdp.sh",
    "examples/grpo_trainer/run_qwen3_8b_megatron.sh",
    "examples/grpo_trainer/run_qwen3_30b_a3b_megatron.sh",
    "examples/grpo_trainer/run_qwen3_30b_veomni.sh",
    "examples/grpo_trainer/run_qwen2_5_vl_7b_fsdp.sh",
    "examples/gspo_trainer/run_qwen3_8b_fsdp.sh",
    "examples/cispo_trainer/run_qwen3_8b_fsdp.sh",
    "examples/gmpo_trainer/run_qwen3_8b_fsdp.sh",
    "examples/gpg_trainer/run_qwen3_8b_fsdp.sh",
    "examples/sapo_trainer/run_qwen3_8b_fsdp.sh",
    "examples/dppo_trainer/run_qwen3_30b_a3b_megatron.sh",
    "examples/tuning/lora/run_qwen3_8b_fsdp.sh",
    "examples/tuning/lora/run_qwen3_8b_from_adapter_fsdp.sh",
    "examples/tuning/lora/run_qwen3_30b_a3b_megatron.sh",
    "examples/ppo_trainer/run_qwen3_8b_fsdp.sh",
    "examples/otb_trainer/run_qwen3_8b_fsdp.sh",
    "examples/reinforce_plus_plus_trainer/run_qwen3_8b_fsdp.sh",
    "examples/rloo_trainer/run_qwen3_8b_fsdp.sh",
    "examples/remax_trainer/run_qwen3_8b_fsdp.sh",
    "examples/gdpo_trainer/run_qwen3_8b_fsdp.sh",
    "examples/prefix_grouper/run_qwen3_8b_fsdp.sh",
    "examples/rollout_correction/run_qwen2_5_7b_fsdp.sh",
    "examples/rollout_correction/run_qwen2_5_7b_fsdp_multi_rs.sh",
    "examples/profile/run_qwen2_5_7b_torch_profile.sh",
    "examples/router_replay/run_qwen3_30b_a3b_megatron.sh",
    "verl/experimental/fully_async_policy/shell/dapo_7b_async_retool.sh",
    "verl/experimental/one_step_off_policy/shell/grpo_0.6b_gsm8k_fsdp2_2_6.sh",
)
"""The corpus: one script per algorithm, engine and feature the issue names (GRPO on three engines, a VLM, GSPO,
CISPO, GMPO, GPG, SAPO, DPPO, LoRA three ways, PPO, optimal-token-baseline, REINFORCE++, RLOO, ReMax, GDPO, prefix
grouper, rollout correction twice, torch profile, router replay, fully-async multi-turn tool, one-step-off-policy)."""

SCRIPT_ENV = {
    "examples/tuning/lora/run_qwen3_8b_from_adapter_fsdp.sh": {"LORA_ADAPTER_PATH": "{HOME}/lora_adapter"},
}
"""What a script refuses to start without (its own ``${VAR:?}`` checks); ``{HOME}`` is the scratch home."""

SHIM = """#!/bin/bash
# arctic-verl corpus shim: records `-m verl.*` launches, fails everything else
if [ "$1" = "-m" ] && [[ "$2" == verl.* ]]; then
  exec "$ARCTIC_CORPUS_PYTHON" -c '
import json, os, sys
with open(os.environ["ARCTIC_CORPUS_OUT"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
' "$@"
fi
exit 1
"""


def _export(repo: Path, ref: str, folders: list[str], dest: Path) -> str:
    """``git archive`` of ``folders`` at ``ref`` into ``dest``; returns the commit."""
    commit = subprocess.run(
        ["git", "--git-dir", str(repo), "rev-parse", f"{ref}^{{commit}}"], check=True, capture_output=True, text=True
    ).stdout.strip()
    archive = dest / "tree.tar"
    subprocess.run(
        ["git", "--git-dir", str(repo), "archive", "--format=tar", "-o", str(archive), commit, *folders], check=True
    )
    with tarfile.open(archive) as tar:
        tar.extractall(dest / "tree", filter="data")
    archive.unlink()
    return commit


def _record(tree: Path, script: str, scratch: Path) -> dict:
    shim = scratch / "shim"
    shim.mkdir(exist_ok=True)
    for name in ("python3", "python"):
        (shim / name).write_text(SHIM)
        (shim / name).chmod(0o755)
    home = scratch / "home"
    home.mkdir(exist_ok=True)
    out = scratch / "argv.jsonl"
    out.unlink(missing_ok=True)
    # a script's `ulimit -n <more than this host allows>` must not stop it before its launch line
    # and a fixed `date`, so experiment names built from it record the same on every run
    (scratch / "bash_env").write_text('ulimit() { builtin ulimit "$@" 2>/dev/null || true; }\ndate() { echo DATE; }\n')
    env = {
        "BASH_ENV": str(scratch / "bash_env"),
        "HOME": str(home),
        "PATH": f"{shim}:/usr/bin:/bin",
        "ARCTIC_CORPUS_OUT": str(out),
        "ARCTIC_CORPUS_PYTHON": sys.executable,
    }
    given = {k: v.replace("{HOME}", str(home)) for k, v in SCRIPT_ENV.get(script, {}).items()}
    env.update(given)
    run = subprocess.run(["bash", script], cwd=tree, env=env, capture_output=True, text=True, timeout=60)
    launches = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    if run.returncode != 0 or len(launches) != 1:
        raise RuntimeError(f"{script}: exit {run.returncode}, {len(launches)} launch(es): {run.stderr[-2000:]}")
    argv = [a.replace(str(home), "${HOME}").replace(str(tree), "${VERL_REPO}") for a in launches[0]]
    record = {"path": script, "module": argv[1], "overrides": argv[2:]}
    if script in SCRIPT_ENV:
        record["env"] = {k: v.replace("{HOME}", "${HOME}") for k, v in SCRIPT_ENV[script].items()}
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=Path, help="a git directory of verl-project/verl")
    parser.add_argument("--ref", required=True, help="the release tag to read the scripts at")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("scripts", nargs="*", default=list(SCRIPTS))
    args = parser.parse_args(argv)
    folders = sorted({s.split("/", 1)[0] for s in args.scripts})
    with tempfile.TemporaryDirectory(prefix="verl-corpus-") as tmp:
        scratch = Path(tmp)
        commit = _export(args.repo, args.ref, folders, scratch)
        scripts = [_record(scratch / "tree", s, scratch) for s in args.scripts]
    data = {
        "upstream": {"repository": "verl-project/verl", "tag": args.ref, "commit": commit},
        "recorded_by": "tools/verl_corpus.py (bash + a python3 shim that records `-m verl.*` argv)",
        "scripts": scripts,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(scripts)} script(s) of verl {args.ref} ({commit[:12]}) -> {args.out}")
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    sys.exit(main())
