"""`fimi serve` (a checkpoint behind the OpenAI chat-completions API) against the official `openai` Python SDK.

A tiny random checkpoint is made once per module (`fimi env sample`,
`fimi env transcripts`, `fimi tokenizer train`, `fimi init --preset tiny`);
its text is gibberish, but every answer must be well-formed. Prompts are the
system message and turns of a generated balance-enquiry transcript. The SDK
lists the models and asks for completions: plain, greedy and seeded
(deterministic, the prefix cache reported in usage), several choices (n),
streamed (the same text as unstreamed, one finish_reason, usage last), cut
by stop strings, with tools (a call or plain text, never an error) and with
a tool-call history; refused parameters, unknown models, a wrong API key
and a prompt over --context come back as the SDK's exceptions with the
right param and code. Raw HTTP (http.client) checks what the SDK never
sends: a wrong method (405), a body that is not JSON (400), one over
--max-body-bytes (413), an unknown path (404), clients that hang up
mid-answer. 16 threads share a server with 4 slots. Every server is stopped
with SIGTERM and must exit 0 with no sanitizer report in its log.

The binaries: FIMI_BIN (required) and, when FIMI_ASAN_BIN names an
executable (a build with -fsanitize=address,undefined), every test runs
against it too (ASAN_OPTIONS=detect_leaks=1).

Run: FIMI_BIN=build/cmd/fimi .venv/bin/python -m pytest -q tests/interop/test_serve_openai.py
     FIMI_BIN=build/cmd/fimi FIMI_ASAN_BIN=build-asan/cmd/fimi .venv/bin/python -m pytest -q \
         tests/interop/test_serve_openai.py
"""
import concurrent.futures
import contextlib
import http.client
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time

import pytest

openai = pytest.importorskip("openai", reason="the openai Python SDK (pip install openai) is not installed")
from openai import OpenAI  # noqa: E402

from fimi_tiny import tiny_checkpoint  # noqa: E402  (same directory)

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIMI_BIN = os.environ.get(
    "FIMI_BIN", os.path.join(os.environ.get("FIMI_BUILD_DIR", os.path.join(REPO_ROOT, "build")), "cmd", "fimi")
)
FIMI_ASAN_BIN = os.environ.get("FIMI_ASAN_BIN", "")
pytestmark = pytest.mark.skipif(not os.access(FIMI_BIN, os.X_OK), reason=f"fimi binary not found at {FIMI_BIN}")

SANITIZER_REPORTS = ("AddressSanitizer", "LeakSanitizer", "runtime error", "ThreadSanitizer")
SERVED_NAME = "fimi-tiny"
SLOTS = 4


def _binaries():
    params = [pytest.param((FIMI_BIN, False), id="fimi")]
    if FIMI_ASAN_BIN:
        missing = not os.access(FIMI_ASAN_BIN, os.X_OK)
        skip = pytest.mark.skipif(missing, reason=f"FIMI_ASAN_BIN not found at {FIMI_ASAN_BIN}")
        params.append(pytest.param((FIMI_ASAN_BIN, True), id="asan", marks=skip))
    return params


def fimi(*args):
    return subprocess.run([FIMI_BIN, *map(str, args)], capture_output=True, text=True, timeout=300, check=True).stdout


