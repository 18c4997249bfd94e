"""`fimi eval --endpoint URL --served-model NAME`: a served model on the OpenAI chat-completions API as the agent.

Most tests play against a scripted fake server (http.server in a thread on
127.0.0.1, port picked by the kernel). It answers POST /v1/chat/completions
with answers each test picks and records every request it gets. The tasks
are 1 or 2 balance enquiries (`fimi env sample`), and the budgets are small
(grpo.max_turn_tokens=32, max_episode_tokens=200, max_malformed=3). The tests
check:

- the requests: the model name, the system message (the bank's
  instructions), the customer's opening line, the tools, max_tokens,
  temperature and seed;
- the conversation: a tool call comes back as an assistant message with that
  call and a tool message with its JSON result or error; a text answer gets
  the customer's reply as a user message; the trajectory in the result file;
- malformed answers are counted and never crash the run, and an episode ends
  as "malformed" after max_malformed of them in a row;
- retries on 503 and 429; a run that fails on a 500 (no retries) or on a port
  nobody listens on, with an error that names the endpoint;
- refusals: context_length_exceeded ends the episode as "context", any other
  400 as "failed" (reward 0, the error last in the trajectory), and the run
  goes on;
- the token columns come from the server's usage;
- the API key from --api-key-file or $OPENAI_API_KEY;
- the answer cache (--endpoint-cache): a replay with the server gone gives
  the same results and sends nothing, a replay that misses fails and names
  the folder, and a record rerun asks only for answers it does not have.

A tiny random checkpoint behind `fimi serve` is evaluated through the
endpoint and directly (`fimi eval --model`). Both runs must write results
that `fimi eval compare` reads, and both must record the same system turn.

The same scripted server also plays the other roles: the customer
(env.simulator = model; the oracle scores 1.0 against a customer that
answers what it is asked, and a customer that gives everything at once is
counted as drift; one GRPO step in process and on an env rank), the
bench's judge (--judge model: its agreement with the rubric judge for a
judge that always passes, always fails, or gives no verdict), the judge
check of fimi eval (eval.judge = model) and the bench's agent (fimi eval
bench --endpoint). Last, a served agent, customer and judge replayed from
their caches with every server stopped write byte-identical files.

Run: FIMI_BIN=build/cmd/fimi .venv/bin/python -m pytest -q tests/interop/test_served_eval.py
"""
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fimi_tiny import tiny_checkpoint  # same directory

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIMI_BIN = os.environ.get(
    "FIMI_BIN", os.path.join(os.environ.get("FIMI_BUILD_DIR", os.path.join(REPO_ROOT, "build")), "cmd", "fimi")
)
pytestmark = pytest.mark.skipif(not os.access(FIMI_BIN, os.X_OK), reason=f"fimi binary not found at {FIMI_BIN}")

BUDGET = ["--set", "grpo.max_turn_tokens=32", "--set", "grpo.max_episode_tokens=200", "--set", "grpo.max_malformed=3"]
ASK_ID = "Could you please share your customer id?"
WRONG_CREDENTIALS = {"customer_id": "NVC00000", "date_of_birth": "1990-01-01", "registered_mobile": "9000000000"}


def fimi(*args):
    return subprocess.run([FIMI_BIN, *map(str, args)], capture_output=True, text=True, timeout=120, check=True).stdout


