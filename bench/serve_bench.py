#!/usr/bin/env python3
"""bench/serve_bench.py: `fimi serve` vs `transformers serve` (Hugging Face) on
the CPU, the same checkpoint behind the same OpenAI chat-completions API.

What it measures. For each concurrency level C (default 1, 8, 32) and each
server, one at a time so they never share the CPU: start the server, send a
few warm-up requests, then R requests (--requests, at least C; default
max(64, 4C)) from C closed-loop clients (each sends its next request when
its previous one has ended), then stop the server. The order of the two
servers alternates from level to level, so load from other work on the
machine falls on both alike. Every request streams (`stream: true`,
`stream_options.include_usage`), greedy (`temperature: 0`), `max_tokens` M
(default 64). Per server and level:

  requests/s          finished requests / wall seconds of the level
  generated tokens/s  sum of usage.completion_tokens / wall seconds
  TTFT median, p90    time from sending a request to its first non-empty
                      content (or tool_calls) delta, in ms
and, to read the others by: mean completion and prompt tokens per request
(each server's own usage), median request latency, errors, the 1-minute
load average after the level (the server's own load included), and how
many requests got the same text from both servers. The ratio column is
fimi/transformers for every metric (for TTFT and latency below 1 means fimi
answers sooner). It prints a Markdown table with the machine (CPU model
from /proc/cpuinfo, cores) and, with --out, writes the same as JSON
(per-request numbers included; server logs stay in --workdir when given).

Prompts: the system turn and first customer turn of the first rows of a
JSONL file of {"messages": [...]} rows (default repro-out/data/sft.jsonl,
the SFT transcripts of the small-scale study: bank system prompt with its
tool catalog, ~600 tokens, and the customer's opening message), distinct
prompts for every request of a level (a prompt the server has just seen
would be a free hit of fimi's prefix cache), the same list for both servers.
Warm-up prompts are rows that the level does not measure.

The servers (same thread count T, default the usable cores: OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS and MKL_NUM_THREADS = T for both, and
OMP_WAIT_POLICY=PASSIVE unless set: spinning OpenMP threads collapse on a
shared machine, docs/benchmarks.md):

  fimi serve --model DIR --port 0 --served-model-name bench --slots min(C, 32)
             --context 2048 --max-concurrent max(64, 2C)
  transformers serve DIR --host 127.0.0.1 --port P --device cpu --dtype float32
             --continuous-batching --cb-num-blocks ceil(min(C, 32) x 2048 / 256)
             --max-model-len 2048 --log-level warning

Checked with transformers 5.25.0 (torch 2.15.0, fastapi 0.165.0, uvicorn
0.55.0, openai 3.63.0): `transformers serve --help` of that version has
FORCE_MODEL (the positional model: preloaded, and the only name a request
may send as "model"), --host/--port, --device, --dtype,
--continuous-batching (paged-attention continuous batching; it runs on
the CPU) and --max-model-len (the context, set like fimi's --context). Its
prefix sharing (ContinuousBatchingConfig.allow_block_sharing, on by
default) needs every layer's cache to share blocks, and sliding-window
layers do not, so for Gemma 3 it is off, while fimi reuses a cached prompt
prefix (the system prompt that requests of one task family share): the
table shows fimi's usage.prompt_tokens_details.cached_tokens. --no-hf-continuous-batching serves
one request at a time (model.generate per request), that version's default.
The server has two processes (uvicorn API process, model process) and
logs every request at uvicorn's info level (not settable from its CLI).

The checkpoint: fimi writes Hugging Face-compatible Gemma 3 checkpoints
(config.json, model.safetensors, tokenizer.json) without a chat template.
When DIR has no tokenizer_config.json with a chat_template, the script
copies config.json, model.safetensors and tokenizer.json into its work
directory (DIR is never modified) and adds a tokenizer_config.json
(PreTrainedTokenizerFast, eos_token <end_of_turn>, no automatic <bos>) whose
Jinja chat_template renders fimi's chat format (docs/chat-format.md):
`<bos>` then `<start_of_turn>{role}\\n{content}<end_of_turn>\\n` per message
(assistant -> model) and the generation prompt `<start_of_turn>model\\n`,
and a generation_config.json with eos ids <eos> and <end_of_turn> when DIR
has none. Before benchmarking it checks in a subprocess that
AutoTokenizer + AutoModelForCausalLM load the copy, that the template
renders the first prompt exactly as that format, and generates a few greedy
tokens. fimi serves DIR itself.

Differences that stay (read them with the numbers):
- Prompt ids differ a little: fimi encodes the role header and each content
  as their own segments and content text with no special-token matching
  (the system prompt's literal "<tool_call>" stays text), the HF tokenizer
  encodes the rendered string whole; the table shows both prompt lengths.
- usage.completion_tokens: transformers counts the <end_of_turn> that ends
  the turn, fimi does not, so at equal text transformers reports one more
  token per request that ends before max_tokens.
- The client (asyncio + httpx) runs on the same cores as the server.

Usage (from the repository root, with the venv that has torch +
transformers[serving] + httpx, e.g. a separate bench venv:
`pip install "transformers[serving]"`, which brings fastapi, uvicorn,
openai and httpx, named httpx2 in some releases):

  VENV/bin/python bench/serve_bench.py [--fimi build/cmd/fimi]
      [--model repro-out/sft/base] [--prompts repro-out/data/sft.jsonl]
      [--concurrency 1,8,32] [--requests R] [--warmup 4] [--max-tokens 64]
      [--threads T] [--context 2048] [--servers fimi,transformers]
      [--no-hf-continuous-batching] [--out results.json] [--keep-workdir]

A small run: ... --concurrency 1,8 --requests 8 --max-tokens 16
"""
import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import httpx
except ImportError:  # some environments ship it under the name httpx2
    import httpx2 as httpx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# fimi's chat format (docs/chat-format.md) as a Jinja template; content may be a