class Server:
    """One `fimi serve` process on a port the kernel picks; its log goes to a file (never a full pipe)."""

    def __init__(self, binary, model, log_dir, *extra, env=None):
        path, sanitized = binary
        self.log_path = log_dir / f"serve-{secrets.token_hex(4)}.log"
        args = [path, "serve", "--model", str(model), "--port", "0", *map(str, extra)]
        full_env = {k: v for k, v in os.environ.items() if k != "FIMI_SERVE_API_KEY"}
        if sanitized:
            full_env.update(ASAN_OPTIONS="detect_leaks=1", UBSAN_OPTIONS="print_stacktrace=1")
        full_env.update(env or {})
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
                                     env=full_env)
        self.stopped = False
        self.port, self.model_name = self._wait_for_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def _wait_for_port(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = re.search(r'listening on http://127\.0\.0\.1:(\d+)/v1 \(model "([^"]*)"', self.log_path.read_text())
            if m:
                return int(m.group(1)), m.group(2)
            if self.proc.poll() is not None:
                self.log.close()
                raise AssertionError(f"server exited ({self.proc.returncode}): {self.log_path.read_text()}")
            time.sleep(0.05)
        raise AssertionError("server did not start")

    def client(self, api_key="unused", **kw):
        return OpenAI(base_url=self.base_url, api_key=api_key, max_retries=0, timeout=120, **kw)

    def stop(self):
        """SIGTERM: the server must exit 0, and its log must hold no sanitizer report."""
        if self.stopped:
            return
        self.stopped = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"server ignored SIGTERM: {self.log_path.read_text()}")
        finally:
            self.log.close()
        log = self.log_path.read_text()
        assert rc == 0, f"exit {rc}: {log}"
        assert "SIGTERM, stopping" in log, log
        for report in SANITIZER_REPORTS:
            assert report not in log, log

    def raw(self, method, path, body=None, headers=None):
        """A raw request: (status, headers, parsed JSON body or None)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            h = {"Content-Type": "application/json"} if body is not None else {}
            h.update(headers or {})
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            raw = r.read()
            return r.status, r.headers, json.loads(raw) if raw else None
        finally:
            conn.close()


@contextlib.contextmanager
def running(binary, checkpoint, log_dir, *extra, env=None):
    s = Server(binary, checkpoint["model"], log_dir, *extra, env=env)
    try:
        yield s
    finally:
        s.stop()


def openai_history(messages):
    """A transcript's messages as an OpenAI conversation: each tool call gets an id its result answers."""
    out, n = [], 0
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            n += 1
            fn = m["tool_calls"][0]["function"]
            args = fn["arguments"] if isinstance(fn["arguments"], str) else json.dumps(fn["arguments"])
            out.append({"role": "assistant", "content": m.get("content") or None, "tool_calls": [
                {"id": f"call_{n}", "type": "function", "function": {"name": fn["name"], "arguments": args}}]})
        elif m["role"] == "tool":
            result = json.loads(m["content"])  # {"name": ..., "result": ...}: the tool's output is the result
            out.append({"role": "tool", "tool_call_id": f"call_{n}",
                        "content": json.dumps(result.get("result", result))})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve-ckpt")
    tiny_checkpoint(FIMI_BIN, d)
    rows = [json.loads(line) for line in (d / "bal-sft.jsonl").read_text().splitlines() if line.strip()]
    messages = rows[0]["messages"]
    assert messages[0]["role"] == "system" and messages[1]["role"] == "user"
    call_at = next(i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls"))
    users = [m["content"] for r in rows for m in r["messages"] if m["role"] == "user"]
    return {
        "model": d / "model",
        "system": messages[0]["content"],
        "user": messages[1]["content"],
        "users": users,
        # the conversation up to and including the first tool result
        "history": openai_history(messages[:call_at + 2]),
    }


@pytest.fixture(scope="module", params=_binaries())
def binary(request):
    return request.param


@pytest.fixture(scope="module")
def server(binary, checkpoint, tmp_path_factory):
    s = Server(binary, checkpoint["model"], tmp_path_factory.mktemp("serve-log"), "--served-model-name", SERVED_NAME,
               "--slots", SLOTS, "--max-concurrent", 64)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    c = server.client()
    yield c
    c.close()


def chat(checkpoint, user=None):
    return [{"role": "system", "content": checkpoint["system"]},
            {"role": "user", "content": user or checkpoint["user"]}]


def check_usage(usage, max_completion):
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens > 0 and 1 <= usage.completion_tokens <= max_completion
    cached = usage.prompt_tokens_details.cached_tokens
    assert 0 <= cached < usage.prompt_tokens


def check_text_choice(choice):
    assert choice.message.role == "assistant"
    assert isinstance(choice.message.content, str)
    assert not choice.message.tool_calls
    assert choice.finish_reason in ("stop", "length")


# ---- the SDK ----------------------------------------------------------------------------------


def test_models_list(server, client):
    models = client.models.list()
    assert [m.id for m in models.data] == [SERVED_NAME]
    assert models.data[0].object == "model" and models.data[0].owned_by == "fimi"
    assert server.model_name == SERVED_NAME


def test_plain_completion(client, checkpoint):
    r = client.chat.completions.create(model=SERVED_NAME, messages=chat(checkpoint), max_tokens=16)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == SERVED_NAME
    assert len(r.choices) == 1 and r.choices[0].index == 0
    check_text_choice(r.choices[0])
    check_usage(r.usage, 16)
    if r.choices[0].finish_reason == "length":
        assert r.usage.completion_tokens == 16

    r = client.chat.completions.create(model=SERVED_NAME, messages=chat(checkpoint), max_tokens=5, temperature=0)
    check_text_choice(r.choices[0])
    check_usage(r.usage, 5)
    # max_completion_tokens (the newer name) limits the same way.
    r = client.chat.completions.create(model=SERVED_NAME, messages=chat(checkpoint), max_completion_tokens=3)
    check_usage(r.usage, 3)

    # Content as text parts, and the developer role, read as a string and the system role.
    greedy = dict(model=SERVED_NAME, max_tokens=6, temperature=0)
    plain = client.chat.completions.create(messages=chat(checkpoint), **greedy)
    half = len(checkpoint["user"]) // 2
    parts = client.chat.completions.create(messages=[
        {"role": "developer", "content": [{"type": "text", "text": checkpoint["system"]}]},
        {"role": "user", "content": [{"type": "text", "text": checkpoint["user"][:half]},
                                     {"type": "text", "text": checkpoint["user"][half:]}]}], **greedy)
    assert parts.usage.prompt_tokens == plain.usage.prompt_tokens
    assert parts.choices[0].message.content == plain.choices[0].message.content


def test_greedy_is_deterministic_and_reuses_the_prefix(client, checkpoint):
    def ask():
        return client.chat.completions.create(model=SERVED_NAME, messages=chat(checkpoint, checkpoint["users"][2]),
                                              max_tokens=16, temperature=0, seed=7)

    first, second = ask(), ask()
    assert first.choices[0].message.content == second.choices[0].message.content
    assert first.choices[0].finish_reason == second.choices[0].finish_reason
    assert first.usage.prompt_tokens == second.usage.prompt_tokens > 100  # the system prompt holds the tool catalog
    assert first.usage.completion_tokens == second.usage.completion_tokens
    cached = second.usage.prompt_tokens_details.cached_tokens
    # The whole prompt but the last token (which gives the logits) came from the cache.
    assert cached == second.usage.prompt_tokens - 1, second.usage
    assert first.id != second.id


def test_n_choices_are_seeded(client, checkpoint):
    def ask(**kw):
        return client.chat.completions.create(model=SERVED_NAME, messages=chat(checkpoint), max_tokens=12, n=3, **kw)

    a, b = ask(temperature=1, seed=1234), ask(temperature=1, seed=1234)
    assert [c.index for c in a.choices] == [0, 1, 2]
    for c in a.choices:
        check_text_choice(c)
    contents = [c.message.content for c in a.choices]
    assert contents == [c.message.content for c in b.choices]
    assert len(set(contents)) > 1, contents  # each choice samples on its own
    assert a.usage.completion_tokens == b.usage.completion_tokens <= 36
    # Another seed, another sample.
    assert [c.message.content for c in ask(temperature=1, seed=4321).choices] != contents
    # Greedy choices are all the same.
    greedy = ask(temperature=0)
    assert len({c.message.content for c in greedy.choices}) == 1


def test_stream_matches_the_whole_answer(client, checkpoint):
    kw = dict(model=SERVED_NAME, messages=chat(checkpoint, checkpoint["users"][1]), max_tokens=24, temperature=0,
              seed=3)
    whole = client.chat.completions.create(**kw)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw))
    assert len(chunks) >= 3
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    assert chunks[0].id.startswith("chatcmpl-") and chunks[0].id != whole.id
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    u = chunks[-1].usage
    assert (u.prompt_tokens, u.completion_tokens) == (whole.usage.prompt_tokens, whole.usage.completion_tokens)
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens

    # Without include_usage no chunk carries usage.
    plain = list(client.chat.completions.create(stream=True, **kw))
    assert "".join(c.choices[0].delta.content or "" for c in plain if c.choices) == text
    assert all(c.usage is None for c in plain)


