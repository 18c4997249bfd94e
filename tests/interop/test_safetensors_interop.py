"""tests/interop/test_safetensors_interop.py: fimi's safetensors, config.json
and checkpoint code against the Python `safetensors` and `transformers`
libraries, through the tests/tools/st_tool helper.

Files written by safetensors (numpy F32/F16, torch BF16) must load in fimi with
the same values; files fimi writes must load in safetensors; malformed files
must be refused by both; fimi checkpoints must load in transformers'
Gemma3ForCausalLM / Gemma2ForCausalLM and the reverse.

Run: FIMI_BUILD_DIR=build pytest tests/interop/test_safetensors_interop.py
(needs numpy + safetensors; the torch/transformers parts skip without them).
"""

import json
import math
import os
import struct
import subprocess

import pytest

np = pytest.importorskip("numpy")
safetensors = pytest.importorskip("safetensors")
from safetensors.numpy import load_file as np_load_file  # noqa: E402
from safetensors.numpy import save_file as np_save_file  # noqa: E402


def _st_tool_path():
    explicit = os.environ.get("FIMI_ST_TOOL")
    if explicit:
        return explicit
    repo_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = os.environ.get("FIMI_BUILD_DIR", os.path.join(repo_root, "build"))
    return os.path.join(build, "tests", "st_tool")


ST_TOOL = _st_tool_path()
pytestmark = pytest.mark.skipif(
    not os.access(ST_TOOL, os.X_OK), reason=f"{ST_TOOL} not built (cmake --build BUILD --target st_tool)"
)