def clean_env(**extra):
    """The environment without a key or a tracking server a developer may have set."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "MLFLOW_TRACKING_URI")}
    env.update(extra)
    return env


# ---- the fake server ----------------------------------------------------------------------------


def answer(content=None, calls=None, finish="stop", usage=None):
    """A 200 chat completion with one choice."""
    message = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = calls
    body = {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return 200, body


def call(name, arguments, call_id="call_x"):
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


TEXT = answer(ASK_ID)


class FakeServer:
    """A scripted chat-completions server. Each request takes the next entry of the script, then the
    default. An entry is (status, body), where body is a dict (sent as JSON) or str/bytes (sent as is),
    or a function (index, request) -> (status, body). Every request is recorded: requests[i] is
    {"path", "headers", "body", "answer"}."""

    def __init__(self, script=(), default=TEXT):
        self.script = list(script)
        self.default = default
        self.requests = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                status, body = fake.respond(self.path, dict(self.headers), raw)
                out = body if isinstance(body, bytes) else body.encode() if isinstance(body, str) else \
                    json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def respond(self, path, headers, raw):
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self.lock:
            i = len(self.requests)
            entry = self.script.pop(0) if self.script else self.default
            status, reply = entry(i, body) if callable(entry) else entry
            self.requests.append({"path": path, "headers": headers, "body": body, "answer": reply})
        return status, reply

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)


@contextlib.contextmanager
def fake_server(script=(), default=TEXT):
    s = FakeServer(script, default)
    try:
        yield s
    finally:
        s.close()


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- running fimi eval ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    d = tmp_path_factory.mktemp("served-tasks")
    fimi("env", "sample", "--family", "balance_enquiry", "--n", 2, "--seed", 9, "--out", d / "T.jsonl")
    lines = [line for line in (d / "T.jsonl").read_text().splitlines() if line.strip()]
    assert len(lines) == 2
    (d / "T1.jsonl").write_text(lines[0] + "\n")
    (d / "T2.jsonl").write_text(lines[1] + "\n")
    fimi("env", "sample", "--family", "balance_enquiry", "--n", 1, "--seed", 10, "--out", d / "other.jsonl")
    return {"both": d / "T.jsonl", "one": d / "T1.jsonl", "second": d / "T2.jsonl", "other": d / "other.jsonl",
            "rows": [json.loads(line) for line in lines]}


def run_eval(url, task_file, out, *extra, model="fake", env=None, concurrency=1, check=True):
    """`fimi eval --endpoint`: (the process, its results or None)."""
    args = [FIMI_BIN, "eval", "--endpoint", url, "--served-model", model, "--tasks", task_file, "--out", out,
            *(["--endpoint-concurrency", concurrency] if concurrency else []), *BUDGET, *extra]
    p = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=120, env=env or clean_env())
    if check:
        assert p.returncode == 0, p.stderr
    results = json.loads(out.read_text()) if p.returncode == 0 else None
    return p, results


def only_episode(results):
    assert len(results["episodes"]) == 1
    return results["episodes"][0]


def field(task, name):
    return next(f["value"] for f in task["fields"] if f["name"] == name)


def tool_call_of(text):
    """The call in a model turn's text, in fimi's syntax."""
    m = re.search(r"<tool_call>(.*)</tool_call>", text, re.S)
    assert m, text
    return json.loads(m.group(1))


# ---- the requests and the conversation ------------------------------------------------------------


def test_first_request(tasks, tmp_path):
    with fake_server() as s:
        _, results = run_eval(s.url, tasks["one"], tmp_path / "R.json")
    assert s.requests, "no request"
    assert all(r["path"] == "/v1/chat/completions" for r in s.requests)
    first = s.requests[0]["body"]
    assert first["model"] == "fake"
    messages = first["messages"]
    assert len(messages) == 2
    assert messages[0]["role"] == "system" and "Navadhan" in messages[0]["content"]
    assert messages[1]["role"] == "user" and messages[1]["content"]
    tools = first["tools"]
    assert isinstance(tools, list) and tools
    for t in tools:
        assert t["type"] == "function" and t["function"]["name"] and isinstance(t["function"]["parameters"], dict)
    assert "verify_customer" in [t["function"]["name"] for t in tools]
    assert first["max_tokens"] == 32
    assert first["temperature"] == 0
    assert isinstance(first["seed"], int) and not isinstance(first["seed"], bool)
    # Every request of the episode is one answer, and the opening line is the trajectory's first user turn.
    ep = only_episode(results)
    assert ep["turns"] == len(s.requests)
    users = [t for t in ep["trajectory"] if t["role"] == "user"]
    assert users[0]["text"] == messages[1]["content"]
    assert all(r["body"]["model"] == "fake" and r["body"]["messages"][:2] == messages for r in s.requests)


def test_tool_call_round_trip(tasks, tmp_path):
    account = field(tasks["rows"][0], "account_number")
    script = [answer(calls=[call("verify_customer", WRONG_CREDENTIALS)]),
              answer("Let me check.", calls=[call("get_account_balance", {"account_ids": [account]}, "call_y")])]
    with fake_server(script) as s:
        _, results = run_eval(s.url, tasks["one"], tmp_path / "R.json")
    assert len(s.requests) >= 3
    # After the first answer: the assistant's call (same id, same arguments) and the tool's error.
    after_first = s.requests[1]["body"]["messages"]
    assert len(after_first) == 4
    assistant, tool = after_first[-2:]
    assert assistant["role"] == "assistant"
    assert len(assistant["tool_calls"]) == 1
    sent = assistant["tool_calls"][0]
    assert sent["id"] == "call_x" and sent["type"] == "function"
    assert sent["function"]["name"] == "verify_customer"
    assert json.loads(sent["function"]["arguments"]) == WRONG_CREDENTIALS
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_x"
    error = json.loads(tool["content"])
    assert set(error) == {"error"} and error["error"], error
    # After the second: the text before the call is kept, the tool's result is the balance.
    after_second = s.requests[2]["body"]["messages"]
    assert after_second[:4] == after_first
    assistant, tool = after_second[-2:]
    assert assistant["content"] == "Let me check." and assistant["tool_calls"][0]["id"] == "call_y"
    assert tool["role"] == "tool" and tool["tool_call_id"] == "call_y"
    result = json.loads(tool["content"])
    assert "error" not in result
    assert [b["account_id"] for b in result["balances"]] == [account]

    ep = only_episode(results)
    traj = ep["trajectory"]
    assert [t["role"] for t in traj[:6]] == ["system", "user", "model", "tool", "model", "tool"]
    first_call = tool_call_of(traj[2]["text"])
    assert first_call == {"name": "verify_customer", "arguments": WRONG_CREDENTIALS}
    assert "error" in json.loads(traj[3]["text"])
    assert traj[4]["text"].startswith("Let me check.")
    assert tool_call_of(traj[4]["text"]) == {"name": "get_account_balance", "arguments": {"account_ids": [account]}}
    assert json.loads(traj[5]["text"])["result"] == result
    assert ep["tool_calls"] == 2 and ep["tool_errors"] == 1 and ep["malformed"] == 0


def test_text_answer_gets_the_customers_reply(tasks, tmp_path):
    with fake_server() as s:
        _, results = run_eval(s.url, tasks["one"], tmp_path / "R.json")
    assert len(s.requests) >= 2
    messages = s.requests[1]["body"]["messages"]
    assert len(messages) == 4
    assert messages[2] == {"role": "assistant", "content": ASK_ID}
    assert messages[3]["role"] == "user" and messages[3]["content"]
    ep = only_episode(results)
    roles = [t["role"] for t in ep["trajectory"]]
    assert roles[:4] == ["system", "user", "model", "user"]
    assert ep["trajectory"][2]["text"] == ASK_ID
    assert ep["trajectory"][3]["text"] == messages[3]["content"]
    assert ep["tool_calls"] == 0 and ep["malformed"] == 0


MALFORMED = {
    "not_json": (200, "this is not JSON {"),
    "no_choices": (200, {"choices": []}),
    "empty_message": answer(),
    "arguments_not_json": answer(calls=[call("verify_customer", "{not json")]),
    "two_calls": answer(calls=[call("verify_customer", WRONG_CREDENTIALS, "a"),
                               call("verify_customer", WRONG_CREDENTIALS, "b")]),
    "cut_at_max_tokens": answer("Could you please", finish="length"),
}


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_answer_is_counted(tasks, tmp_path, kind):
    with fake_server([MALFORMED[kind]]) as s:
        _, results = run_eval(s.url, tasks["one"], tmp_path / "R.json")
    ep = only_episode(results)
    assert ep["malformed"] == 1, (kind, ep)
    assert ep["end"] != "malformed" and not ep["failed"]
    assert ep["turns"] == len(s.requests) >= 2
    assert results["summary"]["dialog"]["malformed_turns"] == 1
    # The next request is a conversation a server accepts: every assistant message says something or calls.
    for m in s.requests[1]["body"]["messages"]:
        if m["role"] == "assistant":
            assert m.get("content") or m.get("tool_calls"), m
            for c in m.get("tool_calls") or []:
                assert isinstance(json.loads(c["function"]["arguments"]), dict)


def test_malformed_in_a_row_ends_the_episode(tasks, tmp_path):
    m = MALFORMED
    # Two malformed, a good one (the count in a row starts again), then three: the end.
    script = [m["not_json"], m["no_choices"], TEXT, m["empty_message"], m["arguments_not_json"], m["two_calls"]]
    with fake_server(script) as s:
        p, results = run_eval(s.url, tasks["one"], tmp_path / "R.json")
    assert p.returncode == 0
    assert len(s.requests) == 6
    ep = only_episode(results)
    assert ep["end"] == "malformed" and not ep["failed"]
    assert ep["malformed"] == 5 and ep["turns"] == 6
    assert results["summary"]["dialog"]["ends"] == {"malformed": 1}


# ---- transport, retries and refusals -----------------------------------------------------------------


def test_retries_on_503_and_429(tasks, tmp_path):
    script = [(503, "busy"), (429, {"error": {"message": "slow down", "type": "rate_limit_error"}}), TEXT]
    with fake_server(script) as s:
        start = time.monotonic()
        _, results = run_eval(s.url, tasks["one"], tmp_path / "R.json", "--endpoint-retries", 4)
        took = time.monotonic() - start
    # The first turn took three requests, the same body each time.
    assert len(s.requests) >= 3
    assert s.requests[0]["body"] == s.requests[1]["body"] == s.requests[2]["body"]
    assert len(s.requests) > 3 and len(s.requests[3]["body"]["messages"]) == 4
    ep = only_episode(results)
    assert ep["turns"] == len(s.requests) - 2
    assert not ep["failed"] and ep["trajectory"][2]["text"] == ASK_ID
    assert took >= 1.4, took  # waited 0.5 s, then 1 s


def test_a_server_error_without_retries_fails_the_run(tasks, tmp_path):
    with fake_server(default=(500, "internal trouble")) as s:
        p, _ = run_eval(s.url, tasks["one"], tmp_path / "R.json", "--endpoint-retries", 0, check=False)
    assert p.returncode != 0
    assert len(s.requests) == 1
    assert f"{s.url}/chat/completions" in p.stderr and "500" in p.stderr, p.stderr


def test_an_unreachable_endpoint_fails_the_run(tasks, tmp_path):
    url = f"http://127.0.0.1:{closed_port()}/v1"
    p, _ = run_eval(url, tasks["one"], tmp_path / "R.json", "--endpoint-retries", 1, check=False)
    assert p.returncode != 0
    assert url in p.stderr, p.stderr


def test_context_length_refusal_ends_the_episode(tasks, tmp_path):
    refusal = (400, {"error": {"message": "too long", "type": "invalid_request_error", "param": "messages",
                               "code": "context_length_exceeded"}})
    with fake_server([TEXT, refusal]) as s:
        _, results = run_eval(s.url, tasks["both"], tmp_path / "R.json")
    first, second = results["episodes"]
    assert first["end"] == "context" and first["failed"] is False
    assert first["turns"] == 1
    assert [t["role"] for t in first["trajectory"]] == ["system", "user", "model", "user"]
    # The other episode went on as usual.
    assert second["end"] not in ("context", "failed") and second["turns"] >= 1
    assert results["summary"]["dialog"]["failed_episodes"] == 0


def test_another_refusal_fails_the_episode(tasks, tmp_path):
    refusal = (400, {"error": {"message": "temperature is out of range", "type": "invalid_request_error",
                               "param": "temperature", "code": "invalid_value"}})
    with fake_server([TEXT, refusal]) as s:
        _, results = run_eval(s.url, tasks["both"], tmp_path / "R.json")
    assert (tmp_path / "R.md").exists()
    first, second = results["episodes"]
    assert first["end"] == "failed" and first["failed"] is True
    assert first["reward"]["total"] == 0
    last = first["trajectory"][-1]
    assert last["role"] == "error"
    assert "temperature is out of range" in last["text"] and s.url in last["text"] and "400" in last["text"]
    assert second["end"] != "failed" and second["failed"] is False and second["reward"]["total"] > 0
    assert results["summary"]["dialog"]["failed_episodes"] == 1


def test_usage_gives_the_token_columns(tasks, tmp_path):
    def with_usage(i, request):
        usage = {"prompt_tokens": 100 + 17 * i, "completion_tokens": 3 + i, "total_tokens": 103 + 18 * i}
        if i % 2:
            usage["prompt_tokens_details"] = {"cached_tokens": 40 + i}
        return answer(ASK_ID, usage=usage)

    with fake_server(default=with_usage) as s:
        _, results = run_eval(s.url, tasks["one"], tmp_path / "R.json")
    usages = [r["answer"]["usage"] for r in s.requests]
    assert len(usages) >= 3
    generated = sum(u["completion_tokens"] for u in usages)
    tokens = sum(u["prompt_tokens"] - u.get("prompt_tokens_details", {}).get("cached_tokens", 0)
                 + u["completion_tokens"] for u in usages)
    ep = only_episode(results)
    assert ep["generated_tokens"] == generated
    assert ep["tokens"] == tokens
    dialog = results["summary"]["dialog"]
    assert dialog["generated_tokens"] == generated and dialog["tokens"] == tokens


def test_api_key(tasks, tmp_path):
    key = secrets.token_urlsafe(24)
    key_file = tmp_path / "key"
    key_file.write_text(f"  {key}  \nnot the key\n")
    key_file.chmod(0o600)
    with fake_server() as s:
        run_eval(s.url, tasks["one"], tmp_path / "a.json", "--api-key-file", key_file)
        from_file = [r["headers"].get("Authorization") for r in s.requests]
        s.requests.clear()
        run_eval(s.url, tasks["one"], tmp_path / "b.json", env=clean_env(OPENAI_API_KEY=key))
        from_env = [r["headers"].get("Authorization") for r in s.requests]
        s.requests.clear()
        # The file wins over the environment.
        run_eval(s.url, tasks["one"], tmp_path / "c.json", "--api-key-file", key_file,
                 env=clean_env(OPENAI_API_KEY="not-" + key))
        both = [r["headers"].get("Authorization") for r in s.requests]
        s.requests.clear()
        run_eval(s.url, tasks["one"], tmp_path / "d.json")
        neither = [r["headers"].get("Authorization") for r in s.requests]
    for seen in (from_file, from_env, both):
        assert seen and set(seen) == {f"Bearer {key}"}, seen
    assert neither and set(neither) == {None}, neither


# ---- the cache ----------------------------------------------------------------------------------------


def by_request(i, request):
    """Answers that depend only on the request: a call first, then questions, with usage."""
    n = len(request["messages"])
    usage = {"prompt_tokens": 50 * n, "completion_tokens": 5 + n % 3,
             "prompt_tokens_details": {"cached_tokens": 10 * n}}
    if n == 2:
        return answer(calls=[call("verify_customer", WRONG_CREDENTIALS)], usage=usage)
    return answer(ASK_ID, usage=usage)


def without_timing(results):
    r = json.loads(json.dumps(results))
    del r["seconds"]
    del r["summary"]["episodes_per_second"]
    return r


def cache_files(cache):
    return sorted(p for p in cache.rglob("*.json"))


def test_cache_replay_is_offline_and_equal(tasks, tmp_path):
    cache = tmp_path / "cache"
    with fake_server(default=by_request) as s:
        url = s.url
        _, recorded = run_eval(url, tasks["both"], tmp_path / "A.json", "--endpoint-cache", cache, concurrency=None)
        sent = len(s.requests)
    assert sent >= 4
    assert len(cache_files(cache)) == sent
    assert "seconds" in recorded and "episodes_per_second" in recorded["summary"]
    # The server is gone: the same command in replay mode answers from the cache.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", s.port), timeout=2).close()
    _, replayed = run_eval(url, tasks["both"], tmp_path / "A.json", "--endpoint-cache", cache,
                           "--endpoint-cache-mode", "replay", concurrency=None)
    assert without_timing(replayed) == without_timing(recorded)
    assert len(s.requests) == sent
    assert len(cache_files(cache)) == sent


def test_cache_replay_miss_fails(tasks, tmp_path):
    cache = tmp_path / "cache"
    with fake_server(default=by_request) as s:
        run_eval(s.url, tasks["one"], tmp_path / "A.json", "--endpoint-cache", cache)
        sent = len(s.requests)
        p, _ = run_eval(s.url, tasks["other"], tmp_path / "B.json", "--endpoint-cache", cache,
                        "--endpoint-cache-mode", "replay", check=False)
        assert len(s.requests) == sent  # replay never asks the server, even when it is up
    assert p.returncode != 0
    assert str(cache) in p.stderr, p.stderr
    assert not (tmp_path / "B.json").exists()


def test_cache_record_asks_only_for_what_it_lacks(tasks, tmp_path):
    cache = tmp_path / "cache"
    with fake_server(default=by_request) as s:
        _, first = run_eval(s.url, tasks["one"], tmp_path / "A.json", "--endpoint-cache", cache)
        sent = len(s.requests)
        assert sent >= 2
        # The same run again: every answer is in the cache.
        _, again = run_eval(s.url, tasks["one"], tmp_path / "B.json", "--endpoint-cache", cache,
                            "--endpoint-cache-mode", "record")
        assert len(s.requests) == sent
        assert without_timing(again) == without_timing(first)
        # Both tasks: only the second task's episode reaches the server.
        _, both = run_eval(s.url, tasks["both"], tmp_path / "C.json", "--endpoint-cache", cache)
        new = s.requests[sent:]
    second_opening = both["episodes"][1]["trajectory"][1]["text"]
    first_opening = both["episodes"][0]["trajectory"][1]["text"]
    assert first_opening != second_opening
    assert new and all(r["body"]["messages"][1]["content"] == second_opening for r in new)
    assert len(new) == both["episodes"][1]["turns"]
    assert both["episodes"][0] == first["episodes"][0]
    assert len(cache_files(cache)) == sent + len(new)


# ---- against fimi serve --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny random checkpoint (fimi_tiny.py)."""
    return tiny_checkpoint(FIMI_BIN, tmp_path_factory.mktemp("served-ckpt"))