def test_stop_strings(client, checkpoint):
    kw = dict(model=SERVED_NAME, messages=chat(checkpoint), max_tokens=24, temperature=0)
    text = client.chat.completions.create(**kw).choices[0].message.content
    # A printable ASCII character of the greedy answer (not its first) as the stop string.
    stop = next((ch for ch in text[1:] if ch.isascii() and ch.isprintable() and not ch.isspace()
                 and text.index(ch) > 0), None)
    assert stop is not None, f"no printable ASCII character in {text!r}"
    cut = client.chat.completions.create(stop=[stop, "never in this text"], **kw)
    assert cut.choices[0].message.content == text[:text.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    streamed = list(client.chat.completions.create(stop=stop, stream=True, **kw))
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == text[:text.index(stop)]


GET_BALANCE = {
    "type": "function",
    "function": {
        "name": "get_balance",
        "description": "Returns the balance of one of the customer's accounts.",
        "parameters": {"type": "object", "properties": {"account_id": {"type": "string", "description": "e.g. SB1"}},
                       "required": ["account_id"]},
    },
}


def check_tool_choice(choice):
    """A call to get_balance, or (the random model broke the arguments) plain text."""
    msg = choice.message
    assert msg.role == "assistant"
    if msg.tool_calls:
        assert choice.finish_reason == "tool_calls"
        assert len(msg.tool_calls) == 1
        call = msg.tool_calls[0]
        assert call.type == "function" and call.id.startswith("call_")
        assert call.function.name == "get_balance"
        assert isinstance(call.function.arguments, str)
        assert isinstance(json.loads(call.function.arguments), dict)
        return call
    assert isinstance(msg.content, str)
    assert choice.finish_reason in ("stop", "length")
    return None


def test_tools(client, checkpoint):
    messages = [{"role": "user", "content": "What is the balance of account SB1?"}]
    for tool_choice in ({"type": "function", "function": {"name": "get_balance"}}, "required", "auto"):
        r = client.chat.completions.create(model=SERVED_NAME, messages=messages, tools=[GET_BALANCE],
                                           tool_choice=tool_choice, max_tokens=24, n=SLOTS, seed=11)
        assert [c.index for c in r.choices] == list(range(SLOTS))
        calls = [check_tool_choice(c) for c in r.choices]
        ids = [c.id for c in calls if c]
        assert len(ids) == len(set(ids))
        check_usage(r.usage, 24 * SLOTS)
    # With tool_choice none the answer is text.
    r = client.chat.completions.create(model=SERVED_NAME, messages=messages, tools=[GET_BALANCE], tool_choice="none",
                                       max_tokens=8)
    check_text_choice(r.choices[0])
    # A named function that is not in tools.
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=SERVED_NAME, messages=messages, tools=[GET_BALANCE], max_tokens=8,
                                       tool_choice={"type": "function", "function": {"name": "transfer_funds"}})
    assert e.value.param == "tool_choice"


