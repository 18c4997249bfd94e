#!/usr/bin/env python3
"""tests/fuzz/make_corpus.py: writes the seed corpora for the fuzz targets
(docs/fuzzing.md). Standard library only.

    python3 tests/fuzz/make_corpus.py OUT_DIR
creates OUT_DIR/safetensors/ (valid files of every dtype and layout quirk,
plus one file per validation rule), OUT_DIR/config/ (Hugging Face Gemma
config.json files in the 4.x, 5.x and multimodal layouts) and
OUT_DIR/tokenizer/ (small tokenizer.json files in the Gemma 2/3, fimi-trained,
Metaspace and byte-level layouts, plus rejected ones).
"""

import json
import os
import struct
import sys

DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8,
    "F8_E8M0": 8, "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}


def framed(header, data=b"", pad=True):
    text = header if isinstance(header, bytes) else header.encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def build(tensors, metadata=None):
    """tensors: list of (name, dtype, shape); data bytes follow a simple pattern."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        count = 1
        for d in shape:
            count *= d
        size = count * DTYPE_BITS[dtype] // 8
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    data = bytes((i * 37 + 11) & 0xFF for i in range(offset))
    return framed(json.dumps(header, separators=(",", ":")), data)


def safetensors_seeds():
    seeds = {
        "empty": framed("{}"),
        "f32": build([("a", "F32", [2, 2])], {"format": "pt"}),
        "bf16_model": build([("model.embed_tokens.weight", "BF16", [16, 4]), ("model.norm.weight", "BF16", [4]),
                             ("model.layers.0.self_attn.q_proj.weight", "BF16", [4, 4])], {"format": "pt"}),
        "f16_scalar_empty": build([("s", "F16", []), ("z", "F16", [3, 0]), ("v", "F16", [5])]),
        "all_dtypes": build([(f"t{i}", d, [2, 2]) for i, d in enumerate(DTYPE_BITS)]),
        "unpadded": framed('{"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0\0\x80\x3f", pad=False),
        "leading_space": framed('\n {"x":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\x07"),
        "out_of_order": framed('{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},'
                               '"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\1\2"),
        "extra_field": framed('{"x":{"dtype":"I32","shape":[1],"data_offsets":[0,4],"note":"hi"}}', b"\0" * 4),
        # one per rule
        "bad_small": b"\x01\x00",
        "bad_large": struct.pack("<Q", 100_000_001) + b"{}",
        "bad_length": struct.pack("<Q", 64) + b"{}",
        "bad_utf8": framed(b'{"\xff":1}'),
        "bad_start": framed("[]"),
        "bad_json": framed('{"a":'),
        "bad_offset": framed('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8),
        "bad_overflow": framed('{"t":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}}',
                               b"\0" * 16),
        "bad_misaligned": framed('{"t":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}', b"\0\0"),
        "bad_info": framed('{"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}', b"\0" * 12),
        "bad_incomplete": framed('{"t":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}', b"\0" * 20),
    }
    return seeds


def gemma3_text(**overrides):
    cfg = {
        "architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
        "attn_logit_softcapping": None, "bos_token_id": 2, "eos_token_id": [1, 106],
        "final_logit_softcapping": None, "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 128,
        "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        "max_position_embeddings": 2048, "model_type": "gemma3_text", "num_attention_heads": 4,
        "num_hidden_layers": 4, "num_key_value_heads": 2, "pad_token_id": 0, "query_pre_attn_scalar": 16,
        "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0, "rope_scaling": None, "rope_theta": 1000000.0,
        "sliding_window": 8, "sliding_window_pattern": 2, "tie_word_embeddings": True, "torch_dtype": "float32",
        "use_cache": True, "vocab_size": 512,
    }
    cfg.update(overrides)
    return cfg


def config_seeds():
    v5 = gemma3_text(rope_parameters={
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})
    for key in ("rope_theta", "rope_local_base_freq", "rope_scaling", "sliding_window_pattern"):
        del v5[key]
    v5["_sliding_window_pattern"] = 6
    gemma2 = {
        "architectures": ["Gemma2ForCausalLM"], "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
        "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 64,
        "head_dim": 16, "intermediate_size": 128, "model_type": "gemma2", "num_attention_heads": 4,
        "num_hidden_layers": 4, "num_key_value_heads": 2, "query_pre_attn_scalar": 16,
        "rope_theta": 10000.0, "sliding_window": 8, "vocab_size": 512, "cache_implementation": "hybrid",
    }
    wrapper = {
        "architectures": ["Gemma3ForConditionalGeneration"], "boi_token_index": 255999, "eos_token_id": [1, 106],
        "model_type": "gemma3", "mm_tokens_per_image": 256,
        "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text",
                        "num_hidden_layers": 34, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                        "sliding_window": 1024},
        "vision_config": {"model_type": "siglip_vision_model"},
    }
    no_layer_types = gemma3_text(rope_scaling={"rope_type": "linear", "factor": 4.0})
    del no_layer_types["layer_types"]
    return {
        "gemma3_text": json.dumps(gemma3_text(), indent=2),
        "gemma3_text_v5": json.dumps(v5, indent=2),
        "gemma3_pattern": json.dumps(no_layer_types),
        "gemma2": json.dumps(gemma2, indent=2),
        "gemma3_wrapper": json.dumps(wrapper),
        "minimal": '{"model_type":"gemma3_text","num_hidden_layers":2}',
        "bad_unknown": '{"model_type":"gemma3_text","num_experts":8}',
    }


def tokenizer_bpe(vocab_words, merges, **model):
    """A small BPE tokenizer.json: the chars of vocab_words, the merged tokens, byte tokens."""
    vocab = {}
    for t in ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<tool_call>", "</tool_call>"]:
        vocab[t] = len(vocab)
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for w in vocab_words:
        for ch in w:
            vocab.setdefault(ch, len(vocab))
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    spec = {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
            "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}
    spec.update(model)
    return spec


def tokenizer_added(vocab):
    return [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for t in ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<tool_call>",
                      "</tool_call>"]]


def tokenizer_seeds():
    sp = "\u2581"
    merges = [("h", "e"), ("he", "l"), ("hel", "l"), ("hell", "o"), (sp, "w"), (sp + "w", "o"), ("r", "l"),
              ("rl", "d"), ("1", "2"), ("\u0928", "\u092e")]
    model = tokenizer_bpe(["hello", sp + "world", "12", "\u0928\u092e\u0938\u094d\u0924\u0947"], merges)
    bos = model["vocab"]["<bos>"]
    template = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "<bos>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [], "special_tokens": {"<bos>": {"id": "<bos>", "ids": [bos], "tokens": ["<bos>"]}}}
    gemma_decoder = {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": sp}, "content": " "},
                                                      {"type": "ByteFallback"}, {"type": "Fuse"}]}
    gemma = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": tokenizer_added(model["vocab"]),
             "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": sp},
             "pre_tokenizer": None, "post_processor": template, "decoder": gemma_decoder, "model": model}
    trained = json.loads(json.dumps(gemma))
    trained["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"String": sp}, "behavior": "MergedWithNext", "invert": False},
        {"type": "Digits", "individual_digits": True}]}
    gemma3 = json.loads(json.dumps(gemma))
    gemma3["pre_tokenizer"] = {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithPrevious",
                               "invert": False}
    gemma3["model"]["merges"] = [list(m) for m in merges]
    gemma3["added_tokens"].append({"id": 400, "content": "INR", "single_word": True, "lstrip": True, "rstrip": True,
                                   "normalized": True, "special": False})
    meta = json.loads(json.dumps(gemma))
    meta["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": sp},
                                                              {"type": "Replace", "pattern": {"Regex": "\\s"},
                                                               "content": sp}]}
    meta["pre_tokenizer"] = {"type": "Metaspace", "replacement": sp, "prepend_scheme": "first", "split": True}
    meta["decoder"] = {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {
        "type": "Metaspace", "replacement": sp, "prepend_scheme": "first", "split": True},
        {"type": "Strip", "content": " ", "start": 1, "stop": 1}]}
    g = "\u0120"
    bl_model = tokenizer_bpe(["hello", g + "world"], [("h", "e"), ("l", "l"), (g, "w"), (g + "w", "o")],
                             byte_fallback=False, fuse_unk=False, unk_token=None)
    bytelevel = {"version": "1.0", "added_tokens": tokenizer_added(bl_model["vocab"]), "normalizer": None,
                 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                                   "use_regex": True},
                 "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False},
                 "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True}, "model": bl_model}
    split = json.loads(json.dumps(bytelevel))
    split["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}| ?\\p{L}+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "Whitespace"}, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    bad_type = json.loads(json.dumps(gemma))
    bad_type["model"]["type"] = "Unigram"
    bad_norm = json.loads(json.dumps(gemma))
    bad_norm["normalizer"] = {"type": "NFKC"}
    bad_merge = json.loads(json.dumps(gemma))
    bad_merge["model"]["merges"].append("x y")
    bad_regex = json.loads(json.dumps(split))
    bad_regex["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"
    out = {"gemma2": gemma, "gemma3": gemma3, "trained": trained, "metaspace": meta, "bytelevel": bytelevel,
           "bytelevel_split": split, "bad_model_type": bad_type, "bad_normalizer": bad_norm,
           "bad_merge": bad_merge, "bad_regex": bad_regex}
    return {k: json.dumps(v, ensure_ascii=False, indent=1 if k == "gemma2" else None) for k, v in out.items()}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    for sub, seeds in (("safetensors", safetensors_seeds()), ("config", config_seeds()),
                       ("tokenizer", tokenizer_seeds())):
        os.makedirs(os.path.join(out, sub), exist_ok=True)
        for name, content in seeds.items():
            mode = "wb" if isinstance(content, bytes) else "w"
            with open(os.path.join(out, sub, name), mode) as f:
                f.write(content)
    print(f"wrote seeds to {out}/safetensors, {out}/config and {out}/tokenizer")


if __name__ == "__main__":
    main()