@contextlib.contextmanager
def fimi_serve(model, log_path, *extra):
    """`fimi serve` on a port the kernel picks: (base URL, served model name); stopped with SIGTERM (exit 0)."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen([FIMI_BIN, "serve", "--model", str(model), "--port", "0", *map(str, extra)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log, env=clean_env())
        try:
            deadline = time.monotonic() + 60
            while True:
                m = re.search(r'listening on (http://127\.0\.0\.1:\d+/v1) \(model "([^"]*)"', log_path.read_text())
                if m:
                    break
                assert proc.poll() is None, f"fimi serve exited ({proc.returncode}): {log_path.read_text()}"
                assert time.monotonic() < deadline, "fimi serve did not start"
                time.sleep(0.05)
            yield m.group(1), m.group(2)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError(f"fimi serve ignored SIGTERM: {log_path.read_text()}")
    assert rc == 0, log_path.read_text()


def test_against_fimi_serve(tasks, checkpoint, tmp_path):
    with fimi_serve(checkpoint, tmp_path / "serve.log", "--slots", 1) as (url, name):
        assert name == "model"
        _, served = run_eval(url, tasks["both"], tmp_path / "served.json", model=name, concurrency=None)
    p = subprocess.run([FIMI_BIN, "eval", "--model", str(checkpoint), "--tasks", str(tasks["both"]), "--out",
                        str(tmp_path / "direct.json"), *BUDGET], capture_output=True, text=True, timeout=120,
                       env=clean_env())
    assert p.returncode == 0, p.stderr
    direct = json.loads((tmp_path / "direct.json").read_text())
    assert [e["task_id"] for e in served["episodes"]] == [e["task_id"] for e in direct["episodes"]]
    assert len(served["episodes"]) == 2
    for s_ep, d_ep in zip(served["episodes"], direct["episodes"]):
        assert s_ep["env_seed"] == d_ep["env_seed"]
        assert s_ep["turns"] >= 1 and s_ep["generated_tokens"] > 0 and s_ep["tokens"] > 0
        assert not s_ep["failed"], s_ep["trajectory"][-1]
        system = s_ep["trajectory"][0]
        assert system["role"] == "system" and "Navadhan" in system["text"]
        assert system == d_ep["trajectory"][0]
        assert s_ep["trajectory"][1] == d_ep["trajectory"][1]  # the customer's opening line
    compare = subprocess.run([FIMI_BIN, "eval", "compare", str(tmp_path / "direct.json"),
                              str(tmp_path / "served.json"), "--out", str(tmp_path / "compare.json")],
                             capture_output=True, text=True, timeout=60, env=clean_env())
    assert compare.returncode == 0, compare.stderr
    assert "overall" in compare.stdout
    assert (tmp_path / "compare.json").exists()


def test_a_budget_ends_the_episode_before_the_environment(tasks, tmp_path):
    """The answer that reaches grpo.max_episode_tokens (or the last allowed malformed one) ends the episode
    as the rollout engine ends it: the environment never runs it, it is the trajectory's last turn."""
    acct = json.loads(Path(tasks["one"]).read_text().splitlines()[0])["fields"][3]["value"]
    over = answer(calls=[call("get_account_balance", {"account_ids": [acct]})],
                  usage={"prompt_tokens": 10, "completion_tokens": 250})
    with fake_server([over]) as s:
        _, results = run_eval(s.url, tasks["one"], tmp_path / "R.json")
    ep = only_episode(results)
    roles = [t["role"] for t in ep["trajectory"]]
    assert ep["end"] == "token_budget" and roles == ["system", "user", "model"], (ep["end"], roles)
    assert ep["tool_calls"] == 1 and ep["reward"]["seq"] == 0  # counted as a call, never run
    m = MALFORMED
    with fake_server([m["not_json"], m["no_choices"], m["empty_message"]]) as s:
        _, results = run_eval(s.url, tasks["one"], tmp_path / "M.json")
    ep = only_episode(results)
    assert ep["end"] == "malformed" and [t["role"] for t in ep["trajectory"]][-1] == "model"
    assert sum(t["role"] == "model" for t in ep["trajectory"]) == 3 and len(s.requests) == 3