def test_tools_stream(client):
    messages = [{"role": "user", "content": "What is the balance of account SB1?"}]
    chunks = list(client.chat.completions.create(
        model=SERVED_NAME, messages=messages, tools=[GET_BALANCE], max_tokens=16, seed=5, stream=True,
        tool_choice={"type": "function", "function": {"name": "get_balance"}}))
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert len(finishes) == 1
    if calls:
        assert finishes == ["tool_calls"] and len(calls) == 1
        assert calls[0].function.name == "get_balance" and calls[0].id.startswith("call_")
        assert isinstance(json.loads(calls[0].function.arguments), dict)
    else:
        assert finishes[0] in ("stop", "length")


def test_tool_call_history(client, checkpoint):
    history = [
        {"role": "user", "content": "What is the balance of account SB1?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_balance", "arguments": "{\"account_id\": \"SB1\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"balance\": 5}"},
    ]
    short = client.chat.completions.create(model=SERVED_NAME, messages=history[:1], tools=[GET_BALANCE], max_tokens=8)
    r = client.chat.completions.create(model=SERVED_NAME, messages=history, tools=[GET_BALANCE], max_tokens=8)
    check_tool_choice(r.choices[0])
    assert r.usage.prompt_tokens > short.usage.prompt_tokens + 10  # the call and its result are in the prompt

    # The generated transcript's conversation, its tool call and result included.
    real = client.chat.completions.create(model=SERVED_NAME, messages=checkpoint["history"], max_tokens=8)
    check_text_choice(real.choices[0])
    assert real.usage.prompt_tokens > client.chat.completions.create(
        model=SERVED_NAME, messages=checkpoint["history"][:2], max_tokens=1).usage.prompt_tokens

    # A tool message must answer an earlier call.
    bad = history[:2] + [{"role": "tool", "tool_call_id": "call_404", "content": "{\"balance\": 5}"}]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=SERVED_NAME, messages=bad, tools=[GET_BALANCE], max_tokens=8)
    assert e.value.status_code == 400 and e.value.param == "messages[2].tool_call_id"
    assert "tool_call_id" in str(e.value.body)
    # An assistant message carries one call at most.
    two = [history[0], {"role": "assistant", "content": None, "tool_calls": [
        dict(history[1]["tool_calls"][0]), dict(history[1]["tool_calls"][0], id="call_2")]}, history[2]]
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=SERVED_NAME, messages=two, tools=[GET_BALANCE], max_tokens=8)
    assert "messages" in e.value.param