# string or a list of text parts.
CHAT_TEMPLATE = (
    # fimi's chat format (docs/chat-format.md), tools and tool turns included: the system turn gets the
    # catalog (the header line, then one compact {"name","description","parameters"} line per tool), an
    # assistant call renders as <tool_call>{"name":..,"arguments":..}</tool_call> after its text, a tool
    # message (its "name" is the call's) as {"name":..,"result":..} or, for {"error": ..}, {"name":..,"error":..}.
    "{{ bos_token }}"
    "{%- set ns = namespace(catalog='') -%}"
    "{%- if tools -%}"
    "{%- set ns.catalog = 'You can call these tools. To call one, reply with only "
    "<tool_call>{\\\"name\\\":\\\"TOOL_NAME\\\",\\\"arguments\\\":{...}}</tool_call>; the result comes back in a "
    "tool turn. One call per turn.' -%}"
    "{%- for t in tools -%}{%- set f = t.function if t.function is defined else t -%}"
    "{%- set ns.catalog = ns.catalog + '\\n' + ({'name': f.name, 'description': f.description, "
    "'parameters': f.parameters} | tojson(separators=(',', ':'))) -%}{%- endfor -%}"
    "{%- if messages[0]['role'] != 'system' -%}{{ '<start_of_turn>system\\n' + ns.catalog + '<end_of_turn>\\n' }}"
    "{%- endif -%}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- set role = 'model' if m['role'] == 'assistant' else m['role'] -%}"
    "{%- if m['content'] is string -%}{%- set content = m['content'] -%}"
    "{%- elif m['content'] -%}{%- set content = m['content'] | map(attribute='text') | join('') -%}"
    "{%- else -%}{%- set content = '' -%}{%- endif -%}"
    "{%- if m['role'] == 'system' and tools -%}{%- set content = content + '\\n' + ns.catalog -%}{%- endif -%}"
    "{%- if m['tool_calls'] -%}{%- set c = m['tool_calls'][0]['function'] -%}"
    "{%- set args = c['arguments'] if c['arguments'] is string else (c['arguments'] | tojson(separators=(',', ':'))) -%}"
    "{%- set content = (content + '\\n' if content else '') + '<tool_call>{\"name\":' + ((c['name'] if c['name'] is defined else none) | tojson) + "
    "',\"arguments\":' + args + '}</tool_call>' -%}{%- endif -%}"
    "{%- if m['role'] == 'tool' -%}"
    "{%- if content.startswith('{\"error\":') -%}{%- set content = '{\"name\":' + ((m['name'] if m['name'] is defined else none) | tojson) + ',' + content[1:] -%}"
    "{%- else -%}{%- set content = '{\"name\":' + ((m['name'] if m['name'] is defined else none) | tojson) + ',\"result\":' + content + '}' -%}{%- endif -%}"
    "{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\\n' + content + '<end_of_turn>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}"
)