# ---- a served model as the customer and as the judge ------------------------------------------------


def customer_answers(task, drift=False):
    """A scripted customer for `task`: the value of the field the agent's last message names (as the
    rule-based simulator reads it, by the field's words), Yes to a confirmation, and ###STOP### once
    the agent sums up. drift: the first reply gives every field at once (a reveal nobody asked for)."""
    fields = task["fields"]

    def respond(i, body):
        asked = body["messages"][-1]["content"].lower()
        if drift and i == 0:
            return answer(" ".join(f["value"] for f in fields))
        if "confirm" in asked:
            return answer("Yes, please go ahead.")
        for f in fields:
            if f["name"].replace("_", " ") in asked or f["name"] in asked:
                return answer(f"My {f['name'].replace('_', ' ')} is {f['value']}.")
        return answer("Thank you, that is all. ###STOP###")
    return respond


def test_a_model_plays_the_customer(tasks, tmp_path):
    task = tasks["rows"][0]
    customer = ["--set", "env.simulator=model", "--set", "env.simulator_model=customer"]
    with fake_server(default=(200, {})) as s:
        s.default = customer_answers(task)  # every request: the scripted customer
        p = subprocess.run([FIMI_BIN, "eval", "--agent", "oracle", "--tasks", tasks["one"], "--out",
                            tmp_path / "O.json", "--set", f"env.simulator_endpoint={s.url}", *customer],
                           capture_output=True, text=True, timeout=120, env=clean_env())
    assert p.returncode == 0, p.stderr
    ep = only_episode(json.loads((tmp_path / "O.json").read_text()))
    first = s.requests[0]["body"]
    assert first["model"] == "customer" and first["messages"][0]["role"] == "system"
    assert task["fields"][0]["value"] in first["messages"][0]["content"]  # what the customer knows
    assert first["messages"][1]["role"] == "assistant"  # the customer's opening line
    assert ep["reward"]["simulator"] == "model" and ep["reward"]["simulator_drift"] == 0
    assert ep["end"] == "stop" and ep["reward"]["total"] == 1.0, (ep["end"], ep["reward"])
    assert "simulator drift" in p.stdout
    # A customer that gives everything at once drifts; the episode is still scored.
    with fake_server(default=(200, {})) as s:
        s.default = customer_answers(task, drift=True)
        p = subprocess.run([FIMI_BIN, "eval", "--agent", "oracle", "--tasks", tasks["one"], "--out",
                            tmp_path / "D.json", "--set", f"env.simulator_endpoint={s.url}", *customer],
                           capture_output=True, text=True, timeout=120, env=clean_env())
    results = json.loads((tmp_path / "D.json").read_text())
    assert only_episode(results)["reward"]["simulator_drift"] >= len(task["fields"]) - 1
    assert results["summary"]["dialog"]["simulator"]["drifted_episodes"] == 1


