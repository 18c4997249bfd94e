"""tests/interop/test_mlflow_interop.py: `fimi train` tracked on a real MLflow
tracking server (track.mlflow_uri, docs/tracking.md "MLflow"), read back with
MLflow's own MlflowClient. One `mlflow server` (SQLite backend, artifacts
served by the server, a free loopback port) for the whole module.

- a tiny SFT run: status FINISHED; the params are the effective config
  (RUN_DIR/config.ini, and the --set values in it); every number of every
  metrics.jsonl line (flattened as TensorBoard's: "run/blas_threads",
  booleans 0/1) is in the metric history at its step with the same value,
  and nothing else is; the tags (version, commit, objective, model, world
  size, run name, input digests equal to hashlib's sha256); the artifacts
  config.ini, metrics.jsonl (byte-equal) and inputs.json;
- a tiny GRPO run (2 steps): FINISHED, its per-step GRPO fields and the
  per-rank lists ("rank_rollouts/0") logged at every step;
- SIGTERM mid-run: the process ends as SIGTERM'd (-15), the run is KILLED;
  `fimi train --resume` continues the same MLflow run (same run id,
  FINISHED), and the newest value at each step equals metrics.jsonl;
- the environment variables (MLFLOW_TRACKING_URI, MLFLOW_EXPERIMENT_NAME)
  when the config sets none;
- `mpirun -np 2 fimi train` (ZeRO-3) with those variables forwarded by
  -x: rank 0 alone talks to the server: one run in the experiment,
  FINISHED, its history metrics.jsonl's, fimi.world_size 2, the tracker's
  lines printed once and no warning (skipped without mpirun);
- a server that answers garbage, and the server stopped mid-run: warnings
  only (one "unreachable"), training finishes, metrics.jsonl complete; an
  eval against the garbage server: one warning, its result file written;
  the ladder from it: an error naming the answer;
- `fimi eval` (--mlflow-uri, --experiment) and `fimi eval bench`
  (MLFLOW_* variables) with scripted agents: one run each, FINISHED, named
  by the label, its params the file's settings, its metrics exactly the
  numbers of the summary JSON, the result file an artifact (byte-equal);
  an eval that fails after its run was created leaves it FAILED;
  `fimi eval ladder --mlflow-experiment` prints the same table as the
  ladder of the local files (bench and failed runs left out);
- an eval of a checkpoint of a tracked training run: in the training run's
  experiment, tagged with its run id and step;
- an eval with the server down: the same exit code, stdout and result
  file as without MLflow, and one warning.

Skipped when mlflow is not installed (pip install mlflow).
Run: FIMI_BIN=build/cmd/fimi .venv/bin/pytest tests/interop/test_mlflow_interop.py
"""

import configparser
import hashlib
import http.server
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from metrics_flatten import flatten  # noqa: E402

mlflow = pytest.importorskip("mlflow", reason="mlflow is not installed (pip install mlflow)")
from mlflow.tracking import MlflowClient  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIMI = os.environ.get("FIMI_BIN") or os.path.join(os.environ.get("FIMI_BUILD_DIR", os.path.join(REPO, "build")),
                                                  "cmd", "fimi")
pytestmark = pytest.mark.skipif(not os.access(FIMI, os.X_OK), reason=f"{FIMI} not built")
ENV = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
ENV["OMP_NUM_THREADS"] = "1"
SFT = os.path.join(REPO, "configs", "tiny-cpu-sft.ini")
MPIRUN = shutil.which("mpirun")
GRPO = os.path.join(REPO, "configs", "tiny-cpu-grpo.ini")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fimi(*args, env=None, check=True):
    cmd = [FIMI, *map(str, args)]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env or ENV)
    if check:
        assert result.returncode == 0, f"{' '.join(cmd)}: {result.stderr}"
    return result


