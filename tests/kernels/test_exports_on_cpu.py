# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The installed wheel exposes the kernel API under arctic_platform.kernels, lazily, and never as ``kernels``."""

import importlib
import inspect
import subprocess
import sys

PUBLIC = {
    "arctic_platform.kernels.densify": ["densify", "densify_reference", "densify_vectorized", "densify_triton"],
    "arctic_platform.kernels.cascade": [
        "forest_cascade_attention",
        "forest_cascade_attention_reference",
        "build_forest_metadata",
        "merge_attn_states",
        "ForestMetadata",
    ],
}


def test_public_names_and_signatures():
    for module, names in PUBLIC.items():
        mod = importlib.import_module(module)
        for name in names:
            assert callable(getattr(mod, name)), f"{module}.{name}"
    from arctic_platform.kernels.cascade import forest_cascade_attention, forest_cascade_attention_reference
    from arctic_platform.kernels.densify import densify

    params = inspect.signature(densify).parameters
    assert list(params)[:2] == ["prompts", "responses"]
    for kw in ("max_prompt_len", "max_response_len", "pad_token_id", "fields", "field_pads"):
        assert params[kw].kind is inspect.Parameter.KEYWORD_ONLY, kw
    ref = inspect.signature(forest_cascade_attention_reference).parameters
    kern = inspect.signature(forest_cascade_attention).parameters
    for kw in ("group_starts", "prefix_block_tables", "prefix_lens", "suffix_block_tables", "suffix_lens", "scale"):
        assert ref[kw].kind is inspect.Parameter.KEYWORD_ONLY and kern[kw].kind is inspect.Parameter.KEYWORD_ONLY
    import arctic_platform.kernels as pkg

    for name in pkg.__all__:  # every lazily exported name resolves
        assert getattr(pkg, name) is getattr(
            importlib.import_module(f"arctic_platform.kernels.{pkg._EXPORTS[name]}"), name
        )
    assert "densify" not in pkg.__all__  # the submodule owns that attribute name (see the package docstring)


def test_package_import_is_lazy_and_not_top_level():
    code = "\n".join(
        [
            "import sys, importlib.util",
            "import arctic_platform.kernels as k",
            "assert 'torch' not in sys.modules and 'triton' not in sys.modules, 'eager import'",
            "spec = importlib.util.find_spec('kernels')",  # Hugging Face's package may exist; ours must not
            "assert spec is None or 'arctic_platform' not in str(spec.origin)",
            "k.merge_attn_states",
            "assert 'arctic_platform.kernels.cascade' in sys.modules",
            "print('ok')",
        ]
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
