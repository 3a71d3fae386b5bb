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
``collective_rpc``. Weight sync is vLLM's layerwise reload, the sequence vLLM's own weight-transfer engines run
(``initialize_layerwise_reload`` -> ``model.load_weights`` per chunk -> ``finalize_layerwise_reload``): the
checkpoint-format tensors (the HF parameter names the training engine has) arrive in buckets, each a safetensors file
(under ``/dev/shm``, never pickled) loaded by :meth:`ArcticWorkerExtension.arctic_load_bucket` between
:meth:`~ArcticWorkerExtension.arctic_begin_weights` and :meth:`~ArcticWorkerExtension.arctic_finish_weights`; the
finish redoes vLLM's post-load processing (the CPU backend repacks linear weights into its kernel layout) once. A
tensor-parallel worker receives full tensors and keeps its shard (vLLM's weight loaders slice them).
:meth:`ArcticWorkerExtension.arctic_weight_norm` reads the weights back from the live model, including the copies
the CPU backend packed into its GEMM kernels (read back by running the kernel on an identity matrix), and
:meth:`ArcticWorkerExtension.arctic_engine_config` reports the engine configuration the worker was built with.
Imported in vLLM's worker process only.
"""

from __future__ import annotations

__all__ = ["ArcticWorkerExtension"]


class ArcticWorkerExtension:
    """Methods vLLM adds to its worker; ``self`` is the vLLM worker (``self.model_runner`` is its model runner)."""

    def arctic_begin_weights(self) -> None:
        """Start a weight update: vLLM defers each layer's processing until all of its weights have arrived."""
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model_runner.get_model())

    def arctic_load_bucket(self, path: str) -> int:
        """Load one bucket (the safetensors file ``path``, HF parameter names) into the model being updated; returns
        its tensor count."""
        from safetensors.torch import load_file

        state = load_file(path, device="cpu")
        self.model_runner.get_model().load_weights(iter(state.items()))
        return len(state)

    def arctic_finish_weights(self) -> None:
        """Finish the update: vLLM's post-load processing, then the CPU logits GEMM of a tied embedding."""
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        model = self.model_runner.get_model()
        finalize_layerwise_reload(model, self.model_runner.model_config)
        _refresh_cpu_embedding_gemms(model)

    def arctic_weight_norm(self) -> tuple[float, int]:
        """Sum of squares (float64) and element count of the weights the live model computes with.

        Each parameter counts once (a tied ``lm_head`` shares the embedding's), without vocabulary padding. A linear
        layer whose weight the CPU backend moved into a packed GEMM (its ``weight`` left empty) is read back from
        that GEMM; an embedding that also has a packed GEMM (the logits of a tied ``lm_head``) must hold exactly its
        weight there.

        Raises:
            RuntimeError: a packed GEMM copy differs from the weight it was packed from (naming the module).
        """
        import torch

        total = torch.zeros((), dtype=torch.float64)
        count = 0
        seen: set[int] = set()
        with torch.no_grad():
            for name, module in self.model_runner.get_model().named_modules():
                w = getattr(module, "weight", None)
                packed = callable(getattr(module, "cpu_linear", None)) and isinstance(w, torch.Tensor)
                if packed and w.numel() > 0 and not w.is_meta:  # an embedding with a logits GEMM
                    live = _gemm_read_back(module, w)
                    if not torch.equal(live, _unpadded(module, w)):
                        raise RuntimeError(f"vLLM's packed GEMM copy of {name}.weight differs from the weight")
                for pname, p in module.named_parameters(recurse=False):
                    if id(p) in seen:
                        continue
                    seen.add(id(p))
                    if pname == "weight" and packed and p.numel() == 0:
                        t = _gemm_read_back(module, p)  # the CPU backend removed the weight after packing it
                    elif pname == "weight":
                        t = _unpadded(module, p)
                    else:
                        t = p
                    total += t.detach().to("cpu", torch.float64).square().sum()
                    count += t.numel()
        return float(total), count

    def arctic_engine_config(self) -> dict:
        """The engine configuration this worker was built with (vLLM's ``VllmConfig``): the keys a job's
        ``vllm_config`` most often sets, as plain values."""
        import os

        cfg = self.vllm_config
        cc = cfg.compilation_config
        return {
            "tensor_parallel_size": int(cfg.parallel_config.tensor_parallel_size),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),  # the GPUs this worker's process sees
            "max_num_seqs": int(cfg.scheduler_config.max_num_seqs),
            "max_num_batched_tokens": int(cfg.scheduler_config.max_num_batched_tokens),
            "max_model_len": int(cfg.model_config.max_model_len),
            "enable_chunked_prefill": bool(cfg.scheduler_config.enable_chunked_prefill),
            "enable_prefix_caching": bool(cfg.cache_config.enable_prefix_caching),
            "block_size": int(cfg.cache_config.block_size),
            "enforce_eager": bool(cfg.model_config.enforce_eager),
            "seed": cfg.model_config.seed,
            "compilation_config": {
                "mode": str(getattr(cc.mode, "name", cc.mode)),
                "cudagraph_mode": str(getattr(cc.cudagraph_mode, "name", cc.cudagraph_mode)),
                "custom_ops": list(cc.custom_ops),
                "splitting_ops": list(cc.splitting_ops or []),
            },
        }


def _unpadded(module, weight):
    """``weight`` without the zero rows vLLM pads a vocabulary to (embeddings, ``lm_head``); others unchanged."""
    shard = getattr(module, "shard_indices", None)
    if shard is None or weight.ndim != 2:
        return weight
    return weight[: shard.num_org_elements]


def _gemm_read_back(module, weight, rows: int = 256):
    """The ``(N, K)`` weight a CPU GEMM (``module.cpu_linear``) multiplies with, read back by running it on the
    identity, ``rows`` rows at a time (I @ W^T = W^T; each output element is one product with 1.0 plus zeros, so the
    read-back is exact in any dtype). Vocabulary padding (embeddings, ``lm_head``) is cut off."""
    import torch

    k = int(module.input_size_per_partition)
    parts = []
    for start in range(0, k, rows):
        eye = torch.zeros(min(rows, k - start), k, dtype=weight.dtype)
        eye[:, start : start + eye.shape[0]] = torch.eye(eye.shape[0], dtype=weight.dtype)
        parts.append(module.cpu_linear(eye, weight, None))
    w = torch.cat(parts).t()
    return _unpadded(module, w)


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
