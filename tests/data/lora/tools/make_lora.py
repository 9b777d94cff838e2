#!/usr/bin/env python3
"""Writes random LoRA adapters for shared/reference/llamacpp/models/llama-q-F32.gguf:
   * <name>.gguf with llama.cpp's gguf-py (what convert_lora_to_gguf.py writes:
     general.type=adapter, general.architecture=llama, adapter.type=lora,
     adapter.lora.alpha, blk.N.<target>.weight.lora_a / .lora_b, F32);
   * peft-<name>/ by hand from the PEFT spec (adapter_config.json +
     adapter_model.safetensors), holding the same adapter. Hugging Face orders the
     rows of Llama's q_proj/k_proj for rotate-half RoPE; GGUF permutes them
     (convert_hf_to_gguf.py LlamaModel.permute, applied by convert_lora_to_gguf.py to
     lora_B), so the PEFT lora_B of q/k holds the inverse permutation of the GGUF rows.
Usage: PYTHONPATH=<llama.cpp>/gguf-py:pystub python3 make_lora.py BASE.gguf OUT_DIR"""
import json
import struct
import sys
from pathlib import Path

import numpy as np
import gguf

base_path, out_dir = sys.argv[1], Path(sys.argv[2])
out_dir.mkdir(parents=True, exist_ok=True)

reader = gguf.GGUFReader(base_path)
shapes = {t.name: [int(x) for x in t.shape] for t in reader.tensors}  # ggml ne order
def kv(key):
    f = reader.fields[key]
    return f.parts[f.data[0]][0]
n_head = int(kv("llama.attention.head_count"))
n_head_kv = int(kv("llama.attention.head_count_kv"))
n_layer = int(kv("llama.block_count"))

HF = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
      "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
      "ffn_down": "mlp.down_proj"}

ADAPTERS = [
    # name, seed, rank, alpha, targets, B std (times 1/sqrt(rank))
    ("lora-a", 5201, 8, 16.0, ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up",
                                "ffn_down"], 0.25),
    ("lora-b", 5202, 4, 4.0, ["attn_q", "attn_v", "ffn_down"], 0.35),
]

def permute(w, heads):  # convert_hf_to_gguf.py LlamaModel.permute: HF rows -> GGUF rows
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

def unpermute(w, heads):  # its inverse: GGUF rows -> HF rows
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

def write_safetensors(path, tensors):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, arr in tensors:
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)

for name, seed, rank, alpha, targets, b_gain in ADAPTERS:
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(out_dir / f"{name}.gguf"), "llama")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_name(f"conformance llama LoRA {name}")
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, alpha)
    peft = []
    for il in range(n_layer):
        for t in targets:
            n_in, n_out = shapes[f"blk.{il}.{t}.weight"]
            # A: N(0, 1/in) so A x has unit-scale entries for unit-scale x; B: N(0, (gain/sqrt(r))^2)
            a = rng.normal(0.0, 1.0 / np.sqrt(n_in), size=(rank, n_in)).astype(np.float32)
            b = rng.normal(0.0, b_gain / np.sqrt(rank), size=(n_out, rank)).astype(np.float32)
            writer.add_tensor(f"blk.{il}.{t}.weight.lora_a", a)  # ne [in, rank]
            writer.add_tensor(f"blk.{il}.{t}.weight.lora_b", b)  # ne [rank, out]
            b_hf = b
            if t in ("attn_q", "attn_k"):
                heads = n_head if t == "attn_q" else n_head_kv
                b_hf = unpermute(b, heads)
                assert np.array_equal(permute(b_hf, heads), b)
            prefix = f"base_model.model.model.layers.{il}.{HF[t]}"
            peft.append((prefix + ".lora_A.weight", a))     # [r, in_features]
            peft.append((prefix + ".lora_B.weight", b_hf))  # [out_features, r]
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()

    folder = out_dir / f"peft-{name}"
    folder.mkdir(exist_ok=True)
    config = {
        "base_model_name_or_path": "conformance-llama-q-F32",
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "inference_mode": True,
        "r": rank, "lora_alpha": int(alpha) if float(alpha).is_integer() else alpha, "lora_dropout": 0.0, "bias": "none",
        "target_modules": sorted(HF[t].split(".")[1] for t in targets),
        "use_rslora": False, "use_dora": False, "fan_in_fan_out": False,
        "modules_to_save": None, "rank_pattern": {}, "alpha_pattern": {},
        "layers_to_transform": None, "layers_pattern": None, "init_lora_weights": True,
        "revision": None,
    }
    (folder / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(folder / "adapter_model.safetensors", peft)
    print(f"{name}: rank {rank}, alpha {alpha}, {len(targets)} targets x {n_layer} layers")