def fimi_format(messages):
    """The text fimi renders for messages plus the generation prompt."""
    out = "<bos>"
    for m in messages:
        role = "model" if m["role"] == "assistant" else m["role"]
        out += "<start_of_turn>%s\n%s<end_of_turn>\n" % (role, m["content"])
    return out + "<start_of_turn>model\n"


# Run in a subprocess (the client process stays free of torch): loads the
# checkpoint as transformers does and renders/generates the first prompt.
VERIFY = r"""
import json, sys, time
import torch, transformers
from transformers import AutoModelForCausalLM, AutoTokenizer
d, n_new = sys.argv[1], int(sys.argv[2])
messages = json.load(sys.stdin)
t0 = time.time()
tok = AutoTokenizer.from_pretrained(d)
text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=True)["input_ids"]
model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
with torch.inference_mode():
    out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                         max_new_tokens=n_new, do_sample=False)
new = out[0, len(ids):].tolist()
print(json.dumps({"transformers": transformers.__version__, "torch": torch.__version__,
                  "tokenizer_class": type(tok).__name__, "model_class": type(model).__name__,
                  "parameters": sum(p.numel() for p in model.parameters()),
                  "eos_token": tok.eos_token, "eos_ids": model.generation_config.eos_token_id,
                  "rendered": text, "prompt_tokens": len(ids), "bos_count": ids.count(tok.bos_token_id),
                  "greedy_text": tok.decode(new, skip_special_tokens=False), "seconds": time.time() - t0}))
"""


def die(msg):
    sys.exit("serve_bench.py: " + msg)


def machine_info(threads):
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "usable_cores": len(os.sched_getaffinity(0)),
            "threads_per_server": threads, "kernel": platform.release(), "python": platform.python_version()}


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return None


def load_prompts(path, count):
    """System + first user message of the first rows, distinct, in file order."""
    prompts, seen = [], set()
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            msgs = json.loads(line).get("messages") or []
            first_user = next((i for i, m in enumerate(msgs) if m.get("role") == "user"), None)
            if first_user is None:
                continue
            head = [{"role": m["role"], "content": m["content"]} for m in msgs[:first_user + 1]
                    if m["role"] in ("system", "user")]
            key = json.dumps(head)
            if key in seen:
                continue
            seen.add(key)
            prompts.append(head)
            if len(prompts) == count:
                break
    if len(prompts) < count:
        die("%s has %d distinct prompts (rows with messages and a user turn), %d needed" % (path, len(prompts), count))
    return prompts


