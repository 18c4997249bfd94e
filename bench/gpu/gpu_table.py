#!/usr/bin/env python3
"""bench/gpu/gpu_table.py: the final table of tests/gpu/check.sh.

Reads a log, keeps every GPU_RESULT line (tests/gpu/gpu_test.h gpu_report:
GPU_RESULT|op|shape|err|pass|ms|tflops|gbps, possibly after a ctest "N: "
prefix) in order of appearance, and prints them as aligned columns. Each
TFLOP/s is also shown as a share of the GEMM ceiling and each GB/s as a share
of the copy bandwidth, both measured in the same run by bench_gpu_ceilings
(ops ceiling_gemm_bf16 and ceiling_copy_d2d); "-" where not measured.
Usage: gpu_table.py LOG [--out FILE]   (prints the table; FILE gets a copy)
"""
import sys

GEMM_CEILING = "ceiling_gemm_bf16"
COPY_CEILING = "ceiling_copy_d2d"
MARK = "GPU_RESULT|"


def parse(lines):
    rows = []
    for line in lines:
        at = line.find(MARK)
        if at < 0:
            continue
        parts = line[at:].rstrip("\n").split("|")
        if len(parts) < 8:
            continue
        op = parts[1]
        shape = "|".join(parts[2:-5])  # a shape holding '|' stays whole
        err, verdict, ms, tflops, gbps = parts[-5:]
        try:
            ms_v, tf_v, gb_v = float(ms), float(tflops), float(gbps)
        except ValueError:
            continue
        rows.append((op, shape, err, verdict, ms_v, tf_v, gb_v))
    return rows


def ceiling(rows, op, index):
    best = 0.0
    for row in rows:
        if row[0] == op and row[index] > best:
            best = row[index]
    return best


def table(rows):
    gemm = ceiling(rows, GEMM_CEILING, 5)
    copy = ceiling(rows, COPY_CEILING, 6)
    head = ["op", "shape", "max rel err", "pass", "ms", "TFLOP/s", "%gemm", "GB/s", "%copy"]
    body = []
    for op, shape, err, verdict, ms, tf, gb in rows:
        # gpu_report prints error -1 for benchmarks: nothing was compared.
        err_text = "-" if verdict == "-" else err
        tf_text = f"{tf:.1f}" if tf > 0 else "-"
        gb_text = f"{gb:.1f}" if gb > 0 else "-"
        tf_pct = f"{100.0 * tf / gemm:.0f}%" if tf > 0 and gemm > 0 else "-"
        gb_pct = f"{100.0 * gb / copy:.0f}%" if gb > 0 and copy > 0 else "-"
        body.append([op, shape[:48], err_text, verdict, f"{ms:.4f}", tf_text, tf_pct, gb_text, gb_pct])
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    right = {2, 4, 5, 6, 7, 8}  # numbers right-aligned

    def fmt(r):
        cells = [r[i].rjust(widths[i]) if i in right else r[i].ljust(widths[i]) for i in range(len(r))]
        return "  ".join(cells).rstrip()

    out = [fmt(head), "  ".join("-" * w for w in widths)]
    out += [fmt(r) for r in body]
    notes = []
    notes.append(f"GEMM ceiling ({GEMM_CEILING}): " + (f"{gemm:.1f} TFLOP/s" if gemm > 0 else "not measured"))
    notes.append(f"copy ceiling ({COPY_CEILING}, read+write bytes): " + (f"{copy:.1f} GB/s" if copy > 0 else "not measured"))
    failed = sum(1 for r in rows if r[3] == "FAIL")
    notes.append(f"{len(rows)} GPU_RESULT lines, {failed} FAIL")
    return "\n".join(out + notes)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1], errors="replace") as f:
        rows = parse(f)
    text = table(rows) if rows else "(no GPU_RESULT lines)"
    print(text)
    if len(argv) >= 4 and argv[2] == "--out":
        with open(argv[3], "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
