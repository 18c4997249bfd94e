"""`fimi mcp serve --http` against the official Python MCP SDK's Streamable HTTP client.

The SDK (PyPI `mcp`) initializes, lists the tools and runs the customer
journey and refusals of the stdio test over HTTP; raw requests (urllib) check
what the SDK never sends: no token or a wrong one (401), a request without
Mcp-Session-Id after initialize (400), ids that were never issued or have
ended (404), a foreign Origin (403) or Host (421), a body over the limit
(413), GET (405), the session limit (503) and idle expiry; after every
refusal the server still answers. Each test starts its own server on a port
the kernel picks (--http 127.0.0.1:0, read back from the server's log).

Run: FIMI_BIN=build/cmd/fimi .venv/bin/pytest tests/interop/test_mcp_http.py
"""
import asyncio
import json
import os
import re
import secrets
import subprocess
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("mcp", reason="the Python MCP SDK (pip install mcp) is not installed")
from mcp import ClientSession  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402

try:  # 2.x (and late 1.x); early 1.x named it streamablehttp_client
    from mcp.client.streamable_http import streamable_http_client  # noqa: E402
except ImportError:  # pragma: no cover
    streamable_http_client = None
    from mcp.client.streamable_http import streamablehttp_client  # noqa: E402

from test_mcp_server import (  # noqa: E402  the stdio test's helpers (same directory)
    FIMI_BIN,
    as_dict,
    balance_of,
    fimi,
    gold_args,
    is_error,
    sample_task,
    structured,
    text_of,
)

pytestmark = pytest.mark.skipif(not os.access(FIMI_BIN, os.X_OK), reason=f"fimi binary not found at {FIMI_BIN}")

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


class Server:
    """One `fimi mcp serve --http` process; its log goes to a file (never a full pipe)."""

    def __init__(self, tmp_path, *extra, create=True, db=None):
        self.token = secrets.token_urlsafe(32)
        self.db = db or tmp_path / "bank.sqlite"
        self.log_path = tmp_path / f"server-{secrets.token_hex(4)}.log"
        args = [FIMI_BIN, "mcp", "serve", "--db", str(self.db), "--http", "127.0.0.1:0", *map(str, extra)]
        if create:
            args.append("--create")
        env = dict(os.environ, FIMI_MCP_TOKEN=self.token)
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log, env=env)
        self.port = self._wait_for_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def _wait_for_port(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/mcp", self.log_path.read_text())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited: {self.log_path.read_text()}")
            time.sleep(0.05)
        raise AssertionError("server did not start")

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=30)
        self.log.close()
        assert rc == 0, self.log_path.read_text()

    def post(self, message, session=None, token=None, headers=None, body=None):
        """A raw POST: (status, headers, parsed JSON body or None)."""
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "Authorization": f"Bearer {self.token if token is None else token}"}
        if token == "":
            del h["Authorization"]
        if session:
            h["Mcp-Session-Id"] = session
        h.update(headers or {})
        data = body if body is not None else json.dumps(message).encode()
        return self.request("POST", h, data)

    def request(self, method, headers, data=None):
        req = urllib.request.Request(self.url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, hdrs, raw = r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            status, hdrs, raw = e.code, e.headers, e.read()
        return status, hdrs, json.loads(raw) if raw else None

    def initialize(self):
        status, headers, body = self.post(INIT)
        assert status == 200, body
        sid = headers["Mcp-Session-Id"]
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)[0] == 202
        return sid

    def call(self, sid, name, arguments, request_id=7):
        msg = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
               "params": {"name": name, "arguments": arguments}}
        return self.post(msg, sid)

    def assert_alive(self):
        sid = self.initialize()
        status, _, body = self.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, sid)
        assert status == 200 and body == {"jsonrpc": "2.0", "id": 2, "result": {}}


@pytest.fixture
def server(tmp_path):
    s = Server(tmp_path)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def fd_task():
    return sample_task("fd_paper", 3)


async def with_sdk_session(server, body):
    http_client = create_mcp_http_client(headers={"Authorization": f"Bearer {server.token}"})
    async with http_client:
        if streamable_http_client:
            transport = streamable_http_client(server.url, http_client=http_client)
        else:  # pragma: no cover
            transport = streamablehttp_client(server.url, headers={"Authorization": f"Bearer {server.token}"})
        async with transport as streams:
            async with ClientSession(streams[0], streams[1]) as session:
                init = await session.initialize()
                return await body(session, init)