@pytest.mark.parametrize("kw, param", [
    ({"temperature": 5}, "temperature"),
    ({"top_p": 1.5}, "top_p"),
    ({"logprobs": True}, "logprobs"),
    ({"logit_bias": {"5": 1}}, "logit_bias"),
    ({"presence_penalty": 0.5}, "presence_penalty"),
    ({"frequency_penalty": -1}, "frequency_penalty"),
    ({"response_format": {"type": "json_object"}}, "response_format"),
    ({"n": 17}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ({"stream_options": {"include_usage": True}}, "stream_options"),  # without stream
    ({"messages": []}, "messages"),
    ({"tool_choice": "required"}, "tool_choice"),  # without tools
], ids=lambda v: v if isinstance(v, str) else None)
def test_refused_parameters(client, checkpoint, kw, param):
    args = dict(model=SERVED_NAME, messages=chat(checkpoint), max_tokens=4)
    args.update(kw)
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(**args)
    assert e.value.status_code == 400
    assert e.value.param == param, e.value.body
    assert e.value.type == "invalid_request_error"


def test_unknown_model(client, checkpoint):
    with pytest.raises(openai.NotFoundError) as e:
        client.chat.completions.create(model="gpt-4o", messages=chat(checkpoint), max_tokens=4)
    assert e.value.code == "model_not_found" and e.value.param == "model"
    assert SERVED_NAME in e.value.message


def test_n_over_slots_refused(client, checkpoint):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=SERVED_NAME, messages=chat(checkpoint), max_tokens=4, n=SLOTS + 1)
    assert "--slots" in e.value.message


def test_n_over_slots_names_n(client, checkpoint):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=SERVED_NAME, messages=chat(checkpoint), max_tokens=4, n=SLOTS + 1)
    assert e.value.param == "n" and e.value.code != "context_length_exceeded"