def wait_health(uri, seconds=60):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(uri + "/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"mlflow server at {uri} did not answer /health in {seconds} s")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    d = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    mlflow_cli = os.path.join(os.path.dirname(sys.executable), "mlflow")
    cmd = [mlflow_cli if os.access(mlflow_cli, os.X_OK) else "mlflow", "server", "--host", "127.0.0.1", "--port",
           str(port), "--backend-store-uri", f"sqlite:///{d / 'mlflow.db'}", "--artifacts-destination",
           str(d / "artifacts"), "--workers", "1"]
    log = open(d / "server.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=ENV, start_new_session=True)
    uri = f"http://127.0.0.1:{port}"
    t0 = time.time()
    try:
        wait_health(uri)
        print(f"mlflow server up in {time.time() - t0:.1f} s")
        yield {"uri": uri, "proc": proc, "client": MlflowClient(uri)}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("sft-data")
    fimi("tokenizer", "train", "--input", os.path.join(REPO, "tests", "interop", "tokenizer_corpus.txt"),
         "--vocab-size", 600, "--out", d / "tokenizer.json")
    for split in ("train", "eval"):
        fimi("data", "tokenize", "--kind", "sft", "--input",
             os.path.join(REPO, "configs", "data", f"tiny-sft-{split}.jsonl"), "--tokenizer", d / "tokenizer.json",
             "--out", d / f"{split}.h5")
    fimi("init", "--config", SFT, "--tokenizer", d / "tokenizer.json", "--out", d / "init")
    return d


def sft_args(d, out, steps, *more):
    return ["train", "--config", SFT, "--set", f"train.init={d / 'init'}", "--set", f"data.train={d / 'train.h5'}",
            "--set", f"data.eval={d / 'eval.h5'}", "--set", f"train.out_dir={out}", "--set", "train.progress=false",
            "--set", f"train.steps={steps}", *more]


def expected_metrics(out):
    """{key: {step: value}} from metrics.jsonl (step itself left out)."""
    want = {}
    for line in open(out / "metrics.jsonl"):
        row = json.loads(line)
        flat = {}
        flatten({k: v for k, v in row.items() if k != "step"}, "", flat)
        for k, v in flat.items():
            want.setdefault(k, {})[row["step"]] = v
    return want


def logged_metrics(client, run_id, keys, newest=False):
    """{key: {step: value}} from MLflow's histories; newest: the latest
    timestamp's value where a step was logged more than once."""
    got = {}
    for k in keys:
        per_step = {}
        for m in sorted(client.get_metric_history(run_id, k), key=lambda m: m.timestamp):
            assert newest or m.step not in per_step, f"{k} logged twice at step {m.step}"
            per_step[m.step] = m.value
        got[k] = per_step
    return got


def run_of(out):
    return json.load(open(out / "mlflow_run.json"))


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_sft_run(server, sft_data, tmp_path):
    out = tmp_path / "sft-a"
    t0 = time.time()
    fimi(*sft_args(sft_data, out, 6, "--set", "train.eval_every=3", "--set", f"track.mlflow_uri={server['uri']}",
                   "--set", "track.experiment=fimi-interop"))
    print(f"tiny SFT, 6 steps, with MLflow: {time.time() - t0:.1f} s")
    client = server["client"]
    info = run_of(out)
    assert info["tracking_uri"] == server["uri"]
    run = client.get_run(info["run_id"])
    assert run.info.status == "FINISHED"
    assert run.info.run_name == "sft-a"
    assert client.get_experiment(run.info.experiment_id).name == "fimi-interop"

    # params: the effective config, --set values included
    ini = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=None)
    ini.read(out / "config.ini")
    config = {f"{s}.{k}": v for s in ini.sections() for k, v in ini[s].items()}
    assert run.data.params == config
    assert run.data.params["train.steps"] == "6" and run.data.params["train.eval_every"] == "3"
    assert run.data.params["data.train"] == str(sft_data / "train.h5")
    assert run.data.params["track.experiment"] == "fimi-interop"
    assert len(config) == len(run.data.params) > 80

    # metrics: every number of every line at its step, nothing more
    want = expected_metrics(out)
    assert set(run.data.metrics) == set(want)
    assert logged_metrics(client, info["run_id"], want) == want
    assert set(want["eval_loss"]) == {3, 6} and want["run/blas_threads"].keys() == {1}

    tags = run.data.tags
    info_line = fimi("info").stdout.splitlines()[0]  # "fimi VERSION (commit HASH)"
    assert info_line == f"fimi {tags['fimi.version']} (commit {tags['fimi.git_commit']})"
    assert tags["fimi.objective"] == "sft" and tags["fimi.model_type"] == "gemma3_text"
    assert int(tags["fimi.parameters"]) > 0 and tags["fimi.world_size"] == "1"
    assert tags["mlflow.source.name"] == "fimi train" and tags["mlflow.runName"] == "sft-a"
    assert tags["fimi.run_dir"] == str(out)
    assert tags["fimi.sha256.data.train"] == sha256(sft_data / "train.h5")
    assert tags["fimi.sha256.data.eval"] == sha256(sft_data / "eval.h5")
    assert tags["fimi.sha256.tokenizer"] == sha256(sft_data / "init" / "tokenizer.json")

    names = sorted(a.path for a in client.list_artifacts(info["run_id"]))
    assert names == ["config.ini", "inputs.json", "metrics.jsonl"]
    local = client.download_artifacts(info["run_id"], "metrics.jsonl", str(tmp_path))
    assert open(local, "rb").read() == open(out / "metrics.jsonl", "rb").read()
    inputs = json.load(open(client.download_artifacts(info["run_id"], "inputs.json", str(tmp_path))))
    assert inputs["data.train"]["sha256"] == sha256(sft_data / "train.h5")


def test_environment_variables(server, sft_data, tmp_path):
    out = tmp_path / "sft-env"
    env = dict(ENV, MLFLOW_TRACKING_URI=server["uri"], MLFLOW_EXPERIMENT_NAME="fimi-env")
    fimi(*sft_args(sft_data, out, 2), env=env)
    run = server["client"].get_run(run_of(out)["run_id"])
    assert run.info.status == "FINISHED"
    assert server["client"].get_experiment(run.info.experiment_id).name == "fimi-env"
    # No MLflow at all without a URI: nothing of it in RUN_DIR.
    plain = tmp_path / "plain"
    fimi(*sft_args(sft_data, plain, 2))
    assert not (plain / "mlflow_run.json").exists()
    assert not (plain / "config.ini").exists()
    # Turned on for a resume: not a config change (the [track] keys are not
    # hashed), and the new run gets the whole history of metrics.jsonl.
    result = fimi("train", "--config", SFT, "--resume", plain, "--set", f"train.init={sft_data / 'init'}", "--set",
                  f"data.train={sft_data / 'train.h5'}", "--set", f"data.eval={sft_data / 'eval.h5'}", "--set",
                  "train.progress=false", "--set", "train.steps=2", env=env)
    assert "nothing to do" in result.stdout
    assert "different training config" not in result.stderr, result.stderr
    run = server["client"].get_run(run_of(plain)["run_id"])
    want = expected_metrics(plain)
    assert set(run.data.metrics) == set(want)
    assert logged_metrics(server["client"], run.info.run_id, want) == want


@pytest.mark.skipif(MPIRUN is None, reason="no mpirun")
def test_mpirun_only_rank_0_tracks(server, sft_data, tmp_path):
    """`mpirun -np 2 fimi train` (ZeRO-3 across the 2 ranks) with the server
    and experiment forwarded to every rank with -x, as launch/cluster-env.sh
    does: one run in the experiment, FINISHED, its history metrics.jsonl's
    (written by rank 0), fimi.world_size 2, and no MLflow warning."""
    out = tmp_path / "sft-mpi"
    experiment = "fimi-mpirun"
    env = dict(ENV, MLFLOW_TRACKING_URI=server["uri"], MLFLOW_EXPERIMENT_NAME=experiment, OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    cmd = [MPIRUN, "--oversubscribe", "-np", "2", "-x", "MLFLOW_TRACKING_URI", "-x", "MLFLOW_EXPERIMENT_NAME", FIMI,
           *map(str, sft_args(sft_data, out, 4, "--set", "train.eval_every=2", "--set", "train.save_every=0"))]
    t0 = time.time()
    result = subprocess.run(cmd, capture_output=True, text=True, env=env)
    print(f"tiny SFT, 4 steps, mpirun -np 2, with MLflow: {time.time() - t0:.1f} s")
    assert result.returncode == 0, f"{' '.join(cmd)}: {result.stderr}"
    assert "ZeRO-3 across 2 ranks" in result.stdout + result.stderr
    client = server["client"]
    experiment_id = client.get_experiment_by_name(experiment).experiment_id
    # The tracker's info lines (any rank's tracker would print them): once,
    # from rank 0's; no warning from any rank.
    assert [line for line in result.stderr.splitlines() if "mlflow" in line.lower()] == [
        f"fimi info: MLflow: tracking to {server['uri']}, experiment \"{experiment}\"",
        f"fimi info: MLflow: run {run_of(out)['run_id']} in experiment \"{experiment}\" ({experiment_id})"
    ], result.stderr
    assert "fimi warning" not in result.stderr, result.stderr
    runs = client.search_runs([experiment_id])
    assert len(runs) == 1, [r.info.run_name for r in runs]
    run = runs[0]
    assert run.info.run_id == run_of(out)["run_id"] and run.info.run_name == "sft-mpi"
    assert run.info.status == "FINISHED"
    assert run.data.tags["fimi.world_size"] == "2"
    want = expected_metrics(out)
    assert sorted(want["loss"]) == [1, 2, 3, 4] and set(want["eval_loss"]) == {2, 4}
    assert set(run.data.metrics) == set(want)
    assert logged_metrics(client, run.info.run_id, want) == want


def test_grpo_run(server, tmp_path):
    d = tmp_path
    fimi("env", "sample", "--family", "kyc_status_check", "--n", 4, "--seed", 1, "--out", d / "train.jsonl")
    fimi("env", "sample", "--family", "kyc_status_check", "--n", 2, "--seed", 99, "--out", d / "val.jsonl")
    fimi("env", "transcripts", "--task-file", d / "train.jsonl", "--catalog", "family", "--out", d / "sft.jsonl")
    fimi("tokenizer", "train", "--input", d / "sft.jsonl", "--vocab-size", 1024, "--out", d / "tokenizer.json")
    fimi("init", "--preset", "tiny", "--tokenizer", d / "tokenizer.json", "--out", d / "init")
    out = d / "grpo"
    fimi("train", "--config", GRPO, "--set", f"train.init={d / 'init'}", "--set", f"env.tasks={d / 'train.jsonl'}",
         "--set", f"env.val_tasks={d / 'val.jsonl'}", "--set", "train.progress=false", "--set",
         "grpo.tasks_per_step=2", "--set", "grpo.group_size=2", "--set", "train.micro_batch=4", "--set",
         "train.grad_accum=1", "--set", "grpo.max_turn_tokens=16", "--set", "grpo.max_episode_tokens=32", "--set",
         "rollout.slots=4", "--set", "grpo.val_tasks=2", "--set", "train.save_every=0", "--set", "train.steps=2",
         "--set", f"train.out_dir={out}", "--set", f"track.mlflow_uri={server['uri']}", "--set",
         "track.experiment=fimi-interop")
    client = server["client"]
    run = client.get_run(run_of(out)["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.tags["fimi.objective"] == "grpo"
    assert run.data.tags["fimi.sha256.env.tasks"] == sha256(d / "train.jsonl")
    assert run.data.tags["fimi.sha256.env.val_tasks"] == sha256(d / "val.jsonl")
    want = expected_metrics(out)
    assert "reward_mean" in want and "rank_rollouts/0" in want and "validation" in want
    assert logged_metrics(client, run.info.run_id, want) == want


def wait_for(predicate, seconds, what):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def metric_lines(out):
    try:
        return sum(1 for _ in open(out / "metrics.jsonl"))
    except OSError:
        return 0


def test_sigterm_then_resume(server, sft_data, tmp_path):
    out = tmp_path / "sft-killed"
    steps = 100000  # SIGTERM comes long before the end; the resume stops 10 steps after it
    args = sft_args(sft_data, out, steps, "--set", "train.eval_every=0", "--set", "train.save_every=5", "--set",
                    "train.keep_last=1", "--set", f"track.mlflow_uri={server['uri']}", "--set",
                    "track.experiment=fimi-interop")
    proc = subprocess.Popen([FIMI, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    wait_for(lambda: (out / "mlflow_run.json").exists() and metric_lines(out) >= 12, 60, "12 steps")
    print(f"SIGTERM after {metric_lines(out)} steps")
    proc.send_signal(signal.SIGTERM)
    t0 = time.time()
    _, stderr = proc.communicate(timeout=30)
    print(f"SIGTERM to exit: {time.time() - t0:.2f} s")
    assert time.time() - t0 < 10, "bounded: 5 s of flushing and the status request"
    assert proc.returncode == -signal.SIGTERM, stderr
    assert "SIGTERM" in stderr and "KILLED" in stderr
    killed_at = metric_lines(out)
    print(f"killed at step {killed_at}")
    end = killed_at + 10
    info = run_of(out)
    client = server["client"]
    assert client.get_run(info["run_id"]).info.status == "KILLED"

    result = fimi("train", "--config", SFT, "--resume", out, "--set", f"train.init={sft_data / 'init'}", "--set",
                  f"data.train={sft_data / 'train.h5'}", "--set", f"data.eval={sft_data / 'eval.h5'}", "--set",
                  "train.progress=false", "--set", f"train.steps={end}", "--set", "train.eval_every=0", "--set",
                  "train.save_every=5", "--set", "train.keep_last=1", "--set", f"track.mlflow_uri={server['uri']}",
                  "--set", "track.experiment=fimi-interop")
    assert "continuing run " + info["run_id"] in result.stderr
    assert run_of(out)["run_id"] == info["run_id"]
    run = client.get_run(info["run_id"])
    assert run.info.status == "FINISHED"
    # Steps after the newest checkpoint were logged twice (by the killed and
    # the resumed invocation): the newest value is metrics.jsonl's.
    want = expected_metrics(out)
    assert sorted(want["loss"]) == list(range(1, end + 1))
    keys = ["loss", "grad_norm", "tokens"]
    got = logged_metrics(client, info["run_id"], keys, newest=True)
    assert {k: {s: v for s, v in got[k].items() if s in want[k]} for k in keys} == {k: want[k] for k in keys}


class Garbage(http.server.BaseHTTPRequestHandler):
    def answer(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b"<html>not json</html>"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = answer

    def log_message(self, *args):
        pass


def test_garbage_server(sft_data, tmp_path):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Garbage)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        out = tmp_path / "garbage"
        result = fimi(*sft_args(sft_data, out, 3, "--set", f"track.mlflow_uri={uri}"))
        fimi("env", "sample", "--family", "balance_enquiry", "--n", 2, "--seed", 9, "--out", tmp_path / "bal.jsonl")
        evaluation = fimi("eval", "--agent", "oracle", "--tasks", tmp_path / "bal.jsonl", "--out",
                          tmp_path / "garbage.json", "--mlflow-uri", uri)
        ladder = fimi("eval", "ladder", "--mlflow-experiment", "x", "--mlflow-uri", uri, check=False)
    finally:
        httpd.shutdown()
    assert "not JSON" in result.stderr and "no MLflow tracking for this run" in result.stderr
    assert metric_lines(out) == 3
    assert evaluation.stderr.count("fimi warning") == 1 and "not JSON" in evaluation.stderr
    assert json.load(open(tmp_path / "garbage.json"))["summary"]["overall"]["reward"] == 1.0
    assert ladder.returncode == 1 and "not JSON" in ladder.stderr and "Traceback" not in ladder.stderr


def eval_metrics(doc):
    """What fimi logs for a result file of fimi eval or fimi eval bench: the
    summary flattened (an eval's per-family slices left out, its pass_k
    keyed by k), plus seconds."""
    summary = dict(doc["summary"])
    if doc["format"] == "fimi-eval-results":
        summary.pop("family")
        summary["pass_k"] = {str(p["k"]): {k: v for k, v in p.items() if k != "k"} for p in summary["pass_k"]}
    out = {}
    flatten(summary, "", out)
    out["seconds"] = float(doc["seconds"])
    return out


def eval_params(doc):
    skip = {"format", "version", "seconds", "episodes_per_second", "cases_per_second"}
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in doc.items()
            if k not in skip and isinstance(v, (str, int, float)) and not isinstance(v, bool)}


def check_eval_run(client, run, path, kind):
    doc = json.load(open(path))
    assert run.info.status == "FINISHED"
    assert run.info.run_name == doc["label"]
    assert run.data.metrics == eval_metrics(doc)
    assert all(len(client.get_metric_history(run.info.run_id, k)) == 1 for k in ("overall/reward", "seconds")
               if k in run.data.metrics)
    assert run.data.params == eval_params(doc)
    tags = run.data.tags
    assert tags["fimi.kind"] == kind and tags["fimi.model"] == doc["model"]
    assert tags["fimi.results"] == os.path.basename(path)
    info_line = fimi("info").stdout.splitlines()[0]
    assert info_line == f"fimi {tags['fimi.version']} (commit {tags['fimi.git_commit']})"
    names = sorted(a.path for a in client.list_artifacts(run.info.run_id))
    assert names == sorted([os.path.basename(path), os.path.basename(path)[:-5] + ".md"])
    local = client.download_artifacts(run.info.run_id, os.path.basename(path), str(path.parent / "down"))
    assert open(local, "rb").read() == open(path, "rb").read()


def test_eval_runs_and_ladder(server, tmp_path):
    client = server["client"]
    t0 = time.time()
    fimi("env", "sample", "--family", "all", "--n", 1, "--seed", 5, "--out", tmp_path / "tasks.jsonl")
    track = ["--mlflow-uri", server["uri"], "--experiment", "fimi-evals"]
    for agent, label in (("oracle", "oracle"), ("random", "rand")):
        fimi("eval", "--agent", agent, "--tasks", tmp_path / "tasks.jsonl", "--trials", 2, "--label", label, "--out",
             tmp_path / f"{label}.json", *track)
    # fimi eval bench through the MLFLOW_* variables: one run, its harness not logged apart
    env = dict(ENV, MLFLOW_TRACKING_URI=server["uri"], MLFLOW_EXPERIMENT_NAME="fimi-evals")
    fimi("eval", "bench", "--agent", "random", "--cases", os.path.join(REPO, "tests", "data", "bench", "cases.jsonl"),
         "--attempts", 2, "--out", tmp_path / "bench.json", env=env)
    # a result file that cannot be written: the run was created, so it is FAILED; the exit code is fimi eval's
    failed = fimi("eval", "--agent", "oracle", "--tasks", tmp_path / "tasks.jsonl", "--label", "unwritable", "--out",
                  tmp_path / "no-such-dir" / "x.json", *track, check=False)
    assert failed.returncode == 1 and "x.json" in failed.stderr, failed.stderr
    print(f"three evals, a bench and a failed eval with MLflow: {time.time() - t0:.1f} s")

    experiment = client.get_experiment_by_name("fimi-evals")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == ["oracle", "rand", "random", "unwritable"]
    check_eval_run(client, runs["oracle"], tmp_path / "oracle.json", "eval")
    check_eval_run(client, runs["rand"], tmp_path / "rand.json", "eval")
    check_eval_run(client, runs["random"], tmp_path / "bench.json", "eval_bench")
    assert runs["oracle"].data.metrics["overall/reward"] == 1.0
    assert {"categories/accounts/pass_hat_n", "categories/accounts/pass_at_n", "categories/accounts/mean",
            "categories/accounts/avg_at_n"} <= set(runs["random"].data.metrics)
    assert runs["unwritable"].info.status == "FAILED" and not runs["unwritable"].data.metrics

    t0 = time.time()
    from_server = fimi("eval", "ladder", "--mlflow-experiment", "fimi-evals", "--mlflow-uri", server["uri"])
    print(f"ladder from MLflow: {time.time() - t0:.1f} s")
    local = fimi("eval", "ladder", tmp_path / "oracle.json", tmp_path / "rand.json")
    assert from_server.stdout == local.stdout and from_server.stdout.count("\n") == 4, from_server.stdout
    missing = fimi("eval", "ladder", "--mlflow-experiment", "no-such-experiment", "--mlflow-uri", server["uri"],
                   check=False)
    assert missing.returncode == 1 and "no MLflow experiment \"no-such-experiment\"" in missing.stderr


def test_eval_of_a_tracked_checkpoint(server, sft_data, tmp_path):
    out = tmp_path / "sft-linked"
    fimi(*sft_args(sft_data, out, 2, "--set", "train.save_every=2", "--set", f"track.mlflow_uri={server['uri']}",
                   "--set", "track.experiment=fimi-linked"))
    fimi("env", "sample", "--family", "balance_enquiry", "--n", 2, "--seed", 9, "--out", tmp_path / "bal.jsonl")
    # no experiment named: the training run's
    result = fimi("eval", "--model", out / "step_000002", "--tasks", tmp_path / "bal.jsonl", "--trials", 1, "--set",
                  "grpo.max_turn_tokens=8", "--set", "grpo.max_episode_tokens=24", "--label", "sft-linked step 2",
                  "--out", tmp_path / "linked.json", "--mlflow-uri", server["uri"])
    assert "experiment \"fimi-linked\"" in result.stderr
    client = server["client"]
    experiment = client.get_experiment_by_name("fimi-linked")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert sorted(runs) == ["sft-linked", "sft-linked step 2"]
    evaluation = runs["sft-linked step 2"]
    check_eval_run(client, evaluation, tmp_path / "linked.json", "eval")
    assert evaluation.data.tags["fimi.training_run_id"] == run_of(out)["run_id"] == runs["sft-linked"].info.run_id
    assert evaluation.data.tags["fimi.training_step"] == "2"
    assert evaluation.data.tags["fimi.model"] == str(out / "step_000002")


def test_eval_with_the_server_down(tmp_path):
    fimi("env", "sample", "--family", "all", "--n", 1, "--seed", 5, "--out", tmp_path / "tasks.jsonl")
    results = {}
    for name, track in (("plain", []), ("down", ["--mlflow-uri", f"http://127.0.0.1:{free_port()}"])):
        os.mkdir(tmp_path / name)
        cmd = [FIMI, "eval", "--agent", "random", "--tasks", str(tmp_path / "tasks.jsonl"), "--trials", "2", "--out",
               "results.json", *track]
        results[name] = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=tmp_path / name)
    plain, down = results["plain"], results["down"]
    assert plain.returncode == down.returncode == 0
    assert plain.stdout == down.stdout
    assert "fimi warning" not in plain.stderr
    assert down.stderr.count("fimi warning") == 1 and "not logged to MLflow" in down.stderr, down.stderr

    def stable(path):  # the timings differ from run to run
        doc = json.load(open(path))
        doc.pop("seconds")
        doc["summary"].pop("episodes_per_second")
        return doc

    assert stable(tmp_path / "plain" / "results.json") == stable(tmp_path / "down" / "results.json")
    assert open(tmp_path / "plain" / "results.md").read() == open(tmp_path / "down" / "results.md").read()


def test_server_stopped_mid_run(server, sft_data, tmp_path):
    """Last: it stops the module's server."""
    out = tmp_path / "sft-server-down"
    steps = 80
    args = sft_args(sft_data, out, steps, "--set", "train.eval_every=0", "--set", f"track.mlflow_uri={server['uri']}",
                    "--set", "track.experiment=fimi-interop", "--set", "track.mlflow_flush_s=2")
    proc = subprocess.Popen([FIMI, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    wait_for(lambda: (out / "mlflow_run.json").exists() and metric_lines(out) >= 5, 60, "5 steps")
    os.killpg(server["proc"].pid, signal.SIGKILL)
    server["proc"].wait(timeout=30)
    t0 = time.time()
    _, stderr = proc.communicate(timeout=120)
    print(f"after the server stopped: {time.time() - t0:.2f} s to finish")
    assert proc.returncode == 0, stderr
    assert metric_lines(out) == steps
    assert stderr.count("unreachable") == 1, stderr
    assert "metrics.jsonl has them all" in stderr or "stays RUNNING" in stderr