def run(server, body):
    return asyncio.run(with_sdk_session(server, body))


def test_initialize_and_list_tools(server):
    catalog = json.loads(fimi("env", "tools", "--json"))

    async def body(session, init):
        assert as_dict(init)["protocolVersion"] in ("2025-11-25", "2025-06-18")
        assert as_dict(init)["serverInfo"]["name"] == "fimi"
        return as_dict(await session.list_tools())["tools"]

    tools = run(server, body)
    assert len(tools) == len(catalog) > 50
    by_name = {t["name"]: t for t in tools}
    for entry in catalog:
        assert by_name[entry["name"]]["inputSchema"] == entry["parameters"]
        assert by_name[entry["name"]]["description"] == entry["description"]
    assert by_name["create_fd"]["annotations"]["destructiveHint"] is True
    # The SDK ended its session with DELETE on the way out.
    assert "ended by the client" in server.log_path.read_text()


def test_customer_journey(server, fd_task):
    verify = gold_args(fd_task, "verify_customer")
    create = gold_args(fd_task, "create_fd")
    account = create["source_account"]

    async def body(session, _):
        refused = await session.call_tool("get_account_balance", {"account_ids": [account]})
        assert is_error(refused) and "verify_customer" in text_of(refused)
        assert structured(await session.call_tool("verify_customer", verify))["verified"] is True
        before = balance_of(await session.call_tool("get_account_balance", {"account_ids": [account]}), account)
        fd = structured(await session.call_tool("create_fd", create))
        after = balance_of(await session.call_tool("get_account_balance", {"account_ids": [account]}), account)
        deposits = structured(await session.call_tool("list_deposits", {}))
        return before, fd, after, deposits

    before, fd, after, deposits = run(server, body)
    assert after == pytest.approx(before - create["principal_amount"], abs=0.001)
    assert fd["fd_id"] in json.dumps(deposits)


def test_refusals_and_tool_errors(server, fd_task):
    verify = gold_args(fd_task, "verify_customer")
    other = sample_task("balance_enquiry", 5)
    other_verify = gold_args(other, "verify_customer")
    assert other_verify["customer_id"] != verify["customer_id"]
    other_account = gold_args(other, "get_account_balance")["account_ids"][0]

    async def body(session, _):
        out = {}
        await session.call_tool("verify_customer", verify)
        out["other_balance"] = await session.call_tool("get_account_balance", {"account_ids": [other_account]})
        out["other_fd"] = await session.call_tool(
            "create_fd", {"principal_amount": 5000, "tenure_months": 12, "source_account": other_account})
        out["second_verify"] = await session.call_tool("verify_customer", other_verify)
        out["bad_type"] = await session.call_tool(
            "create_fd", {"principal_amount": "lots", "tenure_months": 12, "source_account": "SB1"})
        out["injection"] = await session.call_tool("get_account_balance", {"account_ids": ["' OR '1'='1"]})
        try:
            await session.call_tool("drop_all_tables", {})
            out["unknown"] = None
        except Exception as e:  # McpError / MCPError
            out["unknown"] = e
        out["still_mine"] = structured(await session.call_tool("list_accounts", {}))
        return out

    out = run(server, body)
    for key in ("other_balance", "other_fd", "second_verify", "bad_type", "injection"):
        assert is_error(out[key]) and text_of(out[key]).startswith("Error: "), (key, as_dict(out[key]))
    assert "another customer" in text_of(out["second_verify"])
    assert other_account not in json.dumps(out["still_mine"])
    assert out["unknown"] is not None and "Unknown tool" in str(out["unknown"]), repr(out["unknown"])
    server.assert_alive()


def test_token_required(server):
    wrong = server.token[:-1] + ("a" if server.token[-1] != "a" else "b")
    for token in ("", wrong, server.token + "x", server.token[:8]):
        status, headers, body = server.post(INIT, token=token)
        assert status == 401, (token, status)
        assert headers["WWW-Authenticate"].startswith("Bearer")
        assert body["error"]["code"] == -32600 and "Mcp-Session-Id" not in headers
    # Another scheme, and the token alone, are refused as well.
    for value in (f"Basic {server.token}", server.token, f"Bearer{server.token}"):
        assert server.post(INIT, headers={"Authorization": value})[0] == 401
    sid = server.initialize()
    # A valid session id does not stand in for the token.
    assert server.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, sid, token="")[0] == 401
    assert server.request("GET", {})[0] == 401
    assert server.request("DELETE", {"Mcp-Session-Id": sid})[0] == 401
    server.assert_alive()