def test_a_model_judges_the_bench(tasks, tmp_path):
    fimi("eval", "bench", "build", "--tasks", tasks["one"], "--out", tmp_path / "cases.jsonl", "--adversarial", 0)
    verdicts = {"pass": answer('{"verdict": "pass", "reason": "stated"}'),
                "fail": answer('Here: {"verdict": "fail", "reason": "never said"}'),
                "mute": answer("I cannot tell.")}
    runs = {}
    for name, verdict in verdicts.items():
        (tmp_path / name).mkdir()
        with fake_server(default=verdict) as s:
            p = subprocess.run([FIMI_BIN, "eval", "bench", "--agent", "oracle", "--cases", tmp_path / "cases.jsonl",
                                "--attempts", "2", "--out", tmp_path / name / "bench.json", "--judge", "model",
                                "--judge-endpoint", s.url, "--judge-model", "judge"],
                               capture_output=True, text=True, timeout=120, env=clean_env())
        assert p.returncode == 0, p.stderr
        runs[name] = (json.loads((tmp_path / name / "bench.json").read_text()), len(s.requests))
    passed, asked = runs["pass"]
    agreement = passed["judge_agreement"]
    # The oracle passes the rubric judge; a judge that always passes agrees on both attempts.
    assert agreement["attempts"] == 2 and agreement["both_pass"] == 2 and agreement["observed_agreement"] == 1
    assert agreement["assertions"] == asked > 0 and passed["judge"] == "model"
    failed, _ = runs["fail"]
    assert failed["judge_agreement"]["rubric_only"] == 2 and failed["judge_agreement"]["observed_agreement"] == 0
    assert failed["summary"]["overall"]["mean"] == 0
    mute, _ = runs["mute"]
    # No verdict: the first assertion of each attempt fails the gate, and is counted as unreadable.
    assert mute["judge_agreement"]["unreadable"] == mute["judge_agreement"]["assertions"] == 2