def test_api_key(binary, checkpoint, tmp_path):
    key = secrets.token_urlsafe(24)
    key_file = tmp_path / "key"
    key_file.write_text(key + "\n")
    key_file.chmod(0o644)
    # A key file others can read is refused.
    loose = subprocess.run([binary[0], "serve", "--model", checkpoint["model"], "--port", "0", "--api-key-file",
                            key_file], capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if k != "FIMI_SERVE_API_KEY"})
    assert loose.returncode != 0 and "chmod 600" in loose.stderr
    key_file.chmod(0o600)
    with running(binary, checkpoint, tmp_path, "--api-key-file", key_file) as s:
        with pytest.raises(openai.AuthenticationError) as e:
            s.client(api_key="not-the-key-" + "x" * 16).chat.completions.create(
                model=s.model_name, messages=chat(checkpoint), max_tokens=4)
        assert e.value.status_code == 401 and e.value.code == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            s.client(api_key=key + "x").models.list()
        status, headers, body = s.raw("GET", "/v1/models")
        assert status == 401 and body["error"]["type"] == "authentication_error"
        assert headers["WWW-Authenticate"].startswith("Bearer")
        good = s.client(api_key=key)
        assert [m.id for m in good.models.list().data] == ["model"]  # the default name: DIR's last component
        r = good.chat.completions.create(model="model", messages=chat(checkpoint), max_tokens=4)
        check_text_choice(r.choices[0])
    # The key from the environment.
    with running(binary, checkpoint, tmp_path, env={"FIMI_SERVE_API_KEY": key}) as s:
        with pytest.raises(openai.AuthenticationError):
            s.client(api_key="y" * 20).models.list()
        assert [m.id for m in s.client(api_key=key).models.list().data] == ["model"]


def test_context_length(binary, checkpoint, tmp_path):
    with running(binary, checkpoint, tmp_path, "--context", 64, "--slots", 2) as s:
        c = s.client()
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(model="model", messages=chat(checkpoint), max_tokens=4)
        assert e.value.code == "context_length_exceeded" and e.value.param == "messages"
        assert "64" in e.value.message
        # A short prompt fits; max_tokens past the context is cut to what is left.
        r = c.chat.completions.create(model="model", messages=[{"role": "user", "content": "Hi"}], max_tokens=500)
        check_text_choice(r.choices[0])
        assert r.usage.total_tokens <= 64
        if r.choices[0].finish_reason == "length":
            assert r.usage.total_tokens >= 63
        with pytest.raises(openai.BadRequestError) as e:  # also when streaming
            list(c.chat.completions.create(model="model", messages=chat(checkpoint), max_tokens=4, stream=True))
        assert e.value.code == "context_length_exceeded"


# ---- raw HTTP -----------------------------------------------------------------------------------


def check_error(body, code=None):
    assert set(body) == {"error"}, body
    err = body["error"]
    assert {"message", "type", "param", "code"} <= set(err) and isinstance(err["message"], str) and err["message"]
    assert err["type"] == "invalid_request_error"
    if code:
        assert err["code"] == code, body


def test_raw_http_errors(server, checkpoint):
    status, headers, body = server.raw("GET", "/v1/chat/completions")
    assert status == 405 and headers["Allow"] == "POST"
    check_error(body, "method_not_allowed")
    status, headers, body = server.raw("POST", "/v1/models", body=b"{}")
    assert status == 405 and headers["Allow"] == "GET"
    status, _, body = server.raw("POST", "/v1/chat/completions", body=b"this is not JSON {")
    assert status == 400
    check_error(body)
    status, _, body = server.raw("POST", "/v1/chat/completions", body=b"[1, 2]")
    assert status == 400
    check_error(body)
    status, _, body = server.raw("POST", "/v1/completions", body=b"{}")
    assert status == 404
    check_error(body, "unknown_url")
    status, _, body = server.raw("GET", "/v2/nothing")
    assert status == 404
    ok = json.dumps({"model": SERVED_NAME, "messages": chat(checkpoint), "max_tokens": 2}).encode()
    status, headers, body = server.raw("POST", "/v1/chat/completions", body=ok)
    assert status == 200 and body["object"] == "chat.completion"
    assert headers["Content-Type"] == "application/json" and headers["Cache-Control"] == "no-store"


def test_body_limit(binary, checkpoint, tmp_path):
    with running(binary, checkpoint, tmp_path, "--max-body-bytes", 4096) as s:
        big = json.dumps({"model": "model", "max_tokens": 2,
                          "messages": [{"role": "user", "content": "x" * 10_000}]}).encode()
        assert len(big) > 10_000
        status, _, body = s.raw("POST", "/v1/chat/completions", body=big)
        assert status == 413
        check_error(body, "request_too_large")
        with pytest.raises(openai.APIStatusError) as e:
            s.client().chat.completions.create(model="model", max_tokens=2,
                                               messages=[{"role": "user", "content": "y" * 10_000}])
        assert e.value.status_code == 413
        # Far past the limit the server may hang up instead; either way it goes on answering.
        try:
            status, _, _ = s.raw("POST", "/v1/chat/completions", body=b"{" + b" " * 200_000 + b"}")
            assert status == 413
        except (ConnectionError, http.client.HTTPException):
            pass
        r = s.client().chat.completions.create(model="model", messages=[{"role": "user", "content": "Hi"}],
                                               max_tokens=2)
        check_text_choice(r.choices[0])


