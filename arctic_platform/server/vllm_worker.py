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
"""The vLLM worker extension of the sampling job's vLLM engine (:mod:`.vllm_engine`).

vLLM mixes this class into its worker (engine argument ``worker_extension_cls``); the engine calls its methods with
``collective_rpc``. Weight sync goes through vLLM's public reload path, ``model_runner.reload_weights`` with
checkpoint-format tensors (the HF parameter names the training engine has), which also redoes vLLM's
post-load processing (the CPU backend repacks linear weights into its kernel layout). The tensors arrive as a
safetensors file (under ``/dev/shm``), never pickled. Imported in vLLM's worker process only.
"""

from __future__ import annotations

__all__ = ["ArcticWorkerExtension"]


class ArcticWorkerExtension:
    """Methods vLLM adds to its worker; ``self`` is the vLLM worker (``self.model_runner`` is its model runner)."""

    def arctic_load_weights(self, path: str) -> int:
        """Load the safetensors file ``path`` (HF parameter names) into the live model; returns the tensor count."""
        from safetensors.torch import load_file

        state = load_file(path, device="cpu")
        self.model_runner.reload_weights(weights_iterator=iter(state.items()), is_checkpoint_format=True)
        _refresh_cpu_embedding_gemms(self.model_runner.get_model())
        return len(state)


def _refresh_cpu_embedding_gemms(model) -> None:
    """Rebuild the CPU GEMM of embedding layers used as an output projection (tied ``lm_head``).

    On CPU, vLLM's ``UnquantizedEmbeddingMethod.process_weights_after_loading`` packs the embedding weight for the
    logits GEMM; vLLM 0.31's layerwise reload updates the embedding rows but keeps the packed copy, so a tied
    ``lm_head`` would still compute logits with the old weights (measured: logprobs off after a sync that changed
    only the embedding). Calling the same method again rebuilds the packed copy from the live weight; it keeps the
    weight itself (``remove_weight=False``), so the call is idempotent. Nothing happens on other platforms.
    """
    from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod
    from vllm.platforms import current_platform

    if not current_platform.is_cpu():
        return
    for module in model.modules():
        method = getattr(module, "quant_method", None)
        if isinstance(method, UnquantizedEmbeddingMethod) and getattr(module, "weight", None) is not None:
            method.process_weights_after_loading(module)
