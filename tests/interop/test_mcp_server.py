"""`fimi mcp serve` against the official Python MCP SDK (PyPI `mcp`), over stdio.

The SDK's ClientSession (in both the 1.x and 2.x series) spawns the server,
initializes, lists the tools and calls them: a customer journey (verify,
balance, book an FD, the balance again, a statement), a read refused before
verification, other customers' accounts and a second customer refused, bad
arguments answered as tool errors, unknown tools as protocol errors. Two
server processes on one file: a write through one is seen by the other, and
two booking concurrently from one account never overdraw and lose nothing.
Customers, accounts and amounts come from `fimi env sample` (the task
generator), not from this file.

Run: FIMI_BIN=build/cmd/fimi .venv/bin/pytest tests/interop/test_mcp_server.py
"""
import asyncio
import json
import os
import subprocess

import pytest

mcp = pytest.importorskip("mcp", reason="the Python MCP SDK (pip install mcp) is not installed")
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIMI_BIN = os.environ.get(
    "FIMI_BIN", os.path.join(os.environ.get("FIMI_BUILD_DIR", os.path.join(REPO_ROOT, "build")), "cmd", "fimi")
)
pytestmark = pytest.mark.skipif(not os.access(FIMI_BIN, os.X_OK), reason=f"fimi binary not found at {FIMI_BIN}")


def fimi(*args):
    return subprocess.run([FIMI_BIN, *map(str, args)], capture_output=True, text=True, timeout=300, check=True).stdout


def sample_task(family, seed=1):
    line = fimi("env", "sample", "--family", family, "--n", "1", "--seed", seed).splitlines()[0]
    return json.loads(line)


def gold_args(task, name):
    return next(step["arguments"] for step in task["gold"] if step["name"] == name)


