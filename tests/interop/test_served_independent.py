"""A served model that fimi did not serve: `transformers serve` (Hugging Face) in fimi's three roles.

tests/interop/test_served_eval.py plays fimi's OpenAI chat-completions
client against a scripted fake server and against `fimi serve`; here the
server is an independent implementation, Hugging Face transformers'
`transformers serve`, serving a checkpoint that fimi trained.

The checkpoint (once per module): two balance enquiries (`fimi env sample
--seed 9`), their transcripts, a 512-piece tokenizer, `fimi init --preset
tiny`, then 5 steps of SFT on the transcripts (`fimi data tokenize --kind
sft`, `fimi train --config configs/tiny-cpu-sft.ini`): the served
checkpoint is RUN/step_000005. bench/serve_bench.py makes it a directory
transformers serves (a copy with a tokenizer_config.json whose chat template
renders fimi's chat format, and a generation_config.json) and checks that
transformers loads it, renders fimi's format and generates; that runs with
the Python beside the `transformers` CLI (the one with torch). One server
for the module:

  transformers serve DIR --host 127.0.0.1 --port P --device cpu --dtype float32
      --continuous-batching --cb-num-blocks 64 --max-model-len 2048 --log-level warning

(the command of bench/serve_bench.py plus --cb-num-blocks: without it the
continuous-batching KV cache is sized to 80-90% of the device's memory, on
the CPU the host's whole RAM less the process's own, and zero-filling that
took the start from 20 s to about a minute here; 64 blocks of 256 tokens
are plenty for two conversations of 2048 tokens). The server accepts only
DIR itself, the path as given, as the request's "model" (any other name:
HTTP 400 "Server is pinned to ..."); /v1/models lists it, and the tests use
what it lists.

The model is tiny and barely trained: its text is never asserted on, only
the structure of what fimi writes. The tests:

- the checkpoint: trained (step 5, weights not the initial ones), loaded and
  templated by transformers as fimi's format, listed by the server;
- the agent (`fimi eval --endpoint URL --served-model DIR`, small budgets,
  the answers recorded with --endpoint-cache): every episode has fimi's
  system turn and opening line (the same as a `fimi eval --model` run of the
  checkpoint) and at least one model turn, nothing failed, the server's
  usage counted; `fimi eval compare` and `fimi eval ladder` read both files;
- the cache: a replay (--endpoint-cache-mode replay) at a port nobody
  listens on gives the same results but for timing and the "model" field
  (it names the URL, which the cache key leaves out);
- the customer (env.simulator = model, the oracle as the agent): the
  reward says who played the customer and counts its drift, the summary
  reports it;
- the judge (`fimi eval bench --judge model`): bench.json has the model
  judge's agreement with the rubric judge, counts that add up.

The server: FIMI_TRANSFORMERS_SERVE (the `transformers` CLI of an
environment with transformers[serving] and torch), else `transformers` next
to this Python; without one the module is skipped. The whole module takes
about 30 s on 2 cores, most of it the checkpoint's load check and the
server's start.

Run: FIMI_BIN=build/cmd/fimi FIMI_TRANSFORMERS_SERVE=VENV/bin/transformers \\
         .venv/bin/python -m pytest -q tests/interop/test_served_independent.py
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from fimi_tiny import tiny_checkpoint  # same directory

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIMI_BIN = os.path.abspath(os.environ.get(
    "FIMI_BIN", os.path.join(os.environ.get("FIMI_BUILD_DIR", os.path.join(REPO_ROOT, "build")), "cmd", "fimi")
))
TRANSFORMERS_CLI = os.environ.get("FIMI_TRANSFORMERS_SERVE") or os.path.join(os.path.dirname(sys.executable),
                                                                             "transformers")
NO_SERVER = ("transformers serve is not installed: pip install 'transformers[serving]' torch, "
             f"or set FIMI_TRANSFORMERS_SERVE (no executable at {TRANSFORMERS_CLI})")
pytestmark = [
    pytest.mark.skipif(not os.access(FIMI_BIN, os.X_OK), reason=f"fimi binary not found at {FIMI_BIN}"),
    pytest.mark.skipif(not os.access(TRANSFORMERS_CLI, os.X_OK), reason=NO_SERVER),
]

BUDGET = ["--set", "grpo.max_turn_tokens=24", "--set", "grpo.max_episode_tokens=120", "--set", "grpo.max_malformed=2"]
TRAIN_STEPS = 5


def clean_env(**extra):
    """The environment without a key or a tracking server a developer may have set."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "MLFLOW_TRACKING_URI")}
    env.update(extra)
    return env


