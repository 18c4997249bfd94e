"""tests/interop/test_checkpoint_world.py: training checkpoints written across
2 MPI ranks (ZeRO-3) with the weights sharded (train.max_shard_mb), read by
the Python `safetensors` package the way `transformers` reads a sharded
checkpoint: model.safetensors.index.json's weight_map names, for every
tensor, the shard holding it, and metadata.total_size is the tensors' bytes.

- the tiny SFT run (configs/tiny-cpu-sft.ini, 6 steps) under
  `mpirun -np 2` once with train.max_shard_mb = 0.2 and once unsharded: the
  tensors of the sharded checkpoint equal the single file's bit for bit,
  no tensor is in two shards, each shard is under the limit;
- each rank's optimizer shard is there (optimizer-rank0000R-of-00002.h5);
- with `transformers` installed, Gemma3ForCausalLM.from_pretrained loads the
  sharded checkpoint and its tensors equal the file's.

Run: FIMI_BIN=build/cmd/fimi .venv/bin/pytest tests/interop/test_checkpoint_world.py
"""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

safetensors_numpy = pytest.importorskip("safetensors.numpy")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIMI = os.environ.get("FIMI_BIN") or os.path.join(os.environ.get("FIMI_BUILD_DIR", os.path.join(REPO, "build")),
                                                  "cmd", "fimi")
MPIRUN = shutil.which("mpirun")
pytestmark = [pytest.mark.skipif(not os.access(FIMI, os.X_OK), reason=f"{FIMI} not built"),
              pytest.mark.skipif(MPIRUN is None, reason="no mpirun")]
SHARD_MB = 0.2
ENV = dict(os.environ, OMP_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def fimi(*args, mpi=0):
    cmd = ([MPIRUN, "--oversubscribe", "-np", str(mpi)] if mpi else []) + [FIMI, *map(str, args)]
    result = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, f"{' '.join(cmd)}: {result.stderr}"
    return result


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt_world")
    config = os.path.join(REPO, "configs", "tiny-cpu-sft.ini")
    fimi("tokenizer", "train", "--input", os.path.join(REPO, "tests", "interop", "tokenizer_corpus.txt"),
         "--vocab-size", 600, "--out", d / "tokenizer.json")
    fimi("data", "tokenize", "--kind", "sft", "--input", os.path.join(REPO, "configs", "data", "tiny-sft-train.jsonl"),
         "--tokenizer", d / "tokenizer.json", "--out", d / "train.h5")
    fimi("init", "--config", config, "--tokenizer", d / "tokenizer.json", "--out", d / "init")
    train = ["train", "--config", config, "--set", f"train.init={d / 'init'}", "--set", f"data.train={d / 'train.h5'}",
             "--set", "data.eval=", "--set", "train.progress=false", "--set", "train.steps=6"]
    fimi(*train, "--set", f"train.out_dir={d / 'sharded'}", "--set", f"train.max_shard_mb={SHARD_MB}", mpi=2)
    fimi(*train, "--set", f"train.out_dir={d / 'single'}", "--set", "train.max_shard_mb=0", mpi=2)
    return d / "sharded" / "step_000006", d / "single" / "step_000006"


def load_sharded(ckpt):
    index = json.loads((ckpt / "model.safetensors.index.json").read_text())
    tensors, where = {}, {}
    for shard in sorted(set(index["weight_map"].values())):
        part = safetensors_numpy.load_file(str(ckpt / shard))
        for name in part:
            assert name not in where, f"{name} in {where.get(name)} and {shard}"
            where[name] = shard
        tensors.update(part)
    return index, tensors, where


def test_sharded_checkpoint_equals_single_file(runs):
    sharded, single = runs
    assert not (sharded / "model.safetensors").exists()
    index, tensors, where = load_sharded(sharded)
    assert where == index["weight_map"], "the index must name the shard each tensor is in"
    assert index["metadata"]["total_size"] == sum(t.nbytes for t in tensors.values())
    shards = sorted(set(where.values()))
    assert len(shards) >= 2 and all(s.startswith("model-") and s.endswith(f"-of-{len(shards):05d}.safetensors")
                                    for s in shards), shards
    for s in shards:  # every shard under the limit (plus its JSON header)
        assert os.path.getsize(sharded / s) <= SHARD_MB * 1e6 + 16384, s
    whole = safetensors_numpy.load_file(str(single / "model.safetensors"))
    assert set(whole) == set(tensors)
    for name, t in whole.items():
        assert t.dtype == tensors[name].dtype and t.shape == tensors[name].shape, name
        assert np.array_equal(t.view(np.uint32), tensors[name].view(np.uint32)), name


def test_optimizer_shard_per_rank(runs):
    sharded, _ = runs
    for rank in range(2):
        assert (sharded / f"optimizer-rank{rank:05d}-of-00002.h5").exists()


def test_sharded_checkpoint_loads_in_transformers(runs):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    sharded, _ = runs
    model = transformers.Gemma3ForCausalLM.from_pretrained(str(sharded), dtype=torch.float32)
    _, tensors, _ = load_sharded(sharded)
    state = model.state_dict()
    for name, t in tensors.items():
        assert np.array_equal(state[name].numpy(), t), name
