#!/usr/bin/env python3
"""bench/copy_drills.py: the pretraining text of the small-scale study
(bench/reproduce.sh, stage pretrain; docs/reproduction.md).

A model of about a million parameters trained from scratch on the bank's
dialogs does not learn to copy a value from the conversation into a tool
call within a CPU budget: after 600 SFT steps it still writes the same
made-up customer id for every customer. A pretrained model can copy before
it ever sees the bank. These drills give the small model that skill first,
in short rows where copying is the only way to predict most tokens:

  repeat   a list of random values, a newline, the same list again
  episode  an agent asks for 2-4 values one at a time, the customer states
           them, the agent puts them into a tool call (in random order), the
           tool returns random values and the agent reads some of them back

Every value is random (formats like the bank's: customer ids, account and
card numbers, dates, amounts), tool and argument names are drawn at random
from a fixed list, and no row follows a task family's procedure: the drills
teach copying, not the bank. Output: JSONL rows for `fimi data tokenize
--kind sft --loss all` (repeat rows as {"prompt": "", "completion": ...},
episodes as {"messages": [...]}).

Usage: copy_drills.py ROWS SEED OUT.jsonl [--episodes-only]
"""
import json
import random
import sys


def digits(r, n):
    return "".join(str(r.randrange(10)) for _ in range(n))


VALUES = {
    "customer_id": lambda r: "NVC1" + digits(r, 4),
    "date_of_birth": lambda r: "%04d-%02d-%02d" % (r.randrange(1940, 2006), r.randrange(1, 13), r.randrange(1, 29)),
    "registered_mobile": lambda r: str(r.randrange(6, 10)) + digits(r, 9),
    "account_id": lambda r: r.choice(["SB", "CA"]) + digits(r, 10),
    "from_account": lambda r: r.choice(["SB", "CA"]) + digits(r, 10),
    "source_account": lambda r: "SB" + digits(r, 10),
    "card_id": lambda r: "CRD" + digits(r, 6),
    "beneficiary_id": lambda r: "BEN" + digits(r, 6),
    "loan_id": lambda r: r.choice(["LN", "HL", "PL", "GL"]) + digits(r, 8),
    "transaction_id": lambda r: "TXN" + digits(r, 8),
    "dispute_id": lambda r: "DSP" + digits(r, 6),
    "claim_id": lambda r: "CLM" + digits(r, 6),
    "amount": lambda r: r.randrange(1, 900) * r.choice([1, 100, 1000]),
    "principal_amount": lambda r: r.randrange(10, 500) * 1000,
    "tenure_months": lambda r: r.randrange(3, 121),
    "cheque_number": lambda r: r.randrange(100000, 1000000),
    "account_number": lambda r: digits(r, 12),
    "ifsc": lambda r: r.choice(["SBIN", "HDFC", "ICIC", "UTIB"]) + "000" + digits(r, 4),
    "name": lambda r: r.choice(["Asha", "Ravi", "Priya", "Arjun", "Meena", "Kiran", "Sunita", "Vikram"]) + " "
    + r.choice(["Kumar", "Sharma", "Iyer", "Patel", "Reddy", "Das", "Nair", "Singh"]),
}
RESULT_KEYS = ["balance", "maturity_amount", "interest", "emi", "reference", "request_id", "outstanding", "charge",
               "available_limit", "new_balance"]
TOOLS = ["verify_customer", "get_account_balance", "transfer_funds", "block_card", "raise_dispute", "get_loan_details",
         "create_fd", "add_beneficiary", "stop_cheque_payment", "get_claim_status", "prepay_loan", "reissue_card"]
ASK = ["Could you please share your {f}?", "Please tell me your {f}.", "What is the {f}?"]
SAY = ["My {f} is {v}.", "Sure, the {f} is {v}.", "It is {v}.", "{v}", "The {f} is {v}, please check."]
TELL = ["The {f} is {v}.", "Your {f} is Rs {v}.", "Done. The {f} is {v}.", "{f}: {v}."]


def result_value(r):
    if r.random() < 0.5:
        return round(r.randrange(100, 10**7) + r.randrange(100) / 100, 2)
    return r.choice(["REF", "TXN", "REQ", "SR"]) + digits(r, r.randrange(6, 11))


def repeat_row(r):
    values = [str(VALUES[k](r)) for k in r.choices(sorted(VALUES), k=r.randrange(4, 9))]
    return {"prompt": "", "completion": " ".join(values) + "\n" + " ".join(values)}


def episode_row(r):
    keys = r.sample(sorted(VALUES), r.randrange(2, 5))
    values = {k: VALUES[k](r) for k in keys}
    messages = [{"role": "user", "content": "Hello, please help me."}]
    for k in keys:
        spoken = k.replace("_", " ")
        messages.append({"role": "assistant", "content": r.choice(ASK).format(f=spoken)})
        messages.append({"role": "user", "content": r.choice(SAY).format(f=spoken, v=values[k])})
    tool = r.choice(TOOLS)
    arguments = {k: values[k] for k in r.sample(keys, len(keys))}
    messages.append({"role": "assistant", "content": "",
                     "tool_calls": [{"type": "function", "function": {"name": tool, "arguments": arguments}}]})
    result = {k: result_value(r) for k in r.sample(RESULT_KEYS, r.randrange(1, 4))}
    messages.append({"role": "tool", "content": json.dumps({"name": tool, "result": result}, separators=(",", ":"))})
    told = r.sample(sorted(result), r.randrange(1, len(result) + 1))
    messages.append({"role": "assistant",
                     "content": " ".join(r.choice(TELL).format(f=k.replace("_", " "), v=result[k]) for k in told)})
    return {"messages": messages}


def main(argv):
    if len(argv) < 4 or not argv[1].isdigit() or not argv[2].lstrip("-").isdigit():
        sys.exit(__doc__.strip().splitlines()[-1])
    rows, r = int(argv[1]), random.Random(int(argv[2]))
    episodes_only = "--episodes-only" in argv[4:]
    with open(argv[3], "w") as out:
        for _ in range(rows):
            row = episode_row(r) if episodes_only or r.random() >= 0.5 else repeat_row(r)
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(sys.argv)