def grpo_step(tmp_path, url, *launch, extra=()):
    """One tiny GRPO step (a random model, 2 tasks x 2 rollouts) whose customer the scripted server plays."""
    d = tmp_path / "grpo"
    d.mkdir()
    init = tiny_checkpoint(FIMI_BIN, d, n=2, seed=1)
    args = [*launch, FIMI_BIN, "train", "--config", os.path.join(REPO_ROOT, "configs", "tiny-cpu-grpo.ini"),
            "--set", f"train.init={init}", "--set", f"env.tasks={d / 'bal.jsonl'}", "--set", "env.val_tasks=",
            "--set", f"train.out_dir={d / 'run'}", "--set", "train.steps=1", "--set", "train.progress=false",
            "--set", "grpo.tasks_per_step=2", "--set", "grpo.group_size=2", "--set", "train.micro_batch=4",
            "--set", "train.grad_accum=1", "--set", "grpo.max_turn_tokens=8", "--set", "grpo.max_episode_tokens=24",
            "--set", "train.save_every=0", "--set", "train.eval_every=0", "--set", "env.simulator=model",
            "--set", f"env.simulator_endpoint={url}", "--set", "env.simulator_model=customer", *extra]
    # Open MPI keeps its own allocations until exit: a sanitized fimi reports them without these
    # suppressions (tests/mpi/lsan-openmpi.supp says why); fimi's own leaks are still reported.
    supp = os.path.join(REPO_ROOT, "tests", "mpi", "lsan-openmpi.supp")
    env = clean_env(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                    ASAN_OPTIONS="fast_unwind_on_malloc=0", LSAN_OPTIONS=f"suppressions={supp}")
    return subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=300, env=env)


