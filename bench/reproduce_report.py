"""bench/reproduce_report.py: OUT/REPORT.md of bench/reproduce.sh, from the
files its stages wrote (every number read from them, none typed in), beside
the FiMI paper's numbers (quoted from its text, section 5.4-5.7 and 4.5).
A stage that has not run yet is reported as such.

Usage: python3 bench/reproduce_report.py OUT > OUT/REPORT.md
"""
import glob
import json
import os
import platform
import sys

OUT = sys.argv[1]
KINDS = ["happy", "seq", "edge", "tools"]
# The paper's E4B before/after GRPO (Figure 11, Tables 15, 16, 19).
PAPER = {"overall": (0.610, 0.697), "happy": (0.821, 0.812), "seq": (0.655, 0.713), "edge": (0.509, 0.718),
         "tools": (0.487, 0.526), "band": (26.0, 17.7)}


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def done(stage):
    return os.path.exists(os.path.join(OUT, stage, "DONE"))


def f3(x):
    return "-" if x is None else f"{x:.3f}"


def kind_reward(summary, kind):
    k = summary.get("kind", {}).get(kind)
    return k["reward"] if k and k.get("episodes") else None


def band(summary):
    b = summary.get("band") or {}
    return [100 * b.get(k, 0) for k in ("always_fail", "split", "always_pass")]


def stage_times():
    print("## Stages\n\n| stage | wall time | peak memory |\n|---|---:|---:|")
    for stage in ["data", "pretrain", "sft", "ladder", "grpo", "dpo", "report"]:
        d = os.path.join(OUT, stage)
        try:
            secs = int(open(os.path.join(d, "seconds")).read())
            wall = f"{secs // 60} min {secs % 60:02d} s"
        except (OSError, ValueError):
            wall = "(this one)" if stage == "report" else "not run"
        try:
            peak = f"{int(open(os.path.join(d, 'peak_kib')).read().split()[-1]) / 1024:.0f} MiB"
        except (OSError, ValueError, IndexError):
            peak = "-"
        print(f"| {stage} | {wall} | {peak} |")
    print()


def ladder():
    print("## The capability ladder and the band (paper Tables 12, 13)\n")
    files = sorted(glob.glob(os.path.join(OUT, "ladder", "*.json")), key=os.path.getmtime)
    if not files:
        print("Not run yet.\n")
        return
    if not done("ladder"):
        print("The stage did not finish; the evaluations below did.\n")
    print("| model | parameters | overall | strict | " + " | ".join(KINDS) +
          " | always fail % | band % | always pass % | generated tokens per dialog |")
    print("|---|---:|---:|---:|" + "---:|" * len(KINDS) + "---:|---:|---:|---:|")
    for path in files:
        r = load(path)
        s = r["summary"]
        af, sp, ap = band(s)
        print(f"| {r['label']} | {r.get('parameters', 0):,} | {f3(s['overall']['reward'])} | "
              f"{f3(s['overall']['strict'])} | " + " | ".join(f3(kind_reward(s, k)) for k in KINDS) +
              f" | {af:.1f} | {sp:.1f} | {ap:.1f} | {s['dialog']['generated_tokens']:.1f} |")
    print("\nPaper (E2B ... MiniMax-M2.7, 1,000 tasks): overall rises at every rung (E4B 0.610); "
          "always-fail falls from 39.9% to 9.3% up the ladder, the band stays near a fifth.\n")