def prepare_hf_checkpoint(model_dir, work):
    """The directory transformers serves: model_dir itself when it has a chat template, else a copy with one."""
    tc_path = os.path.join(model_dir, "tokenizer_config.json")
    if os.path.exists(tc_path):
        with open(tc_path) as f:
            if json.load(f).get("chat_template") or os.path.exists(os.path.join(model_dir, "chat_template.jinja")):
                return model_dir, False
    dst = os.path.join(work, "hf-checkpoint")
    os.makedirs(dst)
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json",
                 "special_tokens_map.json"):
        if os.path.exists(os.path.join(model_dir, name)):
            shutil.copy2(os.path.join(model_dir, name), dst)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not os.path.exists(os.path.join(dst, name)):
            die("%s has no %s" % (model_dir, name))
    with open(os.path.join(dst, "tokenizer.json")) as f:
        specials = {t["content"]: t["id"] for t in json.load(f).get("added_tokens", [])}
    for name in ("<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>"):
        if name not in specials:
            die("tokenizer.json of %s has no special token %s" % (model_dir, name))
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<end_of_turn>",
              "pad_token": "<pad>", "add_bos_token": False, "add_eos_token": False, "chat_template": CHAT_TEMPLATE}
    if "<unk>" in specials:
        config["unk_token"] = "<unk>"
    with open(os.path.join(dst, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, indent=1)
    if not os.path.exists(os.path.join(dst, "generation_config.json")):
        with open(os.path.join(dst, "generation_config.json"), "w") as f:
            json.dump({"bos_token_id": specials["<bos>"], "pad_token_id": specials["<pad>"],
                       "eos_token_id": sorted({specials["<eos>"], specials["<end_of_turn>"]})}, f, indent=1)
    return dst, True


def verify_hf_checkpoint(hf_dir, messages, env, own_template):
    r = subprocess.run([sys.executable, "-c", VERIFY, hf_dir, "8"], input=json.dumps(messages), env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        die("transformers cannot load %s:\n%s" % (hf_dir, r.stderr[-3000:]))
    info = json.loads(r.stdout.strip().splitlines()[-1])
    expected = fimi_format(messages)
    info["template_matches_fimi"] = info["rendered"] == expected
    if own_template and not info["template_matches_fimi"]:
        die("the chat template renders %r, fimi's format is %r" % (info["rendered"][:300], expected[:300]))
    if not info["template_matches_fimi"]:
        print("serve_bench.py: warning: the checkpoint's own chat template differs from fimi's format", file=sys.stderr)
    if info["bos_count"] != 1:
        die("the rendered prompt has %d <bos> tokens" % info["bos_count"])
    del info["rendered"]
    return info


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process: started in a session of its own, stopped by SIGTERM to its process group."""

    def __init__(self, name, cmd, env, log_path, model_name):
        self.name, self.cmd, self.env, self.log_path, self.model_name = name, cmd, env, log_path, model_name
        self.proc, self.base = None, None

    def start(self, timeout=300):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, env=self.env,
                                     start_new_session=True)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %d:\n%s" % (self.name, self.proc.returncode, self.log_tail()))
            if self.base is None:
                self.base = self.find_base()
            if self.base is not None and self.ready():
                return
            time.sleep(0.5)
        raise RuntimeError("%s not ready after %d s:\n%s" % (self.name, timeout, self.log_tail()))

    def find_base(self):
        m = re.search(rb"listening on (http://\S+/v1)", open(self.log_path, "rb").read())
        return m.group(1).decode() if m else None

    def ready(self):
        try:
            r = httpx.get(self.base + "/models", timeout=5, trust_env=False)
            return r.status_code == 200
        except httpx.HTTPError:
            return False

    def log_tail(self, n=3000):
        try:
            return open(self.log_path, "rb").read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        # the transformers model process exits with its parent; give it a moment
        for _ in range(20):
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.25)
        self.log.close()
        self.proc = None


def fimi_server(args, concurrency, env, work):
    cmd = [args.fimi, "serve", "--model", args.model, "--port", "0", "--served-model-name", "bench",
           "--slots", str(min(concurrency, 32)), "--context", str(args.context),
           "--max-concurrent", str(max(64, 2 * concurrency))]
    return Server("fimi", cmd, env, os.path.join(work, "fimi-c%d.log" % concurrency), "bench")


class HFServer(Server):
    def find_base(self):
        return self.url

    def ready(self):
        try:
            r = httpx.get(self.url[:-3] + "/health", timeout=5, trust_env=False)
            return r.status_code == 200 and super().ready()
        except httpx.HTTPError:
            return False


def hf_server(args, concurrency, env, work, hf_dir):
    port = free_port()
    cmd = [args.transformers_cli, "serve", hf_dir, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu",
           "--dtype", "float32", "--max-model-len", str(args.context), "--log-level", "warning",
           "--continuous-batching" if args.hf_continuous_batching else "--no-continuous-batching"]
    if args.hf_continuous_batching:
        # The same KV cache as fimi's (--slots min(C, 32) x --context tokens) in blocks of 256 tokens: by
        # default transformers sizes it to most of the host's memory and zero-fills it at start.
        cmd += ["--cb-num-blocks", str(-(-min(concurrency, 32) * args.context // 256))]
    s = HFServer("transformers", cmd, env, os.path.join(work, "transformers-c%d.log" % concurrency), hf_dir)
    s.url = "http://127.0.0.1:%d/v1" % port
    return s


async def one_request(client, url, model, messages, max_tokens):
    body = {"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    rec = {"ttft": None, "latency": None, "completion_tokens": None, "prompt_tokens": None, "cached_tokens": None,
           "error": None}
    text = []
    t0 = time.perf_counter()
    try:
        async with client.stream("POST", url, json=body) as r:
            if r.status_code != 200:
                rec["error"] = "HTTP %d: %s" % (r.status_code, (await r.aread())[:300].decode(errors="replace"))
            else:
                async for line in r.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    ev = json.loads(data)
                    if "error" in ev:
                        rec["error"] = "stream error: %s" % json.dumps(ev["error"])[:300]
                        break
                    if ev.get("usage"):
                        rec["completion_tokens"] = ev["usage"].get("completion_tokens")
                        rec["prompt_tokens"] = ev["usage"].get("prompt_tokens")
                        rec["cached_tokens"] = (ev["usage"].get("prompt_tokens_details") or {}).get("cached_tokens")
                    for ch in ev.get("choices") or []:
                        d = ch.get("delta") or {}
                        if d.get("content") or d.get("tool_calls"):
                            if rec["ttft"] is None:
                                rec["ttft"] = time.perf_counter() - t0
                            text.append(d.get("content") or json.dumps(d.get("tool_calls")))
    except (httpx.HTTPError, ValueError) as e:
        rec["error"] = "%s: %s" % (type(e).__name__, e)
    rec["latency"] = time.perf_counter() - t0
    if rec["error"] is None and rec["completion_tokens"] is None:
        rec["error"] = "no usage in the stream"
    rec["text"] = "".join(text)
    return rec


async def drive(client, url, model, prompts, concurrency, max_tokens):
    """Closed loop: `concurrency` clients take the next prompt as their previous request ends."""
    results = [None] * len(prompts)
    next_index = iter(range(len(prompts)))

    async def worker():
        for i in next_index:
            results[i] = await one_request(client, url, model, prompts[i], max_tokens)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results, time.perf_counter() - t0


async def bench_server(server, warm, prompts, concurrency, max_tokens):
    url = server.base + "/chat/completions"
    limits = httpx.Limits(max_connections=concurrency + 8, max_keepalive_connections=concurrency + 8)
    async with httpx.AsyncClient(timeout=httpx.Timeout(900.0), limits=limits, trust_env=False) as client:
        warm_results, _ = await drive(client, url, server.model_name, warm, min(concurrency, len(warm)), max_tokens)
        bad = [r["error"] for r in warm_results if r["error"]]
        if bad:
            raise RuntimeError("%s: warm-up request failed: %s" % (server.name, bad[0]))
        return await drive(client, url, server.model_name, prompts, concurrency, max_tokens)


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    v = sorted(values)
    if not v:
        return None
    k = (len(v) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summarize(results, wall):
    ok = [r for r in results if r["error"] is None]
    ttfts = [r["ttft"] for r in ok if r["ttft"] is not None]
    gen = sum(r["completion_tokens"] for r in ok)
    return {
        "requests": len(results), "ok": len(ok), "errors": len(results) - len(ok), "wall_s": wall,
        "requests_per_s": len(ok) / wall, "generated_tokens_per_s": gen / wall,
        "ttft_median_ms": 1000 * percentile(ttfts, 0.5) if ttfts else None,
        "ttft_p90_ms": 1000 * percentile(ttfts, 0.9) if ttfts else None,
        "latency_median_ms": 1000 * percentile([r["latency"] for r in ok], 0.5) if ok else None,
        "completion_tokens_mean": gen / len(ok) if ok else None,
        "prompt_tokens_mean": statistics.mean(r["prompt_tokens"] for r in ok) if ok else None,
        "cached_tokens_mean": statistics.mean(r["cached_tokens"] for r in ok)
        if ok and all(r["cached_tokens"] is not None for r in ok) else None,
        "no_content": sum(1 for r in ok if r["ttft"] is None),
        "first_error": next((r["error"] for r in results if r["error"]), None),
    }


# (key, label, format, with a ratio)
METRICS = [
    ("requests_per_s", "requests/s", "%.2f", True),
    ("generated_tokens_per_s", "generated tokens/s", "%.1f", True),
    ("ttft_median_ms", "TTFT median, ms (lower is better)", "%.1f", True),
    ("ttft_p90_ms", "TTFT p90, ms (lower is better)", "%.1f", True),
    ("latency_median_ms", "request latency median, ms", "%.1f", True),
    ("completion_tokens_mean", "completion tokens/request (own usage)", "%.1f", True),
    ("prompt_tokens_mean", "prompt tokens/request (own usage)", "%.1f", True),
    ("cached_tokens_mean", "of which cached (prompt_tokens_details)", "%.1f", False),
    ("errors", "errors", "%d", False),
    ("load_after", "load average (1 min) after, own server included", "%.2f", False),
]


def fmt(f, v):
    return "-" if v is None else f % v


def markdown(report):
    m, c = report["machine"], report["config"]
    lines = ["## fimi serve vs transformers serve, CPU", "",
             "Machine: %s, %d cores (%d usable), %d threads per server, OMP_WAIT_POLICY=%s; load average (1 min) "
             "%.2f at start." % (m["cpu"], m["cores"], m["usable_cores"], m["threads_per_server"],
                                 c["omp_wait_policy"], report["load_at_start"] or 0),
             "Checkpoint: %s (%s, %s parameters); transformers %s, torch %s, continuous batching %s." % (
                 c["model"], report["hf_check"].get("model_class", "?"), report["hf_check"].get("parameters", "?"),
                 report["hf_check"].get("transformers", "?"), report["hf_check"].get("torch", "?"),
                 "on" if c["hf_continuous_batching"] else "off"),
             "Requests: %s (+%d warm-up per server start), distinct prompts from %s (system + first user "
             "turn), greedy, max_tokens %d, streamed; context %d." % (
                 ", ".join("%d at concurrency %d" % (level["requests"], level["concurrency"])
                           for level in report["levels"]), c["warmup"], c["prompts"],
                 c["max_tokens"], c["context"]),
             "", "| concurrency | metric | fimi | transformers | fimi/transformers |", "|---:|---|---:|---:|---:|"]
    for level in report["levels"]:
        f, h = level.get("fimi"), level.get("transformers")
        for key, label, form, with_ratio in METRICS:
            fv = f.get(key) if f else None
            hv = h.get(key) if h else None
            ratio = ""
            if with_ratio:
                ratio = "%.2f" % (fv / hv) if fv is not None and hv else "-"
            lines.append("| %d | %s | %s | %s | %s |" % (level["concurrency"], label, fmt(form, fv), fmt(form, hv),
                                                      ratio))
    lines.append("")
    for level in report["levels"]:
        notes = []
        if level.get("same_text") is not None:
            notes.append("same text from both servers: %d of %d requests" % (level["same_text"], level["compared"]))
        notes.append("order: %s" % ", ".join(level["order"]))
        for name in ("fimi", "transformers"):
            s = level.get(name)
            if s and s.get("first_error"):
                notes.append("%s first error: %s" % (name, s["first_error"]))
            if s and s.get("no_content"):
                notes.append("%s: %d requests with no content delta (no TTFT)" % (name, s["no_content"]))
        lines.append("- concurrency %d: %s" % (level["concurrency"], "; ".join(notes)))
    lines.append("")
    lines.append("Commands (concurrency %d): `%s` and `%s`" % (
        report["levels"][-1]["concurrency"], report["levels"][-1].get("fimi_cmd", "-"),
        report["levels"][-1].get("transformers_cmd", "-")))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fimi", default=os.path.join(ROOT, "build", "cmd", "fimi"))
    ap.add_argument("--model", default=os.path.join(ROOT, "repro-out", "sft", "base"))
    ap.add_argument("--prompts", default=os.path.join(ROOT, "repro-out", "data", "sft.jsonl"))
    ap.add_argument("--concurrency", default="1,8,32", help="comma-separated levels")
    ap.add_argument("--requests", type=int, help="measured requests per level, at least the level (default: "
                    "max(64, 4 x the level))")
    ap.add_argument("--warmup", type=int, default=4, help="warm-up requests per server start")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    ap.add_argument("--context", type=int, default=2048, help="fimi --context and transformers --max-model-len")
    ap.add_argument("--servers", default="fimi,transformers")
    ap.add_argument("--hf-continuous-batching", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--transformers-cli", default=os.path.join(os.path.dirname(sys.executable), "transformers"))
    ap.add_argument("--workdir", help="default: a temporary directory, removed at the end")
    ap.add_argument("--keep-workdir", action="store_true")
    ap.add_argument("--out", help="write the report as JSON")
    args = ap.parse_args()

    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    if not levels or min(levels) < 1 or not servers or set(servers) - {"fimi", "transformers"}:
        die("bad --concurrency or --servers")
    args.model = os.path.abspath(args.model)
    if "fimi" in servers and not os.access(args.fimi, os.X_OK):
        die("%s is not an executable (build fimi, or pass --fimi)" % args.fimi)
    if "transformers" in servers and not os.access(args.transformers_cli, os.X_OK):
        die("%s not found: run with the venv's python that has transformers[serving], or pass "
            "--transformers-cli" % args.transformers_cli)

    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[k] = str(args.threads)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env["TOKENIZERS_PARALLELISM"] = "false"

    per_level = {c: max(args.requests, c) if args.requests else max(64, 4 * c) for c in levels}
    pool = load_prompts(args.prompts, args.warmup + max(per_level.values()))
    warm, measured = pool[:args.warmup], pool[args.warmup:]

    work = args.workdir or tempfile.mkdtemp(prefix="serve_bench.")
    os.makedirs(work, exist_ok=True)
    keep = args.keep_workdir or bool(args.workdir)
    report = {"machine": machine_info(args.threads), "load_at_start": loadavg(), "hf_check": {},
              "config": {"model": args.model, "prompts": os.path.abspath(args.prompts), "requests": per_level,
                         "warmup": args.warmup, "max_tokens": args.max_tokens, "context": args.context,
                         "concurrency": levels, "hf_continuous_batching": args.hf_continuous_batching,
                         "omp_wait_policy": env["OMP_WAIT_POLICY"], "fimi": os.path.abspath(args.fimi),
                         "transformers_cli": args.transformers_cli},
              "levels": []}
    try:
        report["config"]["git_commit"] = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                                        capture_output=True, text=True).stdout.strip() or None
    except OSError:
        report["config"]["git_commit"] = None
    failed = False
    try:
        hf_dir = None
        if "transformers" in servers:
            hf_dir, made = prepare_hf_checkpoint(args.model, work)
            report["config"]["hf_checkpoint"] = hf_dir if not made else "copy of the model with a chat template"
            report["hf_check"] = verify_hf_checkpoint(hf_dir, pool[0], env, made)
            print("transformers loads the checkpoint: %s" % json.dumps(report["hf_check"]), file=sys.stderr)
        for li, c in enumerate(levels):
            prompts = measured[:per_level[c]]
            order = servers if li % 2 == 0 else servers[::-1]
            level = {"concurrency": c, "requests": len(prompts), "order": order}
            texts = {}
            for name in order:
                server = fimi_server(args, c, env, work) if name == "fimi" else hf_server(args, c, env, work, hf_dir)
                level[name + "_cmd"] = " ".join(server.cmd)
                print("concurrency %d: %s: %s" % (c, name, " ".join(server.cmd)), file=sys.stderr)
                try:
                    server.start()
                    results, wall = asyncio.run(bench_server(server, warm, prompts, c, args.max_tokens))
                finally:
                    server.stop()
                summary = summarize(results, wall)
                summary["load_after"] = loadavg()
                texts[name] = [r.pop("text") for r in results]
                summary["per_request"] = results
                level[name] = summary
                print("  %s: %.2f req/s, %.1f tok/s, TTFT median %s ms, %d errors, load %.2f" % (
                    name, summary["requests_per_s"], summary["generated_tokens_per_s"],
                    fmt("%.1f", summary["ttft_median_ms"]), summary["errors"], summary["load_after"] or 0),
                    file=sys.stderr)
            if len(texts) == 2:
                pairs = [(a, b) for a, b, ra, rb in zip(texts["fimi"], texts["transformers"],
                                                         level["fimi"]["per_request"],
                                                         level["transformers"]["per_request"])
                         if ra["error"] is None and rb["error"] is None]
                level["same_text"], level["compared"] = sum(a == b for a, b in pairs), len(pairs)
                level["fimi_over_transformers"] = {
                    key: level["fimi"][key] / level["transformers"][key]
                    for key, _, _, with_ratio in METRICS
                    if with_ratio and level["fimi"][key] is not None and level["transformers"][key]}
            report["levels"].append(level)
    except (RuntimeError, OSError) as e:
        failed = True
        keep = True
        print("serve_bench.py: %s" % e, file=sys.stderr)
    finally:
        if keep:
            print("serve_bench.py: work directory (server logs) kept: %s" % work, file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    report["load_at_end"] = loadavg()
    if report["levels"]:
        print(markdown(report))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
