"""tests/interop/test_tensorboard_interop.py: the TensorBoard event files of
`fimi train` (track.tensorboard = true, docs/tracking.md) read by
TensorBoard's own EventAccumulator, which checks every record's CRCs.

- a tiny SFT run (configs/tiny-cpu-sft.ini, 6 steps, evaluation every 3):
  for every metrics.jsonl line, every number (nested ones as "run/...",
  booleans as 0/1) is a scalar at the line's step equal to it within float32
  rounding, and TensorBoard holds nothing more;
- the same run resumed from its step-3 checkpoint after its last checkpoint
  was lost (as after a crash): metrics.jsonl drops steps 4..6 and logs them
  again, and TensorBoard, told by the resumed file's session START, keeps
  only the new values: again exactly one scalar per step, equal to
  metrics.jsonl (whose timing fields differ from the first attempt's);
- track.tensorboard = false (the default) writes no tb/ folder.

Run: FIMI_BIN=build/cmd/fimi .venv/bin/pytest tests/interop/test_tensorboard_interop.py
"""

import json
import math
import os
import shutil
import subprocess

import pytest

from metrics_flatten import flatten  # noqa: E402

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="tensorboard is not installed (pip install tensorboard)")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIMI = os.environ.get("FIMI_BIN") or os.path.join(os.environ.get("FIMI_BUILD_DIR", os.path.join(REPO, "build")),
                                                  "cmd", "fimi")
pytestmark = pytest.mark.skipif(not os.access(FIMI, os.X_OK), reason=f"{FIMI} not built")
ENV = dict(os.environ, OMP_NUM_THREADS="1")
CONFIG = os.path.join(REPO, "configs", "tiny-cpu-sft.ini")
STEPS = 6


def fimi(*args):
    cmd = [FIMI, *map(str, args)]
    result = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    assert result.returncode == 0, f"{' '.join(cmd)}: {result.stderr}"
    return result


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("tensorboard")
    fimi("tokenizer", "train", "--input", os.path.join(REPO, "tests", "interop", "tokenizer_corpus.txt"),
         "--vocab-size", 600, "--out", d / "tokenizer.json")
    for split in ("train", "eval"):
        fimi("data", "tokenize", "--kind", "sft", "--input",
             os.path.join(REPO, "configs", "data", f"tiny-sft-{split}.jsonl"), "--tokenizer", d / "tokenizer.json",
             "--out", d / f"{split}.h5")
    fimi("init", "--config", CONFIG, "--tokenizer", d / "tokenizer.json", "--out", d / "init")
    return d


def train(d, out, *more):
    return fimi("train", "--config", CONFIG, "--set", f"train.init={d / 'init'}", "--set",
                f"data.train={d / 'train.h5'}", "--set", f"data.eval={d / 'eval.h5'}", "--set",
                f"train.out_dir={out}", "--set", "train.progress=false", "--set", f"train.steps={STEPS}", "--set",
                "train.eval_every=3", "--set", "train.save_every=3", "--set", "train.keep_last=0", *more)


def expected(run):
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    want = {}
    for row in rows:
        scalars = {}
        flatten({k: v for k, v in row.items() if k != "step"}, "", scalars)
        for tag, value in scalars.items():
            want.setdefault(tag, {})[int(row["step"])] = value
    return rows, want


def logged(run):
    acc = event_accumulator.EventAccumulator(str(run / "tb"), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    got = {}
    for tag in acc.Tags()["scalars"]:
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        assert len(steps) == len(set(steps)), f"{tag}: a step logged twice: {steps}"
        got[tag] = {e.step: e.value for e in events}
    return got


def assert_same(got, want):
    assert set(got) == set(want), f"tags only in TensorBoard: {set(got) - set(want)}, " \
                                  f"only in metrics.jsonl: {set(want) - set(got)}"
    for tag in want:
        assert set(got[tag]) == set(want[tag]), f"{tag}: steps {sorted(got[tag])} vs {sorted(want[tag])}"
        for step, value in want[tag].items():
            # simple_value is a float32: equal after rounding the double to it.
            assert math.isclose(got[tag][step], value, rel_tol=2 ** -23, abs_tol=1e-38), \
                f"{tag} at step {step}: TensorBoard {got[tag][step]!r}, metrics.jsonl {value!r}"


def test_every_scalar_equals_metrics(setup):
    run = setup / "straight"
    train(setup, run, "--set", "track.tensorboard=true")
    rows, want = expected(run)
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    got = logged(run)
    assert_same(got, want)
    # What the run logs, by name: the loss every step, the eval loss at 3 and 6, the BLAS header at step 1.
    assert sorted(got["loss"]) == list(range(1, STEPS + 1))
    assert sorted(got["eval_loss"]) == [3, 6]
    assert list(got["run/blas_threads"]) == [1] and "run/blas" not in got


def test_resume_after_a_lost_checkpoint_replaces_the_steps(setup):
    run = setup / "resumed"
    train(setup, run, "--set", "track.tensorboard=true")
    first = {r["step"]: r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())}
    shutil.rmtree(run / f"step_{STEPS:06d}")  # the newest checkpoint lost: steps 4..6 are logged again
    train(setup, run, "--set", "track.tensorboard=true", "--resume", run)
    assert len(list((run / "tb").iterdir())) == 2, "one event file per invocation"
    rows, want = expected(run)
    assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
    assert any(rows[s - 1]["elapsed"] != first[s]["elapsed"] for s in range(4, STEPS + 1)), \
        "the resumed steps' timings differ from the first attempt's, so they tell the two apart"
    assert_same(logged(run), want)


def test_off_by_default(setup):
    run = setup / "off"
    train(setup, run, "--set", "train.steps=1")
    assert (run / "metrics.jsonl").exists() and not (run / "tb").exists()
