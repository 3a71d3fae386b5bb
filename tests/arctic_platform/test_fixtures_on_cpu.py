# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""arctic_platform.fixtures: the tiny model loads through the Auto classes the way verl 0.9.1 V1 loads it."""

import json

from arctic_platform.fixtures import make_tiny_model


def test_shape_and_special_tokens(tiny_model_dir):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(tiny_model_dir)
    assert cfg.model_type == "qwen2"
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (64, 2, 2, 1)
    assert cfg.hidden_size // cfg.num_attention_heads >= 32  # vLLM's CPU attention supports head sizes 32..
    assert (cfg.intermediate_size, cfg.vocab_size, cfg.tie_word_embeddings) == (128, 320, True)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert sum(p.numel() for p in model.parameters()) == 94_784
    assert (tiny_model_dir / "model.safetensors").is_file()


def test_autotokenizer_newline_is_one_token_and_chat_template_renders(tiny_model_dir):
    from transformers import AutoConfig, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    # verl's Qwen continuous-token builder needs both (cpu-e2e-verl-v1.md blocker B1); transformers 5 swaps in
    # Qwen2Tokenizer with its own pre-tokenizer, so this checks the class verl will actually get.
    assert len(tok.encode("\n", add_special_tokens=False)) == 1
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert im_end is not None and im_end != tok.unk_token_id
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert AutoConfig.from_pretrained(tiny_model_dir).vocab_size >= len(tok)
    msgs = [{"role": "user", "content": "Repeat the digit: 7"}]
    text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>user\nRepeat the digit: 7<|im_end|>\n<|im_start|>assistant\n"
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids) == text
    assert eos_in_config(tiny_model_dir) == im_end


def eos_in_config(d):
    return json.loads((d / "config.json").read_text())["eos_token_id"]


def test_deterministic_given_seed(tmp_path, tiny_model_dir):
    again = make_tiny_model(tmp_path / "again", seed=0)
    for name in ("model.safetensors", "tokenizer.json", "config.json", "tokenizer_config.json"):
        assert (again / name).read_bytes() == (tiny_model_dir / name).read_bytes(), name
    other = make_tiny_model(tmp_path / "other", seed=1)
    assert (other / "model.safetensors").read_bytes() != (tiny_model_dir / "model.safetensors").read_bytes()