def test_sessions_are_separate(server, fd_task):
    verify = gold_args(fd_task, "verify_customer")
    account = gold_args(fd_task, "create_fd")["source_account"]
    a, b = server.initialize(), server.initialize()
    assert a != b and re.fullmatch(r"[0-9a-f]{64}", a) and re.fullmatch(r"[0-9a-f]{64}", b)
    status, _, body = server.call(a, "verify_customer", verify)
    assert status == 200 and structured_raw(body)["verified"] is True
    assert structured_raw(server.call(a, "get_account_balance", {"account_ids": [account]})[2])
    # B's own session knows nothing of A's verified customer.
    status, _, body = server.call(b, "get_account_balance", {"account_ids": [account]})
    assert status == 200 and body["result"]["isError"] is True and "verify_customer" in raw_text(body)
    # Ids that were never issued: A's with one character changed, another length, garbage.
    forged = a[:-1] + ("0" if a[-1] != "0" else "1")
    for sid in (forged, a[:-2], a + "0", "x" * 64, "../" + a):
        status, _, body = server.call(sid, "get_account_balance", {"account_ids": [account]})
        assert status == 404, (sid, status)
        assert "result" not in body and account not in json.dumps(body)
    # An ended session is gone for everyone; the other one still serves.
    assert server.request("DELETE", {"Authorization": f"Bearer {server.token}", "Mcp-Session-Id": a})[0] == 204
    assert server.call(a, "get_account_balance", {"account_ids": [account]})[0] == 404
    assert server.request("DELETE", {"Authorization": f"Bearer {server.token}", "Mcp-Session-Id": a})[0] == 404
    assert server.post({"jsonrpc": "2.0", "id": 3, "method": "ping"}, b)[0] == 200
    server.assert_alive()


def structured_raw(body):
    assert body["result"]["isError"] is False, body
    return body["result"]["structuredContent"]


def raw_text(body):
    return body["result"]["content"][0]["text"]


def test_session_id_required_after_initialize(server):
    server.initialize()
    status, _, body = server.post({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
    assert status == 400 and body["error"]["code"] == -32600 and "Mcp-Session-Id" in body["error"]["message"]
    assert body["id"] == 4
    assert server.post({"jsonrpc": "2.0", "method": "notifications/initialized"})[0] == 400
    assert server.request("DELETE", {"Authorization": f"Bearer {server.token}"})[0] == 400
    server.assert_alive()


def test_protocol_version_header(server):
    sid = server.initialize()
    ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
    assert server.post(ping, sid, headers={"MCP-Protocol-Version": "2025-11-25"})[0] == 200
    for version in ("2025-06-18", "2024-11-05", "banana"):
        status, _, body = server.post(ping, sid, headers={"MCP-Protocol-Version": version})
        assert status == 400 and "MCP-Protocol-Version" in body["error"]["message"], version
    server.assert_alive()


def test_bodies_refused(server):
    sid = server.initialize()
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"' + b"x" * 2_000_000 + b'"}}'
    status, _, body = server.post(None, sid, body=big)
    assert status == 413 and "1048576" in body["error"]["message"]
    status, _, body = server.post(None, sid, body=b"{not json")
    assert status == 400 and body["error"]["code"] == -32700
    status, _, body = server.post(None, sid, body=b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]')
    assert status == 400 and body["error"]["code"] == -32600
    assert server.post(None, sid, body=b"{}", headers={"Content-Type": "text/plain"})[0] == 415
    assert server.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid, headers={"Accept": "text/html"})[0] == 406
    # Pretty-printed JSON is one message too.
    status, _, body = server.post(None, sid, body=b'{\n  "jsonrpc": "2.0",\n  "id": 9,\n  "method": "ping"\n}\n')
    assert status == 200 and body["id"] == 9
    server.assert_alive()


