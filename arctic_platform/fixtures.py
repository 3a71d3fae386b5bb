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
"""A tiny random-init causal LM + tokenizer in Hugging Face format, made locally (``arctic-verl tiny-model DIR``).

The model is a ``Qwen2`` (``model_type`` qwen2): hidden 64, 2 layers, 2 heads / 1 KV head (head_dim 32: vLLM's
CPU attention kernel supports head sizes from 32 up), intermediate 128, vocabulary 320, tied embeddings, 94,784
parameters, saved as safetensors. The tokenizer is a **byte-level BPE**
trained with the ``tokenizers`` library on text generated here (256-byte alphabet + merges up to 300 entries,
``<|endoftext|>`` = pad, ``<|im_start|>``, ``<|im_end|>`` = eos) with a ChatML ``chat_template``.

Why byte-level: verl 0.9.1's V1 agent loop picks its continuous-token builder from ``model_type``; the Qwen builder
needs ``encode("\\n")`` to be one token and needs ``<|im_end|>``. transformers 5's ``AutoTokenizer`` picks
``Qwen2Tokenizer`` from the model type and replaces the saved pre-tokenizer with Qwen's regex + ByteLevel, so only a
byte-level vocabulary keeps ``"\\n"`` as the single token ``Ċ``. The saved pre-tokenizer is that same regex +
ByteLevel, so the fast tokenizer and ``Qwen2Tokenizer`` agree.

Everything is deterministic given ``seed``: two calls with the same arguments write byte-identical weights and
tokenizer files. No network access.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

__all__ = ["make_tiny_model", "SPECIAL_TOKENS", "CHAT_TEMPLATE"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Qwen2's pre-tokenizer split pattern (what transformers 5's Qwen2Tokenizer installs anyway).
_QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_WORDS = (
    "repeat the digit answer is number count add one two three four five six seven eight nine zero what please "
    "think step by user assistant system hello world model token reward policy gradient sample output final"
).split()


def _corpus(seed: int, n_lines: int = 400) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        d = rng.randrange(10)
        kind = rng.randrange(4)
        if kind == 0:
            lines.append(f"<|im_start|>user\nRepeat the digit: {d}<|im_end|>\n<|im_start|>assistant\n{d}<|im_end|>\n")
        elif kind == 1:
            lines.append(" ".join(rng.choice(_WORDS) for _ in range(rng.randrange(3, 12))) + ".\n")
        elif kind == 2:
            a, b = rng.randrange(100), rng.randrange(100)
            lines.append(f"What is {a} + {b}? The answer is {a + b}.\n")
        else:
            lines.append(f"{d}" * rng.randrange(1, 6) + "\n")
    return lines


def _train_tokenizer(seed: int, vocab_size: int):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_QWEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    return tok


def make_tiny_model(
    out_dir: str | Path,
    *,
    seed: int = 0,
    tokenizer_size: int = 300,
    vocab_size: int = 320,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 2,
    num_kv_heads: int = 1,
    intermediate_size: int = 128,
    max_position_embeddings: int = 2048,
) -> Path:
    """Write a tiny random-init Qwen2 causal LM and its byte-level BPE tokenizer to ``out_dir``.

    Args:
        out_dir: target folder (created; existing files with the same names are overwritten).
        seed: seeds the weight init and the tokenizer corpus.
        tokenizer_size: tokenizer entries (256 bytes + merges + 3 specials).
        vocab_size: model vocabulary; must be >= the tokenizer length.
        hidden_size, num_layers, num_heads, num_kv_heads, intermediate_size, max_position_embeddings: model shape.

    Returns:
        ``out_dir`` as a Path.

    Raises:
        ValueError: ``vocab_size`` smaller than the tokenizer.
    """
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, PreTrainedTokenizerFast, Qwen2Config

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = _train_tokenizer(seed, tokenizer_size)
    if tok.get_vocab_size() > vocab_size:
        raise ValueError(f"vocab_size {vocab_size} < tokenizer length {tok.get_vocab_size()}")
    pad_id, im_start_id, eos_id = (tok.token_to_id(t) for t in SPECIAL_TOKENS)
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        model_max_length=max_position_embeddings,
        clean_up_tokenization_spaces=False,
    )
    hf_tok.chat_template = CHAT_TEMPLATE
    hf_tok.save_pretrained(out)

    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    # fork_rng: seeding must not disturb the caller's global RNG.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id, bos_token_id=None)
    model.save_pretrained(out)
    info = {
        "seed": seed,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "tokenizer_size": tok.get_vocab_size(),
        "pad_token_id": pad_id,
        "im_start_token_id": im_start_id,
        "eos_token_id": eos_id,
    }
    (out / "arctic_tiny_model.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return out


# ------------------------------------------------------------------------------------------------
# arctic-verl tiny-model
# ------------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("out_dir", help="folder to write the model and tokenizer into")
    parser.add_argument("--seed", type=int, default=0, help="weight init and tokenizer corpus seed (default 0)")


def run(args) -> int:
    out = make_tiny_model(args.out_dir, seed=args.seed)
    info = json.loads((out / "arctic_tiny_model.json").read_text())
    print(f"tiny model written to {out} ({info['num_parameters']} parameters, tokenizer {info['tokenizer_size']})")
    return 0