def test_grpo_with_a_model_customer(tmp_path):
    """GRPO's episodes, in process, ask the served customer for every customer turn."""
    with fake_server(default=answer("My customer id is NVC10001.")) as s:
        p = grpo_step(tmp_path, s.url)
    assert p.returncode == 0, p.stderr
    assert len(s.requests) > 0 and all(r["body"]["model"] == "customer" for r in s.requests)
    assert s.requests[0]["body"]["messages"][0]["role"] == "system"


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="no mpirun")
def test_grpo_env_rank_with_a_model_customer(tmp_path):
    """The same with the episodes on an env rank (mpirun -np 2, dist.env_ranks = 1)."""
    with fake_server(default=answer("My customer id is NVC10001.")) as s:
        p = grpo_step(tmp_path, s.url, "mpirun", "--oversubscribe", "-np", "2", "-x", "OMP_NUM_THREADS=1",
                      extra=("--set", "dist.env_ranks=1"))
    assert p.returncode == 0, p.stderr
    assert len(s.requests) > 0


def test_a_refused_client_stops_the_run(tasks, tmp_path):
    """401, 403 and 404 refuse the setting (key, model name, URL), not a request: the run stops at once
    with the endpoint and the status, and nothing is cached; a model customer every episode fails on
    fails the run too (the results are still written)."""
    missing = (404, {"error": {"message": "The model fake does not exist", "code": "model_not_found"}})
    with fake_server(default=missing) as s:
        p, _ = run_eval(s.url, tasks["one"], tmp_path / "R.json", "--endpoint-cache", tmp_path / "cache", check=False)
    assert p.returncode != 0 and s.url in p.stderr and "404" in p.stderr and len(s.requests) == 1
    assert not any((tmp_path / "cache").rglob("*.json"))
    with fake_server(default=missing) as s:
        p = subprocess.run([FIMI_BIN, "eval", "--agent", "oracle", "--tasks", tasks["one"], "--out", tmp_path / "C.json",
                            "--set", "env.simulator=model", "--set", f"env.simulator_endpoint={s.url}",
                            "--set", "env.simulator_model=wrong"], capture_output=True, text=True, timeout=120,
                           env=clean_env())
    assert p.returncode != 0 and "every episode failed" in p.stderr and (tmp_path / "C.json").exists()


@pytest.mark.parametrize("text", ['Checking. <tool_call>{"name":"verify_customer","arguments":%s}</tool_call>',
                                  '{"name": "verify_customer", "arguments": %s}'], ids=["tagged", "bare"])
def test_a_call_in_the_text_is_a_call(tasks, tmp_path, text):
    """A server without a tool parser returns the call as text, with its tags or (decoded without special
    tokens) without: it is played as the call, and the history carries it as one."""
    with fake_server([answer(text % json.dumps(WRONG_CREDENTIALS)), TEXT]) as s:
        _, results = run_eval(s.url, tasks["one"], tmp_path / "R.json")
    ep = only_episode(results)
    assert ep["tool_calls"] >= 1 and ep["malformed"] == 0
    model_turns = [t["text"] for t in ep["trajectory"] if t["role"] == "model"]
    assert model_turns[0].endswith('<tool_call>{"name":"verify_customer","arguments":%s}</tool_call>'
                                   % json.dumps(WRONG_CREDENTIALS, separators=(",", ":")))
    history = s.requests[1]["body"]["messages"]
    assert history[-2]["tool_calls"][0]["function"]["name"] == "verify_customer"
    assert history[-1]["role"] == "tool" and history[-1]["name"] == "verify_customer"