def test_origin_and_host_checked(tmp_path):
    s = Server(tmp_path, "--allow-origin", "https://agent.example")
    try:
        ping_init = INIT
        for origin in ("http://evil.example", f"http://evil.example:{s.port}", "null", "http://127.0.0.1.evil.example",
                       "file://", "https://agent.example.evil"):
            status, _, body = s.post(ping_init, headers={"Origin": origin})
            assert status == 403, origin
            assert body["error"]["code"] == -32600
        for origin in (f"http://localhost:{s.port}", f"http://127.0.0.1:{s.port}", "https://agent.example"):
            assert s.post(ping_init, headers={"Origin": origin})[0] == 200, origin
        for host in ("evil.example", f"evil.example:{s.port}", "127.0.0.1:abc"):
            assert s.post(ping_init, headers={"Host": host})[0] == 421, host
        assert s.post(ping_init, headers={"Host": f"localhost:{s.port}"})[0] == 200
        assert s.request("GET", {"Authorization": f"Bearer {s.token}"})[0] == 405
        s.assert_alive()
    finally:
        s.stop()


def test_session_limit_and_idle_expiry(tmp_path):
    s = Server(tmp_path, "--max-sessions", 2, "--session-idle-s", 1)
    try:
        a, b = s.initialize(), s.initialize()
        status, _, body = s.post(INIT)
        assert status == 503 and body["error"]["code"] == -32603
        time.sleep(2.5)  # both idle past 1 s: the sweeper frees them
        assert "idle session" in s.log_path.read_text()
        for sid in (a, b):
            assert s.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid)[0] == 404
        s.assert_alive()
    finally:
        s.stop()


def test_two_sessions_book_concurrently(tmp_path, fd_task):
    s = Server(tmp_path)
    try:
        verify = gold_args(fd_task, "verify_customer")
        account = gold_args(fd_task, "create_fd")["source_account"]

        async def read_balance(session, _):
            await session.call_tool("verify_customer", verify)
            return balance_of(await session.call_tool("get_account_balance", {"account_ids": [account]}), account)

        start = run(s, read_balance)
        per_session = 10
        amount = float(int(start / (per_session * 1.5)))  # 20 bookings, about 15 fit
        assert amount >= 1000

        async def book_many(session, _):
            await session.call_tool("verify_customer", verify)
            booked = 0
            for _ in range(per_session):
                r = await session.call_tool(
                    "create_fd", {"principal_amount": amount, "tenure_months": 12, "source_account": account})
                if is_error(r):
                    assert "insufficient balance" in text_of(r), text_of(r)
                else:
                    booked += 1
            return booked

        async def both():
            return await asyncio.gather(with_sdk_session(s, book_many), with_sdk_session(s, book_many))

        booked = sum(asyncio.run(both()))
        assert 0 < booked < 2 * per_session
        end = run(s, read_balance)
        assert end == pytest.approx(start - booked * amount, abs=0.001)
        assert 0 <= end < amount
    finally:
        s.stop()


def start_fails(tmp_path, *args, token=None, create=True):
    db = tmp_path / f"b-{secrets.token_hex(3)}.sqlite"
    env = {k: v for k, v in os.environ.items() if k != "FIMI_MCP_TOKEN"}
    if token is not None:
        env["FIMI_MCP_TOKEN"] = token
    cmd = [FIMI_BIN, "mcp", "serve", "--db", str(db), *map(str, args)] + (["--create"] if create else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert proc.returncode != 0
    return proc.stderr


def test_refuses_to_start_unsafely(tmp_path):
    good = secrets.token_urlsafe(32)
    assert "loopback" in start_fails(tmp_path, "--http", "0.0.0.0:0", token=good)
    assert "FIMI_MCP_TOKEN" in start_fails(tmp_path, "--http", "127.0.0.1:0")
    assert "16" in start_fails(tmp_path, "--http", "127.0.0.1:0", token="short")
    token_file = tmp_path / "token"
    token_file.write_text(good + "\n")
    token_file.chmod(0o644)
    assert "chmod 600" in start_fails(tmp_path, "--http", "127.0.0.1:0", "--token-file", token_file)
    assert "need --http" in start_fails(tmp_path, "--token-file", token_file)
    assert "not an IPv4" in start_fails(tmp_path, "--http", "example.com:80", token=good)


def test_token_file(tmp_path):
    token_file = tmp_path / "token"
    token = secrets.token_urlsafe(32)
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    s = Server(tmp_path, "--token-file", token_file)
    try:
        env_token, s.token = s.token, token  # the file wins over the environment
        s.assert_alive()
        assert s.post(INIT, token=env_token)[0] == 401
    finally:
        s.stop()
