# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""Record the Hydra overrides launch scripts (verl's own, Arctic-Platform's) pass to ``python3 -m verl.*``: test data.

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

``python3 tools/verl_corpus.py --preset arctic-platform --repo GIT_DIR --out FILE [[REF:]SCRIPT ...]`` records
Arctic-Platform's own verl launch scripts (:data:`AP_SCRIPTS`, each at its own branch; ``--ref`` reads them all at
one ref instead, ``REF:SCRIPT`` names a script and its ref) the same way, with the checkout written as ``${AP_REPO}``.
There the shim also fails ``nvidia-smi``, ``nvcc``, ``ray`` and ``ds_ssh`` (the scripts' GPU / CUDA / cluster probes,
whatever this host has), ``mkdir`` creates nothing outside the scratch folder (a script's default checkpoint folder
is ``/checkpoint/...``), :data:`AP_SCRIPT_ENV` gives what a script refuses to start without, and the shim also
records the environment the launch gets: ``FILE`` has per script its branch and commit, and ``env``, every variable
of the launch the tool did not set itself (what the script exported, and what :data:`AP_SCRIPT_ENV` gave it, also
listed as ``given_env``), sorted, with the same path substitutions; the upstream block has each branch's commit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
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

AP_SCRIPTS = (
    ("karthik/verl-v1-plugin", "arctic_platform/integrations/verl/v1/examples/run_gsm8k_grpo_arl_v1.sh"),
    ("karthik/verl-v1-plugin", "arctic_platform/integrations/verl/examples/run_gsm8k_grpo_cortex.sh"),
    ("main", "arctic_platform/integrations/verl/examples/run_gsm8k_grpo_arl.sh"),
    ("main", "arctic_platform/integrations/verl/examples/run_bird_grpo_arl.sh"),
    ("main", "recipes/rl/verl/simple/run_qwen3_1.7b_gsm8k_grpo_arl.sh"),
    ("main", "recipes/rl/verl/txt2sql/run_qwen3_32b_bird_grpo_arl_zorro_yes.sh"),
    ("main", "recipes/rl/verl/long_context_qa/run_qwen3_32b_longcontext_grpo_arl.sh"),
)
"""Arctic-Platform's own verl launch scripts, each with the branch it is read at: the verl-V1 plugin example and the
Cortex example (only on ``karthik/verl-v1-plugin``), the two canonical plugin examples (GSM8K, BIRD) and the three
recipes (simple GSM8K, 32B BIRD text-to-SQL, 32B long-context QA) of ``main``."""

AP_SCRIPT_ENV = {
    # `[[ "${ARCTIC_BACKEND:-}" != "cortex" ]] && exit 1`; it checks nothing else (the ARCTIC_CORTEX_* connection
    # settings are read by the backend at run time, not by the script)
    "arctic_platform/integrations/verl/examples/run_gsm8k_grpo_cortex.sh": {"ARCTIC_BACKEND": "cortex"},
}
"""What an Arctic-Platform script refuses to start without; ``{HOME}`` is the scratch home."""

SHIM = """#!/bin/bash
# arctic-verl corpus shim: records `-m verl.*` launches, fails everything else
if [ "$1" = "-m" ] && [[ "$2" == verl.* ]]; then
  if [ -n "$ARCTIC_CORPUS_ENV" ]; then env -0 > "$ARCTIC_CORPUS_ENV"; fi
  exec "$ARCTIC_CORPUS_PYTHON" -c '
import json, os, sys
with open(os.environ["ARCTIC_CORPUS_OUT"], "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
' "$@"
fi
exit 1
"""

PROBE = "#!/bin/bash\n# arctic-verl corpus shim: a GPU / CUDA / cluster probe fails, as on a host without one\nexit 1\n"

BASH_ENV = 'ulimit() { builtin ulimit "$@" 2>/dev/null || true; }\ndate() { echo DATE; }\n'

MKDIR_GUARD = 'mkdir() {{ local a; for a; do case "$a" in "{scratch}"/*) command mkdir -p -- "$a" ;; esac; done; }}\n'
"""``mkdir`` that creates only folders inside the scratch folder (``{scratch}``) and never fails."""

SHELL_ENV = ("SHLVL", "PWD", "OLDPWD", "_")
"""What bash itself puts in a command's environment: not the script's."""


@dataclass(frozen=True)
class Preset:
    repository: str
    scripts: tuple[tuple[str | None, str], ...]  # (ref, path); ref None: --ref
    script_env: dict[str, dict[str, str]]
    placeholder: str  # the checkout, in the record
    probes: tuple[str, ...] = ()  # commands the shim fails
    guard_mkdir: bool = False
    capture_env: bool = False
    recorded_by: str = "tools/verl_corpus.py (bash + a python3 shim that records `-m verl.*` argv)"


PRESETS = {
    "verl": Preset("verl-project/verl", tuple((None, s) for s in SCRIPTS), SCRIPT_ENV, "${VERL_REPO}"),
    "arctic-platform": Preset(
        "Snowflake-AI-Research/Arctic-Platform",
        AP_SCRIPTS,
        AP_SCRIPT_ENV,
        "${AP_REPO}",
        probes=("nvidia-smi", "nvcc", "ray", "ds_ssh"),
        guard_mkdir=True,
        capture_env=True,
        recorded_by=(
            "tools/verl_corpus.py --preset arctic-platform (bash + a python3 shim that records `-m verl.*` argv and"
            " the launch environment)"
        ),
    ),
}


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


