# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The verl defaults the package restates as literals (``tools/count_verl_defaults.py``) never grow: each is a place
a verl release can silently diverge, so a change may remove one, never add one."""

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("count_verl_defaults", REPO / "tools" / "count_verl_defaults.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_restated_verl_defaults_stay_at_or_below_the_ceiling(tmp_path):
    tool = _tool()
    package, plugin = tool.scan(REPO), tool.scan(REPO, plugin_only=True)
    assert len(package) > 50 and len(plugin) > 10  # the walk saw the package (an empty one would pass)
    listed = {str(rel): [h[2] for h in hits] for rel, hits in package.items() if hits}
    assert tool.total(package) <= tool.CEILING["package"], listed
    assert tool.total(plugin) <= tool.CEILING["plugin"], listed
    # the counter still finds what it counts: a config read with a literal fallback, and an `or` fallback
    probe = tmp_path / "probe.py"
    probe.write_text('n = cfg.rollout.get("n", 1)\nk = cfg.get("top_k") or 50\nv = reply.get("version", 0)\n')
    assert [h[0] for h in tool.count(probe)] == [1, 2]  # a reply read is not a config read
