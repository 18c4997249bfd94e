#!/usr/bin/env bash
# bench/tokenizer_speed.sh: fimi's tokenizer vs the Python `tokenizers`
# library, encoding the same text with the same tokenizer.json on one core.
# Defines nothing to build: needs an existing build (bench_tokenizer target)
# and a Python with `tokenizers`. Builds, with `tokenizers`, two tokenizers
# trained on a generated mixed text (English, Hinglish, Devanagari, emoji,
# amounts, account ids, JSON; ~2 MB, seeded): a Gemma-style SentencePiece BPE
# with byte fallback and a GPT-2-style byte-level BPE (vocab 16k each), unless
# TOKENIZER files are given. Then times, single-threaded
# (RAYON_NUM_THREADS=1, TOKENIZERS_PARALLELISM=false):
#   fimi   lines: tokenizer_encode per line        whole: one call for the file
#   python lines: Tokenizer.encode per line        batch: encode_batch(lines)
# and prints MB/s of input text per row plus the ratio fimi/python (lines vs lines).
#
# Usage: bench/tokenizer_speed.sh BUILD_DIR [TOKENIZER_JSON ...]
# Env:   PYTHON (default .venv/bin/python in the repo, then python3), SECONDS_MIN (default 2)
set -euo pipefail
build=${1:?usage: tokenizer_speed.sh BUILD_DIR [TOKENIZER_JSON ...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-$here/../.venv/bin/python}
[ -x "$python" ] || python=python3
bench=$build/bench/bench_tokenizer
[ -x "$bench" ] || { echo "tokenizer_speed.sh: $bench not found (cmake --build $build --target bench_tokenizer)" >&2; exit 1; }
export RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=1
secs=${SECONDS_MIN:-2}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$python" - "$dir" "$here/../tests/interop/tokenizer_corpus.txt" "$@" <<'PY'
import json, random, sys
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, decoders, trainers
out, corpus = sys.argv[1], sys.argv[2]
lines = [l for l in open(corpus, encoding="utf-8").read().split("\n") if l]
words = " ".join(lines).split(" ")
rng = random.Random(7)
text = []
size = 0
while size < 2_000_000:
    kind = rng.random()
    if kind < 0.15:
        s = f"Transfer ₹{rng.randrange(1, 99)},{rng.randrange(0, 99):02d},{rng.randrange(0, 999):03d}.{rng.randrange(0, 99):02d} to SB-{rng.randrange(10**10, 10**11)}"
    elif kind < 0.25:
        s = json.dumps({"name": rng.choice(["get_balance", "transfer", "block_card"]),
                        "arguments": {"account_id": f"SB-{rng.randrange(10**10)}", "amount": rng.randrange(10**6) / 100}},
                       ensure_ascii=False)
    else:
        s = " ".join(rng.choice(words) for _ in range(rng.randrange(5, 30)))
    text.append(s)
    size += len(s.encode()) + 1
open(f"{out}/text.txt", "w", encoding="utf-8").write("\n".join(text) + "\n")
if len(sys.argv) > 3:
    for i, p in enumerate(sys.argv[3:]):
        Tokenizer.from_file(p).save(f"{out}/given{i}.json")
    sys.exit(0)
specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<tool_call>", "</tool_call>"]
sp = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
sp.normalizer = normalizers.Replace(" ", "▁")
sp.pre_tokenizer = pre_tokenizers.Split("▁", "merged_with_next")
sp.train([f"{out}/text.txt"], trainers.BpeTrainer(vocab_size=16000, special_tokens=specials, show_progress=False,
                                                  limit_alphabet=300))
spec = json.loads(sp.to_str())
for b in range(256):
    spec["model"]["vocab"].setdefault(f"<0x{b:02X}>", len(spec["model"]["vocab"]))
# Gemma 2 layout: no pre-tokenizer, a whole line is one BPE word
spec["pre_tokenizer"] = None
spec["decoder"] = {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                    {"type": "ByteFallback"}, {"type": "Fuse"}]}
Tokenizer.from_str(json.dumps(spec)).save(f"{out}/gemma_style.json")
bl = Tokenizer(models.BPE())
bl.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
bl.decoder = decoders.ByteLevel()
bl.train([f"{out}/text.txt"], trainers.BpeTrainer(vocab_size=16000, special_tokens=specials, show_progress=False,
                                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
bl.save(f"{out}/byte_level.json")
PY

py_bench() {
  "$python" - "$1" "$dir/text.txt" "$secs" <<'PY'
import sys, time
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
text = open(sys.argv[2], encoding="utf-8").read()
lines = text.split("\n")
size = len(text.encode())
secs = float(sys.argv[3])
def run(fn):
    fn()
    n, t0 = 0, time.perf_counter()
    while True:
        fn(); n += 1
        dt = time.perf_counter() - t0
        if dt >= secs:
            return size * n / dt / 1e6
lines_mbs = run(lambda: [tok.encode(l, add_special_tokens=False) for l in lines])
batch_mbs = run(lambda: tok.encode_batch(lines, add_special_tokens=False))
print(f"{lines_mbs:.3f} {batch_mbs:.3f}")
PY
}

printf "%-18s %14s %14s %14s %14s %10s\n" tokenizer "fimi lines" "fimi whole" "python lines" "python batch" "fimi/py"
for tj in "$dir"/*.json; do
  name=$(basename "$tj" .json)
  ours_lines=$("$bench" "$tj" "$dir/text.txt" --mode lines --seconds "$secs" --json | sed 's/.*"mb_per_s":\([0-9.]*\).*/\1/')
  ours_whole=$("$bench" "$tj" "$dir/text.txt" --mode whole --seconds "$secs" --json | sed 's/.*"mb_per_s":\([0-9.]*\).*/\1/')
  read -r py_lines py_batch < <(py_bench "$tj")
  ratio=$(awk -v a="$ours_lines" -v b="$py_lines" 'BEGIN { printf "%.2fx", a / b }')
  printf "%-18s %9.2f MB/s %9.2f MB/s %9.2f MB/s %9.2f MB/s %10s\n" "$name" "$ours_lines" "$ours_whole" "$py_lines" "$py_batch" "$ratio"
done
