"""tests/interop/test_gemma4_chat.py: fimi's Gemma 4 chat format (data/chat.c,
data/toolcall.c, through `fimi data tokenize --kind sft`) against the Hugging
Face `tokenizers` library.

The tokenizer is a Gemma 4-layout stand-in built here with `tokenizers`: a
byte-fallback BPE whose added special tokens are Gemma 4's (<|turn>,
<turn|>, <|tool>, <tool|>, <|tool_call>, <tool_call|>, <|tool_response>,
<tool_response|>, <|"|>) and which has no <start_of_turn>. Its merges join
letters only, so no merge crosses the boundary between a turn header and its
content and the whole text encodes to the same ids as fimi's segments.
For a conversation with tools, one call and its result, fimi's ids must
equal `tokenizers`' encoding of the Gemma 4 text written out here by hand,
and the loss mask must be 1 exactly on the model turns' text and <turn|>.
Run: FIMI_BIN=build/cmd/fimi .venv/bin/pytest tests/interop/test_gemma4_chat.py
"""

import json
import os
import subprocess

import pytest

h5py = pytest.importorskip("h5py")
tokenizers = pytest.importorskip("tokenizers")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fimi_bin():
    explicit = os.environ.get("FIMI_BIN")
    if explicit:
        return explicit
    build = os.environ.get("FIMI_BUILD_DIR", os.path.join(REPO, "build"))
    return os.path.join(build, "cmd", "fimi")


FIMI = _fimi_bin()
pytestmark = pytest.mark.skipif(not os.access(FIMI, os.X_OK), reason=f"{FIMI} not built")

SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<|turn>", "<turn|>", "<|tool>", "<tool|>", "<|tool_call>",
            "<tool_call|>", "<|tool_response>", "<tool_response|>", '<|"|>']
CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789{}[]:,.?!_-\n▁"
MERGES = [("w", "e"), ("we", "a"), ("t", "h"), ("th", "e"), ("c", "a"), ("ca", "l"), ("cal", "l"), ("m", "o"),
          ("mo", "d"), ("mod", "e"), ("mode", "l"), ("u", "s"), ("us", "e"), ("use", "r"), ("t", "o"), ("to", "o"),
          ("too", "l"), ("P", "a"), ("Pa", "r"), ("i", "s")]

Q = '<|"|>'
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris for 2 days?"},
    {"role": "assistant", "content": "Checking.", "tool_calls": [{"type": "function", "function": {
        "name": "get_weather", "arguments": {"city": "Paris", "days": 2, "units": ["C", True, None]}}}]},
    {"role": "tool", "content": json.dumps({"temp": 15, "sky": "clear"})},
    {"role": "assistant", "content": "15 C and clear."},
]
# The same conversation in Gemma 4's layout, written out by hand.
EXPECTED = (
    "<bos><|turn>system\nBe brief."
    "<|tool>declaration:get_weather{description:" + Q + "Weather for a city." + Q
    + ",parameters:{type:" + Q + "object" + Q + ",properties:{city:{type:" + Q + "string" + Q + "},days:{type:"
    + Q + "integer" + Q + "}}}}<tool|><turn|>\n"
    "<|turn>user\nWeather in Paris for 2 days?<turn|>\n"
    "<|turn>model\nChecking.\n<|tool_call>call:get_weather{city:" + Q + "Paris" + Q
    + ",days:2,units:[" + Q + "C" + Q + ",true,null]}<tool_call|><turn|>\n"
    "<|turn>tool\n<|tool_response>response:get_weather{temp:15,sky:" + Q + "clear" + Q
    + "}<tool_response|><turn|>\n"
    "<|turn>model\n15 C and clear.<turn|>\n"
)
LEARNED = ("Checking.\n<|tool_call>call:get_weather{city:" + Q + "Paris" + Q + ",days:2,units:[" + Q + "C" + Q
           + ",true,null]}<tool_call|><turn|>15 C and clear.<turn|>")


def gemma4_tokenizer_json():
    vocab = {}
    for s in SPECIALS:
        vocab[s] = len(vocab)
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for c in CHARS:
        vocab.setdefault(c, len(vocab))
    for a, b in MERGES:
        vocab.setdefault(a + b, len(vocab))
    added = [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for s in SPECIALS]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        "pre_tokenizer": None, "post_processor": None,
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [[a, b] for a, b in MERGES]},
    }


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("g4")
    (d / "tok.json").write_text(json.dumps(gemma4_tokenizer_json(), ensure_ascii=False), encoding="utf-8")
    return d


def test_sft_ids_equal_tokenizers_encoding_of_gemma4_text(work):
    src = work / "chat.jsonl"
    src.write_text(json.dumps({"messages": MESSAGES, "tools": TOOLS}, ensure_ascii=False) + "\n", encoding="utf-8")
    out = work / "chat.h5"
    res = subprocess.run([FIMI, "data", "tokenize", "--input", str(src), "--tokenizer", str(work / "tok.json"),
                          "--out", str(out), "--kind", "sft"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    with h5py.File(out, "r") as f:
        off = f["seq"]["offsets"][:]
        ids = f["seq"]["tokens"][off[0]:off[1]].tolist()
        mask = f["seq"]["loss_mask"][off[0]:off[1]].tolist()
    tok = tokenizers.Tokenizer.from_file(str(work / "tok.json"))
    want = tok.encode(EXPECTED, add_special_tokens=False).ids
    assert tok.decode(ids, skip_special_tokens=False) == EXPECTED
    assert ids == want
    assert ids.count(tok.token_to_id("<|turn>")) == 5
    learned = tok.decode([i for i, m in zip(ids, mask) if m], skip_special_tokens=False)
    assert learned == LEARNED


def test_gemma3_markers_are_not_required(work):
    """The stand-in has no <start_of_turn>; a tokenizer with neither format's markers is refused by name."""
    spec = gemma4_tokenizer_json()
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in ("<|turn>", "<turn|>")]
    for s in ("<|turn>", "<turn|>"):
        spec["model"]["vocab"][s.replace("|", "_")] = spec["model"]["vocab"].pop(s)
    path = work / "no_turns.json"
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    src = work / "plain.jsonl"
    src.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n", encoding="utf-8")
    res = subprocess.run([FIMI, "data", "tokenize", "--input", str(src), "--tokenizer", str(path),
                          "--out", str(work / "plain.h5"), "--kind", "sft"], capture_output=True, text=True)
    assert res.returncode != 0
    assert "<start_of_turn>" in res.stderr and "<|turn>" in res.stderr