def _record(tree: Path, script: str, scratch: Path, preset: Preset = PRESETS["verl"]) -> dict:
    shim = scratch / "shim"
    shim.mkdir(exist_ok=True)
    for name in ("python3", "python"):
        (shim / name).write_text(SHIM)
        (shim / name).chmod(0o755)
    for name in preset.probes:
        (shim / name).write_text(PROBE)
        (shim / name).chmod(0o755)
    home = scratch / "home"
    home.mkdir(exist_ok=True)
    out = scratch / "argv.jsonl"
    out.unlink(missing_ok=True)
    # a script's `ulimit -n <more than this host allows>` must not stop it before its launch line
    # and a fixed `date`, so experiment names built from it record the same on every run
    bash_env = BASH_ENV + (MKDIR_GUARD.format(scratch=scratch) if preset.guard_mkdir else "")
    (scratch / "bash_env").write_text(bash_env)
    env = {
        "BASH_ENV": str(scratch / "bash_env"),
        "HOME": str(home),
        "PATH": f"{shim}:/usr/bin:/bin",
        "ARCTIC_CORPUS_OUT": str(out),
        "ARCTIC_CORPUS_PYTHON": sys.executable,
    }
    launch_env = scratch / "env.bin"
    launch_env.unlink(missing_ok=True)
    if preset.capture_env:
        env["ARCTIC_CORPUS_ENV"] = str(launch_env)
    base = dict(env)
    given = {k: v.replace("{HOME}", str(home)) for k, v in preset.script_env.get(script, {}).items()}
    env.update(given)
    run = subprocess.run(["bash", script], cwd=tree, env=env, capture_output=True, text=True, timeout=60)
    launches = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    if run.returncode != 0 or len(launches) != 1:
        raise RuntimeError(f"{script}: exit {run.returncode}, {len(launches)} launch(es): {run.stderr[-2000:]}")

    def portable(value: str) -> str:
        return value.replace(str(home), "${HOME}").replace(str(tree), preset.placeholder)

    argv = [portable(a) for a in launches[0]]
    record = {"path": script, "module": argv[1], "overrides": argv[2:]}
    if preset.capture_env:
        pairs = (item.partition("=") for item in launch_env.read_bytes().decode().split("\0") if item)
        launched = {k: v for k, _, v in pairs if k not in SHELL_ENV and base.get(k) != v}
        record["env"] = {k: portable(launched[k]) for k in sorted(launched)}
        if given:
            record["given_env"] = {k: v.replace("{HOME}", "${HOME}") for k, v in preset.script_env[script].items()}
        if str(scratch) in json.dumps(record):
            raise RuntimeError(f"{script}: the record names the scratch folder: {json.dumps(record)}")
    elif script in preset.script_env:
        record["env"] = {k: v.replace("{HOME}", "${HOME}") for k, v in preset.script_env[script].items()}
    return record


def _scripts(name: str, ref: str | None, given: list[str]) -> list[tuple[str, str]]:
    """``(ref, path)`` per script: ``REF:PATH`` as given, else ``--ref``, else the preset's branch for the path."""
    preset = PRESETS[name]
    branches = {path: branch for branch, path in preset.scripts}
    pairs = []
    for item in given or [path for _, path in preset.scripts]:
        at, sep, path = item.partition(":")
        if not sep:
            at, path = ref or branches.get(item), item
        if not at:
            raise SystemExit(f"{item}: no ref (--ref, REF:{item}, or a script of the {name} preset)")
        pairs.append((at, path))
    return pairs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=Path, help="a git directory of the preset's repository")
    parser.add_argument(
        "--ref", help="the release tag to read the scripts at (verl: required; arctic-platform: every script's ref)"
    )
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        default="verl",
        help="verl: verl-project/verl's examples (default); arctic-platform: Snowflake-AI-Research/Arctic-Platform's"
        " verl launch scripts, each at its own branch",
    )
    parser.add_argument("scripts", nargs="*", help="default: the preset's scripts; arctic-platform: [REF:]PATH")
    args = parser.parse_args(argv)
    preset = PRESETS[args.preset]
    if args.preset == "verl":
        if args.ref is None:
            parser.error("the following arguments are required: --ref")
        return _verl(args)
    pairs = _scripts(args.preset, args.ref, args.scripts)
    refs = list(dict.fromkeys(at for at, _ in pairs))
    with tempfile.TemporaryDirectory(prefix="verl-corpus-") as tmp:
        scratch = Path(tmp).resolve()
        commits, trees = {}, {}
        for i, at in enumerate(refs):
            folders = sorted({p.split("/", 1)[0] for r, p in pairs if r == at})
            (scratch / f"ref{i}").mkdir()
            commits[at] = _export(args.repo, at, folders, scratch / f"ref{i}")
            trees[at] = scratch / f"ref{i}" / "tree"
        scripts = []
        for at, path in pairs:
            record = _record(trees[at], path, scratch, preset)
            scripts.append({"path": path, "branch": at, "commit": commits[at], **record})
    data = {
        "upstream": {"repository": preset.repository, "branches": commits},
        "recorded_by": preset.recorded_by,
        "scripts": scripts,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    at = ", ".join(f"{r} ({c[:12]})" for r, c in commits.items())
    print(f"{len(scripts)} script(s) of {preset.repository} {at} -> {args.out}")
    return 0


def _verl(args: argparse.Namespace) -> int:
    scripts = args.scripts or list(SCRIPTS)
    folders = sorted({s.split("/", 1)[0] for s in scripts})
    with tempfile.TemporaryDirectory(prefix="verl-corpus-") as tmp:
        scratch = Path(tmp)
        commit = _export(args.repo, args.ref, folders, scratch)
        scripts = [_record(scratch / "tree", s, scratch) for s in scripts]
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