def grpo():
    print("## GRPO before and after (paper Tables 15, 16, 19; Figure 10)\n")
    base = load(os.path.join(OUT, "grpo", "base.json"))
    runs = sorted(p for p in glob.glob(os.path.join(OUT, "grpo", "grpo-seed*.json"))
                  if os.path.exists(p.replace("grpo-seed", "compare-seed")))
    if not base or not runs:
        print("Not run yet.\n")
        return
    if not done("grpo"):
        print("The stage did not finish; the seeds below did.\n")
    for path in runs:
        seed = path.rsplit("seed", 1)[1].split(".")[0]
        after = load(path)
        cmp_ = load(os.path.join(OUT, "grpo", f"compare-seed{seed}.json")) or {}
        print(f"### Seed {seed}\n")
        print("| slice | base | after GRPO | paper base | paper after | sign test p |\n|---|---:|---:|---:|---:|---:|")
        slices = dict(cmp_.get("kind", {}), overall=cmp_.get("overall", {}))
        for k in ["overall"] + KINDS:
            b = base["summary"]["overall"]["reward"] if k == "overall" else kind_reward(base["summary"], k)
            a = after["summary"]["overall"]["reward"] if k == "overall" else kind_reward(after["summary"], k)
            p = slices.get(k, {}).get("sign_test_p")
            pb, pa = PAPER[k]
            print(f"| {k} | {f3(b)} | {f3(a)} | {pb:.3f} | {pa:.3f} | {'-' if p is None else f'{p:.3g}'} |")
        bb, ab = band(base["summary"]), band(after["summary"])
        print(f"\nBand (2 trials): always fail {bb[0]:.1f}% -> {ab[0]:.1f}%, split {bb[1]:.1f}% -> {ab[1]:.1f}% "
              f"(paper {PAPER['band'][0]}% -> {PAPER['band'][1]}%), always pass {bb[2]:.1f}% -> {ab[2]:.1f}%.")
        bd, ad = base["summary"]["dialog"], after["summary"]["dialog"]
        print(f"Per dialog: generated tokens {bd['generated_tokens']:.1f} -> {ad['generated_tokens']:.1f} "
              f"(paper: 29% fewer), turns {bd['turns']:.2f} -> {ad['turns']:.2f}, tool calls "
              f"{bd['tool_calls']:.2f} -> {ad['tool_calls']:.2f}.")
        rows = [json.loads(l) for l in open(os.path.join(OUT, "grpo", f"seed{seed}", "metrics.jsonl"))]
        fails = [r.get("all_fail_groups") for r in rows if r.get("all_fail_groups") is not None]
        if fails:
            n = max(1, len(fails) // 4)
            print(f"All-fail groups per step: first {n} steps {sum(fails[:n]) / n:.2f}, last {n} "
                  f"{sum(fails[-n:]) / n:.2f} (of 16 groups).")
        print(f"Plots: `grpo/plots-seed{seed}/` (Figure 10 panels), `grpo/plots-results/`.\n")


def dpo():
    print("## DPO: the judged bench and the divergence rate (paper Tables 7-9)\n")
    if not done("dpo"):
        print("Not run yet.\n")
        return
    bench = {side: (load(os.path.join(OUT, "dpo", f"bench-{side}.json")) or {}).get("summary", {})
             for side in ["base", "dpo"]}
    cats = ["overall"] + sorted(bench["base"].get("categories", {}))
    print("| category | cases | Pass^3 base | Pass^3 DPO | Pass@3 base | Pass@3 DPO | Mean base | Mean DPO | "
          "Avg@3 base | Avg@3 DPO |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cats:
        row = [bench[s].get("overall") if c == "overall" else bench[s].get("categories", {}).get(c) for s in bench]
        if not all(row):
            continue
        cells = " | ".join(f"{f3(row[0][m])} | {f3(row[1][m])}" for m in ["pass_hat_n", "pass_at_n", "mean", "avg_at_n"])
        print(f"| {c} | {row[0]['cases']} | {cells} |")
    rates = []
    for name in ["pairs_held.jsonl", "after_held.jsonl"]:
        s = load(os.path.join(OUT, "dpo", name + ".summary.json")) or {}
        rates.append(s.get("divergence_rate"))
    print(f"\nHeld-out divergence rate: {f3(rates[0])} -> {f3(rates[1])}. Paper: capability-category "
          "Pass^3 +22 points, out-of-scope refusal 52% -> 80%.\n")


print("# The FiMI paper's results at small scale: report of bench/reproduce.sh\n")
print(f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores. "
      "Every number below is read from the files of this run (OUT); docs/reproduction.md says what they mean.\n")
stage_times()
ladder()
grpo()
dpo()