def test_concurrent_clients(server, client, checkpoint):
    users = checkpoint["users"]
    prompts = [users[i % len(users)] + f" (ticket {i})" for i in range(16)]

    def ask(i, greedy):
        for _ in range(50):
            try:
                return client.chat.completions.create(
                    model=SERVED_NAME, messages=[{"role": "user", "content": prompts[i]}], max_tokens=8,
                    **({"temperature": 0} if greedy else {"seed": i}))
            except openai.RateLimitError:
                time.sleep(0.1)
        raise AssertionError("refused 50 times")

    def worker(i):
        return ask(i, True), ask(i, False)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(worker, range(16)))
    assert len(results) == 16
    for greedy, sampled in results:
        for r in (greedy, sampled):
            check_text_choice(r.choices[0])
            check_usage(r.usage, 8)
    assert len({r.id for pair in results for r in pair}) == 32
    # Batched with others, a greedy answer is the one it gets alone.
    for i in (0, 7, 15):
        alone = ask(i, True)
        assert alone.choices[0].message.content == results[i][0].choices[0].message.content


def test_idle_connection_is_not_a_request(binary, checkpoint, tmp_path):
    with running(binary, checkpoint, tmp_path, "--max-concurrent", 1) as s:
        idle = socket.create_connection(("127.0.0.1", s.port))
        try:
            time.sleep(0.2)
            r = s.client().chat.completions.create(model="model", messages=[{"role": "user", "content": "Hi"}],
                                                   max_tokens=2)
            check_text_choice(r.choices[0])
        finally:
            idle.close()


def start_stream(port, body):
    """A raw streaming request: the connection and its response, with the first event read."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body).encode(),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.headers["Content-Type"] == "text/event-stream"
    line = resp.readline()
    assert line.startswith(b"data: {"), line
    assert json.loads(line[6:])["object"] == "chat.completion.chunk"
    return conn, resp


def test_client_disconnects(server, client, checkpoint):
    long = {"model": SERVED_NAME, "messages": chat(checkpoint), "max_tokens": 1000, "stream": True}
    for n in (1, 2):
        conn, _ = start_stream(server.port, dict(long, n=n))
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
    # A whole answer whose client is gone before it is written.
    sock = socket.create_connection(("127.0.0.1", server.port))
    body = json.dumps(dict(long, stream=False)).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    sock.close()
    r = client.chat.completions.create(model=SERVED_NAME, messages=chat(checkpoint), max_tokens=8, n=SLOTS)
    assert len(r.choices) == SLOTS
    for c in r.choices:
        check_text_choice(c)
    assert server.proc.poll() is None


def test_sigterm_with_a_stream_in_flight(binary, checkpoint, tmp_path):
    with running(binary, checkpoint, tmp_path, "--slots", 2) as s:
        conn, resp = start_stream(s.port, {"model": "model", "messages": chat(checkpoint), "max_tokens": 1200,
                                           "n": 2, "stream": True})
        s.stop()  # exit 0 and a clean log are checked there
        try:
            rest = resp.read()
        except (ConnectionError, http.client.HTTPException):
            rest = b""
        conn.close()
        # What did arrive is events; a stream cut by the stop says so or just ends.
        events = rest.strip().split(b"\n\n") if rest.strip() else []
        assert all(e.startswith(b"data: ") for e in events), events[:3]
        if events and events[-1] == b"data: [DONE]":  # ended whole: every choice finished, or an error event
            payloads = [json.loads(e[6:]) for e in events[:-1]]
            finished = {c["index"] for p in payloads for c in p.get("choices", []) if c.get("finish_reason")}
            assert finished == {0, 1} or any("error" in p for p in payloads), events[-3:]