def as_dict(model):
    """camelCase JSON of an SDK object, the same in the 1.x and 2.x series."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def text_of(result):
    return as_dict(result)["content"][0]["text"]


def is_error(result):
    return bool(as_dict(result).get("isError"))


def structured(result):
    data = as_dict(result)
    assert not data.get("isError"), data
    return data.get("structuredContent") or json.loads(data["content"][0]["text"])


async def with_session(db, body, create=False):
    args = ["mcp", "serve", "--db", str(db)] + (["--create"] if create else [])
    params = StdioServerParameters(command=FIMI_BIN, args=args)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            return await body(session, init)


def run(db, body, create=False):
    return asyncio.run(with_session(db, body, create))


def balance_of(result, account):
    data = structured(result)
    return next(a["balance"] for a in data["balances"] if a["account_id"] == account)


@pytest.fixture(scope="module")
def fd_task():
    return sample_task("fd_paper", 3)


def test_initialize_and_list_tools(tmp_path):
    catalog = json.loads(fimi("env", "tools", "--json"))

    async def body(session, init):
        assert as_dict(init)["protocolVersion"] in ("2025-11-25", "2025-06-18")
        assert as_dict(init)["serverInfo"]["name"] == "fimi"
        assert "tools" in as_dict(init)["capabilities"]
        return as_dict(await session.list_tools())["tools"]

    tools = run(tmp_path / "bank.sqlite", body, create=True)
    assert len(tools) == len(catalog) > 50
    by_name = {t["name"]: t for t in tools}
    for entry in catalog:
        tool = by_name[entry["name"]]
        assert tool["inputSchema"] == entry["parameters"]
        assert tool["inputSchema"]["type"] == "object"
        assert tool["description"] == entry["description"]
        assert "annotations" in tool and "readOnlyHint" in tool["annotations"]
    assert by_name["get_account_balance"]["annotations"]["readOnlyHint"] is True
    assert by_name["create_fd"]["annotations"]["readOnlyHint"] is False
    assert by_name["create_fd"]["annotations"]["destructiveHint"] is True
    assert by_name["transfer_funds"]["_meta"]["fimi/charged"] is True
    assert by_name["create_fd"]["_meta"]["fimi/charged"] is False


def test_customer_journey(tmp_path, fd_task):
    verify = gold_args(fd_task, "verify_customer")
    create = gold_args(fd_task, "create_fd")
    account = create["source_account"]

    async def body(session, _):
        refused = await session.call_tool("get_account_balance", {"account_ids": [account]})
        assert is_error(refused) and "verify_customer" in text_of(refused)
        ok = await session.call_tool("verify_customer", verify)
        assert structured(ok)["verified"] is True
        before = balance_of(await session.call_tool("get_account_balance", {"account_ids": [account]}), account)
        fd = structured(await session.call_tool("create_fd", create))
        after = balance_of(await session.call_tool("get_account_balance", {"account_ids": [account]}), account)
        deposits = structured(await session.call_tool("list_deposits", {}))
        statement = await session.call_tool(
            "request_statement",
            {"account_id": account, "from_date": "2025-10-01", "to_date": "2026-01-15", "delivery": "email"},
        )
        return before, fd, after, deposits, statement

    before, fd, after, deposits, statement = run(tmp_path / "bank.sqlite", body, create=True)
    assert after == pytest.approx(before - create["principal_amount"], abs=0.001)
    assert fd["fd_id"] in json.dumps(deposits)
    assert not is_error(statement), text_of(statement)


def test_refusals_and_tool_errors(tmp_path, fd_task):
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
            "create_fd", {"principal_amount": 5000, "tenure_months": 12, "source_account": other_account}
        )
        out["second_verify"] = await session.call_tool("verify_customer", other_verify)
        out["bad_type"] = await session.call_tool(
            "create_fd", {"principal_amount": "lots", "tenure_months": 12, "source_account": "SB1"}
        )
        out["missing"] = await session.call_tool("create_fd", {"tenure_months": 12})
        out["extra"] = await session.call_tool("list_accounts", {"sql": "SELECT * FROM customers"})
        out["injection"] = await session.call_tool("get_account_balance", {"account_ids": ["' OR '1'='1"]})
        try:
            await session.call_tool("drop_all_tables", {})
            out["unknown"] = None
        except Exception as e:  # McpError in both series
            out["unknown"] = e
        out["still_mine"] = structured(await session.call_tool("list_accounts", {}))
        return out

    out = run(tmp_path / "bank.sqlite", body, create=True)
    for key in ("other_balance", "other_fd", "second_verify", "bad_type", "missing", "extra", "injection"):
        assert is_error(out[key]), (key, as_dict(out[key]))
        assert text_of(out[key]).startswith("Error: "), key
    assert "another customer" in text_of(out["second_verify"])
    assert "principal_amount" in text_of(out["bad_type"])
    assert "missing required argument" in text_of(out["missing"])
    assert "has no argument" in text_of(out["extra"])
    assert other_account not in json.dumps(out["still_mine"])
    assert out["unknown"] is not None and "Unknown tool" in str(out["unknown"]), repr(out["unknown"])


def test_write_seen_by_second_process(tmp_path, fd_task):
    db = tmp_path / "bank.sqlite"
    verify = gold_args(fd_task, "verify_customer")
    create = gold_args(fd_task, "create_fd")

    async def book(session, _):
        await session.call_tool("verify_customer", verify)
        return structured(await session.call_tool("create_fd", create))["fd_id"]

    async def look(session, _):
        await session.call_tool("verify_customer", verify)
        return structured(await session.call_tool("list_deposits", {}))

    fd_id = run(db, book, create=True)
    assert fd_id in json.dumps(run(db, look))
    # --create on an existing file is refused: the bank is never overwritten.
    again = subprocess.run([FIMI_BIN, "mcp", "serve", "--db", str(db), "--create"], input="", capture_output=True,
                           text=True, timeout=60)
    assert again.returncode != 0 and "exists" in again.stderr


def test_two_processes_book_concurrently(tmp_path, fd_task):
    db = tmp_path / "bank.sqlite"
    verify = gold_args(fd_task, "verify_customer")
    account = gold_args(fd_task, "create_fd")["source_account"]

    async def read_balance(session, _):
        await session.call_tool("verify_customer", verify)
        return balance_of(await session.call_tool("get_account_balance", {"account_ids": [account]}), account)

    start = run(db, read_balance, create=True)
    per_process = 10
    amount = float(int(start / (per_process * 1.5)))  # 20 bookings, about 15 fit
    assert amount >= 1000

    async def book_many(session, _):
        await session.call_tool("verify_customer", verify)
        booked = 0
        for _ in range(per_process):
            r = await session.call_tool(
                "create_fd", {"principal_amount": amount, "tenure_months": 12, "source_account": account}
            )
            if is_error(r):
                assert "insufficient balance" in text_of(r), text_of(r)
            else:
                booked += 1
        return booked

    async def both():
        return await asyncio.gather(with_session(db, book_many), with_session(db, book_many))

    booked = sum(asyncio.run(both()))
    assert 0 < booked < 2 * per_process
    end = run(db, read_balance)
    assert end == pytest.approx(start - booked * amount, abs=0.001)
    assert 0 <= end < amount


def test_raw_framing_errors_keep_serving(tmp_path):
    lines = [
        "{bad json",
        '[{"jsonrpc":"2.0","id":1,"method":"ping"}]',
        '{"jsonrpc":"1.0","id":2,"method":"ping"}',
        '{"jsonrpc":"2.0","id":3,"method":"no/such/method"}',
        '{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}',
        '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_accounts","arguments":[]}}',
        '{"jsonrpc":"2.0","id":6,"method":"ping"}',
    ]
    payload = ("\n".join(lines) + "\n").encode() + b'{"jsonrpc":"2.0","id":7,"method":"p\xffng"}\n' + b"x" * 2_000_000
    payload += b'\n{"jsonrpc":"2.0","id":8,"method":"ping"}\n'
    proc = subprocess.run([FIMI_BIN, "mcp", "serve", "--db", str(tmp_path / "b.sqlite"), "--create"], input=payload,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    responses = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    codes = [r.get("error", {}).get("code") for r in responses]
    assert codes == [-32700, -32600, -32600, -32601, None, -32602, None, -32700, -32600, None]
    assert responses[-1]["id"] == 8 and responses[-1]["result"] == {}