def st(*args, check=True):
    result = subprocess.run([ST_TOOL, *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"st_tool {' '.join(map(str, args))} failed: {result.stderr}")
    return result


def dump(path):
    return json.loads(st("dump", path).stdout)


def as_float(v):
    return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(v, v) if isinstance(v, str) else v


def same_float(a, b):
    """a from fimi (9 significant digits of a float32) equals float32 b exactly."""
    a, b = np.float32(as_float(a)), np.float32(b)
    return bool((np.isnan(a) and np.isnan(b)) or (a == b and np.signbit(a) == np.signbit(b)))


def check_tensor(entry, array):
    """fimi's dump entry vs a float32 numpy array: shape, first 16 values exact, sum."""
    assert entry["shape"] == list(array.shape)
    flat = array.astype(np.float32).reshape(-1)
    shown = entry["values"]
    assert len(shown) == min(16, flat.size)
    for got, want in zip(shown, flat[:16]):
        assert same_float(got, want), (got, want)
    with np.errstate(invalid="ignore"):  # inf + -inf is the expected NaN
        want_sum = float(np.sum(flat.astype(np.float64)))
    got_sum = as_float(entry["sum"])
    if math.isfinite(want_sum):
        assert math.isclose(got_sum, want_sum, rel_tol=1e-9, abs_tol=1e-9)
    else:
        assert (math.isnan(got_sum) and math.isnan(want_sum)) or got_sum == want_sum


def bf16_round(x):
    """float32 -> bfloat16 (round to nearest even) -> float32, in numpy."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), out)


# ---------------------------------------------------------------------------
# Python writes, fimi reads


def test_numpy_f32_loads_in_fimi(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "model.embed_tokens.weight": rng.standard_normal((37, 8)).astype(np.float32),
        "model.norm.weight": rng.standard_normal(8).astype(np.float32),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "special": np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45], dtype=np.float32),
        "ids": np.arange(6, dtype=np.int64).reshape(2, 3),
    }
    path = tmp_path / "np.safetensors"
    np_save_file(tensors, str(path), metadata={"format": "np"})
    got = dump(path)
    assert set(got) == set(tensors)
    for name, array in tensors.items():
        if array.dtype == np.int64:
            assert got[name]["dtype"] == "I64" and got[name]["values"] is None
        else:
            assert got[name]["dtype"] == "F32"
            check_tensor(got[name], array)


def test_numpy_f16_loads_in_fimi(tmp_path):
    bits = np.array([0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xC000, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x3555],
                    dtype=np.uint16)
    halves = bits.view(np.float16)
    rng = np.random.default_rng(1)
    tensors = {"edge": halves, "random": rng.standard_normal((5, 7)).astype(np.float16)}
    path = tmp_path / "f16.safetensors"
    np_save_file(tensors, str(path))
    got = dump(path)
    for name, array in tensors.items():
        assert got[name]["dtype"] == "F16"
        check_tensor(got[name], array.astype(np.float32))


def test_torch_bf16_loads_in_fimi(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as torch_save_file

    gen = torch.Generator().manual_seed(2)
    tensors = {
        "w": torch.randn(9, 5, generator=gen).to(torch.bfloat16),
        "special": torch.tensor([float("nan"), float("inf"), -float("inf"), 1e-40, 3e38]).to(torch.bfloat16),
    }
    path = tmp_path / "bf16.safetensors"
    torch_save_file(tensors, str(path))
    got = dump(path)
    for name, tensor in tensors.items():
        assert got[name]["dtype"] == "BF16"
        check_tensor(got[name], tensor.float().numpy())


# ---------------------------------------------------------------------------
# fimi writes, Python reads

EXPECTED = {
    "a": (np.arange(6, dtype=np.float32) * 0.5 - 1).reshape(2, 3),
    "b.weight": np.array([1 / 3, -2.5, 1e-3, 3.14159265], dtype=np.float32),
    "c": np.array(42.0, dtype=np.float32),
    "e": np.zeros(0, dtype=np.float32),
    "nan_inf": np.array([np.nan, np.inf, -np.inf], dtype=np.float32),
}


def test_fimi_f32_loads_in_numpy(tmp_path):
    path = tmp_path / "fimi_f32.safetensors"
    st("write-test", path, "F32")
    loaded = np_load_file(str(path))
    assert set(loaded) == set(EXPECTED)
    for name, want in EXPECTED.items():
        assert loaded[name].dtype == np.float32 and loaded[name].shape == want.shape
        np.testing.assert_array_equal(loaded[name], want)
    with safetensors.safe_open(str(path), framework="numpy") as f:
        assert f.metadata() == {"format": "pt"}
    # Header length is a multiple of 8, so the data section is aligned.
    header_len = struct.unpack("<Q", path.read_bytes()[:8])[0]
    assert header_len % 8 == 0


def test_fimi_bf16_loads_in_safetensors(tmp_path):
    path = tmp_path / "fimi_bf16.safetensors"
    st("write-test", path, "BF16")
    # Framework-free check: the raw bytes the reference parser hands back.
    raw = dict(safetensors.deserialize(path.read_bytes()))
    assert set(raw) == set(EXPECTED)
    for name, want in EXPECTED.items():
        assert raw[name]["dtype"] in ("BF16", "bfloat16") and list(raw[name]["shape"]) == list(want.shape)
        bits = np.frombuffer(bytes(raw[name]["data"]), dtype=np.uint16).astype(np.uint32) << 16
        got = bits.view(np.float32).reshape(want.shape)
        np.testing.assert_array_equal(got, bf16_round(want))
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file as torch_load_file

    loaded = torch_load_file(str(path))
    for name, want in EXPECTED.items():
        assert loaded[name].dtype == torch.bfloat16
        np.testing.assert_array_equal(loaded[name].float().numpy(), bf16_round(want))


# ---------------------------------------------------------------------------
# Both refuse the same malformed files (and accept the same odd valid ones)


def framed(header, data=b"", length=None):
    text = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(text) if length is None else length) + text + data


I32_2X2 = '{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}'

MALFORMED = [
    ("HeaderTooSmall", b"\x01\x00\x00"),
    ("HeaderTooLarge", framed("{}", length=100_000_001)),
    ("InvalidHeaderLength", framed("{}", length=64)),
    ("InvalidHeader", framed(b'{"\xff":1}')),
    ("InvalidHeaderDeserialization", framed("{")),
    ("InvalidHeaderDeserialization", framed('{"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4)),
    ("InvalidHeaderDeserialization", framed('{"a":{"dtype":"F32","shape":[1]}}', b"\0" * 4)),
    ("InvalidHeaderDeserialization", framed('{"__metadata__":{"format":1}}')),
    ("InvalidOffset", framed('{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', b"\0" * 8)),
    ("InvalidOffset", framed('{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
                             '"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', b"\0" * 3)),
    ("ValidationOverflow", framed('{"t":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}}',
                                  b"\0" * 16)),
    ("ValidationOverflow", framed('{"t":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,16]}}',
                                  b"\0" * 16)),
    ("MisalignedSlice", framed('{"t":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}', b"\0" * 2)),
    ("TensorInvalidInfo", framed('{"t":{"dtype":"F32","shape":[2,2],"data_offsets":[0,12]}}', b"\0" * 12)),
    ("MetadataIncompleteBuffer", framed(I32_2X2, b"\0" * 20)),
    ("MetadataIncompleteBuffer", framed(I32_2X2, b"\0" * 14)),
]


@pytest.mark.parametrize("rule,content", MALFORMED, ids=[f"{r}-{i}" for i, (r, _) in enumerate(MALFORMED)])
def test_malformed_refused_by_both(tmp_path, rule, content):
    with pytest.raises(Exception):
        safetensors.deserialize(content)
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    result = st("dump", path, check=False)
    assert result.returncode != 0
    assert rule in result.stderr and "bad.safetensors" in result.stderr, result.stderr


ODD_BUT_VALID = [
    framed("{}      "),
    framed("\t\n{}\r "),
    framed('{"z":{"dtype":"I32","shape":[2,0],"data_offsets":[0,0]}}'),
    framed('{"s":{"dtype":"F32","shape":[],"data_offsets":[0,4],"extra":1}}', b"\0\0\x80\x3f"),
    framed('{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
           b"\1\2"),
]


@pytest.mark.parametrize("content", ODD_BUT_VALID)
def test_odd_valid_files_accepted_by_both(tmp_path, content):
    expected = dict(safetensors.deserialize(content))
    path = tmp_path / "odd.safetensors"
    path.write_bytes(content)
    got = dump(path)
    assert set(got) == set(expected)
    for name, info in expected.items():
        assert got[name]["shape"] == list(info["shape"])


# ---------------------------------------------------------------------------
# Checkpoints: fimi <-> transformers


def _transformers():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    return torch, transformers


@pytest.mark.parametrize("preset,cls", [("tiny", "Gemma3ForCausalLM"), ("tiny-gemma2", "Gemma2ForCausalLM")])
@pytest.mark.parametrize("dtype,shard", [("F32", 0), ("BF16", 0), ("F32", 150000)])
def test_fimi_checkpoint_loads_in_transformers(tmp_path, preset, cls, dtype, shard):
    torch, transformers = _transformers()
    ckpt = tmp_path / "ckpt"
    st("save-model", preset, ckpt, dtype, shard, 7)
    assert (ckpt / ("model.safetensors.index.json" if shard else "model.safetensors")).exists()
    model = getattr(transformers, cls).from_pretrained(str(ckpt), dtype=torch.float32)
    ours = json.loads(st("load-model", ckpt).stdout)
    state = model.state_dict()
    for name, entry in ours.items():
        check_tensor(entry, state[name].float().numpy())
    assert torch.equal(model.lm_head.weight, model.model.embed_tokens.weight)
    # fimi writes no tensor transformers does not expect (lm_head is tied).
    assert set(ours) == {k for k in state if k != "lm_head.weight"}
    assert model.config.sliding_window == 8 and model.config.num_hidden_layers == 4


@pytest.mark.parametrize("preset,cls", [("tiny", "Gemma3ForCausalLM"), ("tiny-gemma2", "Gemma2ForCausalLM")])
@pytest.mark.parametrize("dtype,shard", [("float32", None), ("bfloat16", None), ("float32", "150KB")])
def test_transformers_checkpoint_loads_in_fimi(tmp_path, preset, cls, dtype, shard):
    torch, transformers = _transformers()
    cfg_dir = tmp_path / "cfg"
    cfg_dir.mkdir()
    (cfg_dir / "config.json").write_text(st("config", preset).stdout)
    config = transformers.AutoConfig.from_pretrained(str(cfg_dir))
    torch.manual_seed(3)
    model = getattr(transformers, cls)(config)
    with torch.no_grad():  # norm weights start at zero; make them visible
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.randn_like(p) * 0.1)
    model = model.to(getattr(torch, dtype))
    ckpt = tmp_path / "hf"
    kwargs = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(str(ckpt), **kwargs)
    if shard:
        assert (ckpt / "model.safetensors.index.json").exists()
    ours = json.loads(st("load-model", ckpt).stdout)
    state = model.state_dict()
    assert set(ours) == {k for k in state if k != "lm_head.weight"}
    for name, entry in ours.items():
        check_tensor(entry, state[name].float().numpy())