def test_a_replay_is_byte_identical(tasks, tmp_path):
    """An evaluation with a served agent and a served customer, and a bench judged by a served judge, each
    recorded into its cache and replayed with every server gone: byte-identical result files
    (eval.timing = false keeps the wall time out of them)."""
    task = tasks["rows"][0]
    cases = tmp_path / "cases.jsonl"
    fimi("eval", "bench", "build", "--tasks", tasks["one"], "--out", cases, "--adversarial", 0)

    def run(mode, agent_url, customer_url, judge_url, out):
        out.mkdir()
        timing = ["--set", "eval.timing=false"]
        customer = ["--set", "env.simulator=model", "--set", f"env.simulator_endpoint={customer_url}",
                    "--set", "env.simulator_model=customer", "--set", f"env.simulator_cache={tmp_path / 'c-cache'}",
                    "--set", f"env.simulator_cache_mode={mode}"]
        evaluation = [FIMI_BIN, "eval", "--endpoint", agent_url, "--served-model", "agent", "--tasks", tasks["one"],
                      "--out", out / "eval.json", "--endpoint-cache", tmp_path / "a-cache", "--endpoint-cache-mode",
                      mode, *BUDGET, *timing, *customer]
        bench = [FIMI_BIN, "eval", "bench", "--agent", "oracle", "--cases", cases, "--attempts", "1", "--out",
                 out / "bench.json", "--judge", "model", "--judge-endpoint", judge_url, "--judge-model", "judge",
                 "--judge-cache", tmp_path / "j-cache", "--judge-cache-mode", mode, *timing]
        for args in (evaluation, bench):
            p = subprocess.run(list(map(str, args)), capture_output=True, text=True, timeout=120, env=clean_env())
            assert p.returncode == 0, p.stderr

    agent_script = [answer(calls=[call("verify_customer", WRONG_CREDENTIALS)]), TEXT, TEXT]
    with fake_server(agent_script) as agent, fake_server(default=(200, {})) as customer, \
            fake_server(default=answer('{"verdict": "pass", "reason": "said"}')) as judge:
        customer.default = customer_answers(task)
        run("record", agent.url, customer.url, judge.url, tmp_path / "run")
        urls = (agent.url, customer.url, judge.url)
    assert all(len(s.requests) > 0 for s in (agent, customer, judge))
    (tmp_path / "run").rename(tmp_path / "recorded")  # the replay writes to the same paths (the files name them)
    run("replay", *urls, tmp_path / "run")
    for name in ("eval.json", "eval.md", "bench.json", "bench.md", "bench.episodes.json"):
        assert (tmp_path / "recorded" / name).read_bytes() == (tmp_path / "run" / name).read_bytes(), name


def test_a_model_decides_the_judge_check(tmp_path):
    """eval.judge = model: the judge check of every episode whose task declares it is put to the served
    judge, one request per assertion; the reward is recomputed, the rules' value kept, and the summary
    gives the two judges' agreement."""
    tasks = tmp_path / "judged.jsonl"
    fimi("env", "sample", "--family", "investment_advice", "--n", 2, "--seed", 3, "--out", tasks)
    n_assertions = sum(len(json.loads(line)["assertions"]) for line in tasks.read_text().splitlines() if line.strip())
    runs = {}
    for name, verdict in (("pass", '{"verdict": "pass", "reason": "ok"}'), ("fail", '{"verdict": "fail"}')):
        with fake_server(default=answer(verdict)) as s:
            p = subprocess.run([FIMI_BIN, "eval", "--agent", "oracle", "--tasks", tasks, "--out", tmp_path / f"{name}.json",
                                "--set", "eval.judge=model", "--set", f"eval.judge_endpoint={s.url}",
                                "--set", "eval.judge_model=judge"], capture_output=True, text=True, timeout=120,
                               env=clean_env())
        assert p.returncode == 0, p.stderr
        runs[name] = (json.loads((tmp_path / f"{name}.json").read_text()), len(s.requests), p.stdout)
    passed, asked, stdout = runs["pass"]
    assert asked == n_assertions and "Cohen's kappa" in stdout
    for e in passed["episodes"]:
        assert e["reward"]["judge_by"] == "model" and e["reward"]["judge"] == 1 and e["reward"]["judge_rules"] == 1
        assert e["reward"]["total"] == 1
    assert passed["summary"]["dialog"]["judge"]["both_pass"] == 2
    failed, asked, _ = runs["fail"]
    assert asked == n_assertions  # every assertion is asked, whatever the answers
    for e in failed["episodes"]:
        assert e["reward"]["judge"] == 0 and e["reward"]["judge_rules"] == 1 and e["reward"]["total"] < 1
    assert failed["summary"]["dialog"]["judge"]["rules_only"] == 2


def test_the_bench_with_a_served_agent(tasks, tmp_path):
    """`fimi eval bench --endpoint`: the served agent plays every case through the harness, then the gates
    judge it (a model that only asks for the customer id passes no case)."""
    fimi("eval", "bench", "build", "--tasks", tasks["one"], "--out", tmp_path / "cases.jsonl", "--adversarial", 0)
    with fake_server() as s:
        p = subprocess.run([FIMI_BIN, "eval", "bench", "--endpoint", s.url, "--served-model", "fake", "--cases",
                            tmp_path / "cases.jsonl", "--attempts", "2", "--out", tmp_path / "bench.json", *BUDGET],
                           capture_output=True, text=True, timeout=120, env=clean_env())
    assert p.returncode == 0, p.stderr
    bench = json.loads((tmp_path / "bench.json").read_text())
    cases = [line for line in (tmp_path / "cases.jsonl").read_text().splitlines() if line.strip()]
    assert bench["summary"]["overall"]["attempts"] == 2 * len(cases) and bench["summary"]["overall"]["mean"] == 0
    assert len(s.requests) > 0 and s.requests[0]["body"]["model"] == "fake"
