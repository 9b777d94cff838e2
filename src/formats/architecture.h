// Architectures as data: which GGUF architectures rapide runs, and the block description
// (model_config.h) each one implies, read from llama.cpp's metadata keys where the file has
// them and from llama.cpp's defaults where it does not.
//
//   llama     SwiGLU, NORM rope; with llama.expert_count > 0 a Mixtral-style MoE FFN
//   qwen2     llama plus Q/K/V biases, NEOX rope
//   qwen2moe  qwen2 attention; routed experts without renormalised weights plus a
//             sigmoid-gated shared expert
//   phi3      fused attn_qkv (or separate Q/K/V) and fused gate/up in ffn_up; Q scaled before
//             the dot products; sliding window on every layer
//   gemma2    embeddings times sqrt(dim), GeGLU (tanh GELU), post-attention and post-FFN
//             norms, attention and final logit soft-caps, window on even layers, tied head.
//             Its norm weights are used as stored: llama.cpp's converter already added
//             Gemma's "+1" (and load_hf adds it to a Hugging Face folder's).
//   gemma     Gemma 1: embeddings times sqrt(dim), GeGLU, Q scaled by 1/sqrt(key_length),
//             tied head
//   gemma3    gemma2's sandwich norms and GeGLU without soft-caps, per-head q/k RMSNorm,
//             5 local layers (window, rope base 1e4, unscaled) to 1 global (the file's base
//             and scaling)
//   olmo2     no pre-norms: post-attention and post-FFN RMSNorm, q/k RMSNorm over all heads
//   granite   llama with embedding, residual, attention and (dividing) logit multipliers
//   cohere2   Command R7B: LayerNorm, attention and FFN in parallel on one norm, 3 windowed
//             rope layers to 1 global layer without rope, logit scale, tied head
//   qwen3     qwen2 without biases, with per-head q/k RMSNorm; qwen3moe adds routed experts
//             (renormalised weights)
//   deepseek2 multi-head latent attention (model/mla_attention.h); after
//             leading_dense_block_count dense layers, routed experts (softmax or sigmoid
//             scores, optional selection bias, renormalised and scaled weights) plus
//             ungated shared experts
#pragma once

#include <string_view>

#include "formats/gguf_reader.h"
#include "formats/model_config.h"

namespace rapide {

// True for the architectures Model::forward computes correctly.
bool is_supported_architecture(std::string_view architecture);

// The comma-separated list, for error messages.
const char* supported_architectures();

// The parts of the block description that follow from the architecture alone (activation,
// norms, scaling, fusion of gate/up, which layers are windowed), for every loader. Files
// give the rest (soft-caps, window size, experts).
void apply_architecture_facts(ModelConfig& c);

// Fills the block description of `c` (already holding the common hyper-parameters) from the
// architecture's `{arch}.*` keys. Leaves unknown architectures as plain llama blocks: they
// are refused when their tensors are checked (model_checks.h), so a vocabulary-only file of
// any architecture still loads.
void describe_architecture(const GgufFile& gguf, ModelConfig& c);

}  // namespace rapide