def fimi(*args, cwd=None):
    p = subprocess.run([FIMI_BIN, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd,
                       env=clean_env())
    assert p.returncode == 0, f"fimi {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr[-3000:]}"
    return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def without_timing(results, model=False):
    """results less its timing fields (and, with model=True, the "model" field that names the endpoint)."""
    r = json.loads(json.dumps(results))
    del r["seconds"]
    del r["summary"]["episodes_per_second"]
    if model:
        del r["model"]
    return r


def bench_python():
    """The Python of the environment the `transformers` CLI belongs to: beside it, else its #! line."""
    cli_dirs = [os.path.dirname(TRANSFORMERS_CLI), os.path.dirname(os.path.realpath(TRANSFORMERS_CLI))]
    for bin_dir in dict.fromkeys(cli_dirs):
        for name in ("python3", "python"):
            if os.access(os.path.join(bin_dir, name), os.X_OK):
                return os.path.join(bin_dir, name)
    with open(TRANSFORMERS_CLI, "rb") as f:
        first = f.readline().decode(errors="replace")
    if first.startswith("#!") and first[2:].split() and os.access(first[2:].split()[0], os.X_OK):
        return first[2:].split()[0]
    pytest.skip(f"no Python found beside {TRANSFORMERS_CLI}")


# bench/serve_bench.py's checkpoint preparation, run by the Python that has transformers and torch.
PREPARE = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import serve_bench
model, work, prompts = sys.argv[2:5]
hf_dir, made = serve_bench.prepare_hf_checkpoint(model, work)
check = serve_bench.verify_hf_checkpoint(hf_dir, serve_bench.load_prompts(prompts, 1)[0], dict(os.environ), made)
print(json.dumps({"dir": hf_dir, "made": made, "check": check}))
"""


def server_env():
    env = clean_env(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny fimi checkpoint after a few SFT steps, and the directory transformers serves."""
    d = tmp_path_factory.mktemp("independent-ckpt")
    tiny_checkpoint(FIMI_BIN, d, n=2)
    fimi("data", "tokenize", "--input", d / "bal-sft.jsonl", "--tokenizer", d / "tok.json", "--out", d / "sft.h5",
         "--kind", "sft")
    fimi("train", "--config", os.path.join(REPO_ROOT, "configs", "tiny-cpu-sft.ini"),
         "--set", f"train.init={d / 'model'}", "--set", f"data.train={d / 'sft.h5'}", "--set", "data.eval=",
         "--set", f"train.out_dir={d / 'run'}", "--set", f"train.steps={TRAIN_STEPS}",
         "--set", f"train.save_every={TRAIN_STEPS}", "--set", "train.progress=false", cwd=d)
    trained = d / "run" / f"step_{TRAIN_STEPS:06d}"
    lines = [line for line in (d / "bal.jsonl").read_text().splitlines() if line.strip()]
    assert len(lines) == 2
    (d / "T1.jsonl").write_text(lines[0] + "\n")

    p = subprocess.run([bench_python(), "-c", PREPARE, os.path.join(REPO_ROOT, "bench"), str(trained), str(d),
                        str(d / "bal-sft.jsonl")], capture_output=True, text=True, timeout=300, env=server_env())
    assert p.returncode == 0, f"bench/serve_bench.py could not prepare {trained} for transformers:\n{p.stderr[-3000:]}"
    prepared = json.loads(p.stdout.strip().splitlines()[-1])
    return {"dir": d, "init": d / "model", "trained": trained, "tasks": d / "bal.jsonl", "one": d / "T1.jsonl",
            "hf_dir": prepared["dir"], "made": prepared["made"], "check": prepared["check"]}


def http_get(url):
    """(status, parsed JSON body) of a GET, or (None, None) when nobody answers."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url), timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None
    except (OSError, ValueError):
        return None, None


def stop_group(proc):
    """SIGTERM to the server's process group (its model process included), SIGKILL after 30 s."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for _ in range(40):  # the model process and the resource tracker exit with it
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.25)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def server(checkpoint, tmp_path_factory):
    """`transformers serve` of the prepared checkpoint: {"url", "model", "cmd", "log"}."""
    port = free_port()
    cmd = [TRANSFORMERS_CLI, "serve", checkpoint["hf_dir"], "--host", "127.0.0.1", "--port", str(port),
           "--device", "cpu", "--dtype", "float32", "--continuous-batching", "--cb-num-blocks", "64",
           "--max-model-len", "2048", "--log-level", "warning"]
    log_path = tmp_path_factory.mktemp("independent-serve") / "transformers-serve.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=server_env(),
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                pytest.fail(f"transformers serve exited ({proc.returncode}):\n{log_path.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"transformers serve not ready in 180 s:\n{log_path.read_text()[-3000:]}")
            if http_get(base + "/health")[0] == 200:
                status, models = http_get(base + "/v1/models")
                if status == 200:
                    break
            time.sleep(0.25)
        yield {"url": base + "/v1", "models": models, "cmd": cmd, "log": log_path, "proc": proc}
    finally:
        stop_group(proc)
        log.close()


@pytest.fixture(scope="module")
def model_name(server):
    """The one name the server accepts as "model": the one model /v1/models lists."""
    ids = [m["id"] for m in server["models"]["data"]]
    assert len(ids) == 1, server["models"]
    return ids[0]


def run_eval(args, out):
    p = subprocess.run([FIMI_BIN, "eval", *map(str, args), "--out", str(out)], capture_output=True, text=True,
                       timeout=120, env=clean_env())
    assert p.returncode == 0, f"fimi eval {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr[-3000:]}"
    return p, json.loads(out.read_text())


@pytest.fixture(scope="module")
def agent_runs(checkpoint, server, model_name, tmp_path_factory):
    """The checkpoint as the agent through the server (answers recorded in a cache) and directly."""
    d = tmp_path_factory.mktemp("independent-agent")
    _, served = run_eval(["--endpoint", server["url"], "--served-model", model_name, "--tasks", checkpoint["tasks"],
                          "--endpoint-cache", d / "cache", *BUDGET], d / "served.json")
    _, direct = run_eval(["--model", checkpoint["trained"], "--tasks", checkpoint["tasks"], *BUDGET],
                         d / "direct.json")
    return {"dir": d, "served": served, "direct": direct, "cache": d / "cache"}


# ---- the checkpoint --------------------------------------------------------------------------------------


def test_the_served_checkpoint_is_a_trained_fimi_checkpoint(checkpoint, server, model_name):
    trained = checkpoint["trained"]
    assert (trained / "DONE").exists()
    assert json.loads((trained / "trainer_state.json").read_text())["step"] == TRAIN_STEPS
    assert (trained / "model.safetensors").read_bytes() != (checkpoint["init"] / "model.safetensors").read_bytes()
    check = checkpoint["check"]
    # transformers loads it as the Gemma 3 it is, with every parameter fimi counts, and renders fimi's format.
    assert check["model_class"] == "Gemma3ForCausalLM", check
    config = json.loads((trained / "config.json").read_text())
    assert config["model_type"] == "gemma3_text"
    assert check["parameters"] > 0 and check["template_matches_fimi"] is True, check
    assert check["bos_count"] == 1, check
    if checkpoint["made"]:  # fimi writes no chat template: the served directory is the prepared copy
        assert check["eos_token"] == "<end_of_turn>", check
        assert os.path.dirname(checkpoint["hf_dir"]) == str(checkpoint["dir"])
        hf_weights = os.path.join(checkpoint["hf_dir"], "model.safetensors")
        assert open(hf_weights, "rb").read() == (trained / "model.safetensors").read_bytes()
    # The server is pinned to the directory it was given: that path is the model's name.
    assert model_name == checkpoint["hf_dir"], (model_name, checkpoint["hf_dir"])


# ---- the agent -------------------------------------------------------------------------------------------


def test_a_transformers_served_agent(agent_runs, server, model_name):
    served, direct = agent_runs["served"], agent_runs["direct"]
    assert served["model"] == f"endpoint:{server['url']}#{model_name}"
    assert len(served["episodes"]) == len(direct["episodes"]) == 2
    assert [e["task_id"] for e in served["episodes"]] == [e["task_id"] for e in direct["episodes"]]
    for s_ep, d_ep in zip(served["episodes"], direct["episodes"]):
        assert not s_ep["failed"], s_ep["trajectory"][-1]  # a refused request (say, a wrong name) fails it
        roles = [t["role"] for t in s_ep["trajectory"]]
        assert roles[0] == "system" and "Navadhan" in s_ep["trajectory"][0]["text"], roles
        assert "model" in roles and s_ep["turns"] >= 1, roles
        assert roles.count("model") == s_ep["turns"]
        # What fimi says before the model speaks is the same whoever serves the model.
        assert s_ep["trajectory"][:2] == d_ep["trajectory"][:2]
        assert s_ep["env_seed"] == d_ep["env_seed"]
        # The server's usage gives the token columns.
        assert s_ep["tokens"] >= s_ep["generated_tokens"] > 0, s_ep
    d = agent_runs["dir"]
    compare = subprocess.run([FIMI_BIN, "eval", "compare", str(d / "direct.json"), str(d / "served.json"),
                              "--out", str(d / "compare.json")], capture_output=True, text=True, timeout=60,
                             env=clean_env())
    assert compare.returncode == 0, compare.stderr
    assert "overall" in compare.stdout and (d / "compare.json").exists()
    ladder = subprocess.run([FIMI_BIN, "eval", "ladder", str(d / "direct.json"), str(d / "served.json")],
                            capture_output=True, text=True, timeout=60, env=clean_env())
    assert ladder.returncode == 0, ladder.stderr
    assert served["label"] != direct["label"]
    rows = [line for line in ladder.stdout.splitlines() if line.startswith("| ")]
    for label in (direct["label"], served["label"]):
        assert any(row.startswith(f"| {label} |") for row in rows), (label, ladder.stdout)


# ---- the cache -------------------------------------------------------------------------------------------


def test_a_replay_of_the_recorded_answers_is_offline_and_equal(agent_runs, checkpoint, model_name, tmp_path):
    recorded = agent_runs["served"]
    # One answer per model turn, each in a file of its own.
    files = sorted(agent_runs["cache"].rglob("*.json"))
    assert len(files) == sum(e["turns"] for e in recorded["episodes"]) > 0
    closed = f"http://127.0.0.1:{free_port()}/v1"
    _, replayed = run_eval(["--endpoint", closed, "--served-model", model_name, "--tasks", checkpoint["tasks"],
                            "--endpoint-cache", agent_runs["cache"], "--endpoint-cache-mode", "replay", *BUDGET],
                           tmp_path / "replay.json")
    assert replayed["model"] == f"endpoint:{closed}#{model_name}"
    assert without_timing(replayed, model=True) == without_timing(recorded, model=True)
    assert sorted(agent_runs["cache"].rglob("*.json")) == files


# ---- the customer and the judge ---------------------------------------------------------------------------


def test_a_transformers_served_customer(checkpoint, server, model_name, tmp_path):
    p, results = run_eval(["--agent", "oracle", "--tasks", checkpoint["one"], "--set", "env.simulator=model",
                           "--set", f"env.simulator_endpoint={server['url']}",
                           "--set", f"env.simulator_model={model_name}"], tmp_path / "O.json")
    assert len(results["episodes"]) == 1
    ep = results["episodes"][0]
    assert not ep["failed"], ep["trajectory"][-1]  # a refused customer request fails the episode
    assert ep["turns"] >= 2, ep["trajectory"]  # the customer answered the oracle at least once
    reward = ep["reward"]
    assert reward["simulator"] == "model", reward
    drift = reward["simulator_drift"]
    assert isinstance(drift, int) and not isinstance(drift, bool) and drift >= 0, reward
    simulator = results["summary"]["dialog"]["simulator"]
    assert simulator["model_episodes"] == 1 and simulator["drift_replies"] == drift, simulator
    assert "simulator drift" in p.stdout, p.stdout


def test_a_transformers_served_judge(checkpoint, server, model_name, tmp_path):
    fimi("eval", "bench", "build", "--tasks", checkpoint["one"], "--out", tmp_path / "cases.jsonl",
         "--adversarial", 0)
    (tmp_path / "B").mkdir()
    p = subprocess.run([FIMI_BIN, "eval", "bench", "--agent", "oracle", "--cases", str(tmp_path / "cases.jsonl"),
                        "--attempts", "1", "--out", str(tmp_path / "B" / "bench.json"), "--judge", "model",
                        "--judge-endpoint", server["url"], "--judge-model", model_name],
                       capture_output=True, text=True, timeout=120, env=clean_env())
    assert p.returncode == 0, p.stderr  # a refused judge request fails the run
    bench = json.loads((tmp_path / "B" / "bench.json").read_text())
    assert bench["judge"] == "model" and bench["attempts"] == 1, {k: bench.get(k) for k in ("judge", "attempts")}
    agreement = bench["judge_agreement"]
    counts = ("both_pass", "rubric_only", "model_only", "both_fail", "attempts", "assertions", "unreadable")
    for name in counts:
        assert isinstance(agreement[name], int) and not isinstance(agreement[name], bool), agreement
    # The oracle passes the rubric's earlier gates, so its one attempt reaches the judge.
    assert agreement["attempts"] == 1, agreement
    assert sum(agreement[k] for k in counts[:4]) == agreement["attempts"], agreement
    assert agreement["assertions"] >= 1 and 0 <= agreement["unreadable"] <= agreement["assertions"], agreement
