"""tests/interop/test_bpe_train_interop.py: `fimi tokenizer train` against the
Python `tokenizers` library.

A tokenizer trained by fimi on tests/interop/tokenizer_corpus.txt (English,
Hinglish, Devanagari, emoji, rupee amounts, account ids, JSON, whitespace
runs) must load in `tokenizers`; fimi's encoder must give the same ids as
`tokenizers` on every corpus line and on held-out lines (with and without
the <bos> post-processor); decode(encode(x)) == x. The merges themselves are
checked against a small independent Python implementation of the training
rules in docs/tokenizer-training.md.

Run: FIMI_BIN=build/cmd/fimi .venv/bin/pytest tests/interop/test_bpe_train_interop.py
"""

import collections
import json
import os
import random
import re
import subprocess

import pytest

tokenizers = pytest.importorskip("tokenizers")

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIMI_BIN = os.environ.get(
    "FIMI_BIN", os.path.join(os.environ.get("FIMI_BUILD_DIR", os.path.join(REPO_ROOT, "build")), "cmd", "fimi")
)
CORPUS = os.path.join(REPO_ROOT, "tests", "interop", "tokenizer_corpus.txt")
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "<tool_call>", "</tool_call>"]
VOCAB_SIZE = 2048

pytestmark = pytest.mark.skipif(not os.access(FIMI_BIN, os.X_OK), reason=f"fimi binary not found at {FIMI_BIN}")

# Lines never seen in training: unseen words, rare scripts, characters left
# to byte fallback, whitespace runs, special-token text, byte-token look-alikes.
HELD_OUT = [
    "Namaste! Mera naya account kholna hai, kitna time lagega?",
    "Transfer ₹12,34,567.89 from ACC00098765 to ACC00012345 please",
    "मुझे अपने फिक्स्ड डिपॉजिट की ब्याज दर जाननी है।",
    "  leading spaces, trailing spaces   ",
    "tabs\tand\t\ttabs",
    "emoji 🏦💳🤝 and rare 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ﷺ",
    '{"name": "open_fd", "arguments": {"amount": 250000, "tenure_months": 36}}',
    "<start_of_turn>model\n<tool_call>{\"name\": \"get_balance\"}</tool_call><end_of_turn>",
    "digits ०१२३४५६७८९ and ½ ² Ⅻ",
    "literal <0x41> and <unk> text",
    "Ünïcödé çåfé naïve résumé",
    "",
    " ",
    "x",
    "ACC0000000001ACC",
    "कृपया मेरा KYC अपडेट करें, PAN ABCDE1234F है",
]


def fimi(*args, stdin=None):
    result = subprocess.run([FIMI_BIN, *map(str, args)], input=stdin, capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise AssertionError(f"fimi {' '.join(map(str, args))} failed ({result.returncode}): {result.stderr}")
    return result


def generated_corpus(tmp_path_factory):
    """Bank-like lines in bulk, so that training reaches VOCAB_SIZE (the
    shared corpus holds the hard cases but few repeats)."""
    path = tmp_path_factory.mktemp("corpus") / "generated.txt"
    names = ["Priya", "Rahul", "Anjali", "Vikram", "Sneha"]
    syllables = ["ka", "ra", "ma", "na", "ta", "pa", "sh", "ee", "oo", "ban", "acc", "ount", "ing", "tion", "dep",
                 "osit", "loan", "ह", "म", "रा", "खा", "ता", "है", "é", "💳"]
    rng = random.Random(7)
    lines = []
    for i in range(2000):
        name = names[i % len(names)]
        lines.append(f"Hello {name}, your balance in ACC{i:08d} is ₹{i * 137:,}.50")
        lines.append(f"mujhe apna balance check karna hai, account {i} hai, {name.lower()} bol raha hoon")
        lines.append(f"मेरा खाता नंबर {i} है और मुझे ₹{i * 11} ट्रांसफर करना है 🙏")
        lines.append(json.dumps({"name": "get_balance", "arguments": {"account_id": f"ACC{i:08d}"}}))
        lines.append(f"<start_of_turn>user\nI want an FD of ₹2,00,000.50   for  {i % 5} years<end_of_turn>")
        lines.append(" ".join("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))) for _ in range(8)))
        lines.append(f"\t{name}: EMI of ₹{i * 7}.25 is due on {i % 28 + 1:02d}/0{i % 9 + 1}/2025 😀")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module", params=["individual", "runs"])
def trained(request, tmp_path_factory):
    """Trains on the shared corpus (tests/interop/tokenizer_corpus.txt, when
    present) plus generated lines, with every digit a token (Gemma's rule) and
    with digit runs merged; returns (input files, tokenizer path, lines)."""
    corpora = ([CORPUS] if os.path.exists(CORPUS) else []) + [generated_corpus(tmp_path_factory)]
    out = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    fimi("tokenizer", "train", "--input", *corpora, "--vocab-size", VOCAB_SIZE, "--out", out, "--digits", request.param)
    lines = []
    for corpus in corpora:
        with open(corpus, encoding="utf-8") as f:
            lines += f.read().split("\n")
    return corpora, str(out), lines


def test_loads_in_tokenizers_with_expected_layout(trained):
    _, path, _ = trained
    tok = tokenizers.Tokenizer.from_file(path)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    vocab = doc["model"]["vocab"]
    assert tok.get_vocab_size(with_added_tokens=True) == len(vocab)
    assert len(vocab) == VOCAB_SIZE
    for i, name in enumerate(SPECIALS):
        assert tok.token_to_id(name) == i
    for b in range(256):
        assert tok.token_to_id(f"<0x{b:02X}>") == 8 + b
    assert sorted(vocab.values()) == list(range(len(vocab)))
    assert tok.encode("hi").ids[0] == 2  # the post-processor prepends <bos>
    digits = doc["pre_tokenizer"]["pretokenizers"][1]
    assert digits["type"] == "Digits"
    multi_digit = [t for t in vocab if re.fullmatch(r"[0-9]{2,}", t)]
    if digits["individual_digits"]:
        assert not multi_digit
    else:  # the generated lines' ids and amounts repeat digit pairs
        assert len(multi_digit) > 10


def test_digit_runs_tokenize_alike_everywhere(trained):
    """With --digits runs a number is a piece of its own: the same tokens
    after a space, a letter prefix, a quote or a dash."""
    _, path, _ = trained
    tok = tokenizers.Tokenizer.from_file(path)
    number = "6214377196"
    contexts = [f"mobile {number}.", f"ACC{number}", f'{{"mobile":"{number}"}}', f"2025-{number}-x"]
    runs = []
    for text in contexts:
        enc = tok.encode(text, add_special_tokens=False)
        runs.append([t for t, (a, b) in zip(enc.tokens, enc.offsets) if text.find(number) <= a < text.find(number) + len(number)])
    assert all("".join(r) == number for r in runs), runs
    assert all(r == runs[0] for r in runs), runs


def test_deterministic(trained, tmp_path):
    corpora, path, _ = trained
    again = tmp_path / "again.json"
    # The same files given as repeated --input flags: the same bytes.
    args = [a for corpus in corpora for a in ("--input", corpus)]
    with open(path, encoding="utf-8") as f:
        individual = json.load(f)["pre_tokenizer"]["pretokenizers"][1]["individual_digits"]
    digits = [] if individual else ["--digits", "runs"]  # individual is the default
    fimi("tokenizer", "train", *args, "--vocab-size", VOCAB_SIZE, "--out", again, *digits)
    with open(path, "rb") as a, open(again, "rb") as b:
        assert a.read() == b.read()


def reference_train(texts, tok, vocab_size, min_freq=2, max_bytes=16, coverage=0.9995):
    """The rules of docs/tokenizer-training.md, written plainly: lines keep
    their newline, special-token text is cut out, pieces come from the
    `tokenizers` normalizer + pre-tokenizer, the alphabet covers `coverage`
    of the characters, and each merge is the most frequent pair (ties: the
    pair whose strings sort first as UTF-8 bytes); a changed word's pairs are
    recounted whole."""
    special_re = "|".join(re.escape(s) for s in SPECIALS)
    lines = []
    for text in texts:  # each file on its own: a last line without "\n" ends there
        file_lines = [line + "\n" for line in text.split("\n")]
        file_lines[-1] = file_lines[-1][:-1]
        lines += file_lines
    words = collections.Counter()
    for line in lines:
        for segment in re.split(special_re, line):
            for piece, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(segment)):
                words[piece] += 1
    chars = collections.Counter()
    for word, count in words.items():
        for ch in word:
            if ch != "\0":
                chars[ch] += count
    total = sum(chars.values())
    vocab = SPECIALS + [f"<0x{b:02X}>" for b in range(256)]
    covered = 0
    for ch, count in sorted(chars.items(), key=lambda kv: (-kv[1], kv[0].encode())):
        if len(vocab) >= vocab_size or (coverage < 1 and covered >= coverage * total):
            break
        vocab.append(ch)
        covered += count
    known = set(vocab)
    segs = {w: [ch if ch in known else None for ch in w] for w in words}

    def word_pairs(word):
        seg = segs[word]
        return [(a, b) for a, b in zip(seg, seg[1:]) if a is not None and b is not None]

    pairs = collections.Counter()
    for word in segs:
        for pair in word_pairs(word):
            pairs[pair] += words[word]
    merges = []
    while len(vocab) < vocab_size:
        best = min(
            ((-c, a.encode(), b.encode(), a, b) for (a, b), c in pairs.items()
             if c >= min_freq and len((a + b).encode()) <= max_bytes),
            default=None,
        )
        if best is None:
            break
        a, b = best[3], best[4]
        merges.append([a, b])
        if a + b not in known:
            known.add(a + b)
            vocab.append(a + b)
        for word, seg in segs.items():
            if a not in seg or b not in seg:
                continue
            for pair in word_pairs(word):  # recount the whole word
                pairs[pair] -= words[word]
            out, i = [], 0
            while i < len(seg):
                if i + 1 < len(seg) and seg[i] == a and seg[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(seg[i])
                    i += 1
            segs[word] = out
            for pair in word_pairs(word):
                pairs[pair] += words[word]
    return vocab, merges


def test_merges_match_reference_trainer(trained):
    corpora, path, _ = trained
    texts = []
    for corpus in corpora:
        with open(corpus, encoding="utf-8") as f:
            texts.append(f.read())
    tok = tokenizers.Tokenizer.from_file(path)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    vocab, merges = reference_train(texts, tok, VOCAB_SIZE)
    ours = [tok for tok, _ in sorted(doc["model"]["vocab"].items(), key=lambda kv: kv[1])]
    assert ours == vocab
    assert doc["model"]["merges"] == merges


def fimi_encode(path, texts, add_special):
    args = ["tokenizer", "encode", "--tokenizer", path, "--jsonl"] + (["--add-special"] if add_special else [])
    stdin = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts)
    out = fimi(*args, stdin=stdin).stdout.splitlines()
    assert len(out) == len(texts)
    return [json.loads(line) for line in out]


@pytest.mark.parametrize("add_special", [False, True])
def test_encode_matches_tokenizers(trained, add_special):
    _, path, lines = trained
    tok = tokenizers.Tokenizer.from_file(path)
    texts = lines + HELD_OUT
    ours = fimi_encode(path, texts, add_special)
    mismatches = []
    for text, ids in zip(texts, ours):
        expected = tok.encode(text, add_special_tokens=add_special).ids
        if ids != expected:
            mismatches.append((text, ids, expected))
    assert not mismatches, f"{len(mismatches)} of {len(texts)} differ; first: {mismatches[0]}"


def test_decode_roundtrip(trained):
    _, path, lines = trained
    tok = tokenizers.Tokenizer.from_file(path)
    for text in lines + HELD_OUT:
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == text


def test_trains_to_requested_size_and_compresses(trained):
    _, path, lines = trained
    tok = tokenizers.Tokenizer.from_file(path)
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    text = "\n".join(lines)
    n_tokens = sum(len(tok.encode(line, add_special_tokens=False).ids) for line in lines)
    # Far fewer tokens than UTF-8 bytes: the merges are used.
    assert n_tokens * 2 < len(text.encode("utf-8"))
    assert len(doc["model"]["merges"]) > 0


def test_cli_errors(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes("ठीक है\n".encode() + b"\xc3(")
    out = tmp_path / "never.json"
    result = subprocess.run([FIMI_BIN, "tokenizer", "train", "--input", str(bad), "--vocab-size", "300", "--out",
                             str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"{bad}: invalid UTF-8 at byte offset 17" in result.stderr
    assert not out.exists()
    for args in (["--vocab-size", "263"], ["--vocab-size", "300", "--min-frequency", "1"], ["--vocab-size", "x"]):
        result = subprocess.run([FIMI_BIN, "tokenizer", "train", "--input", str(bad), *args, "--out", str(out)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 2, result.stderr
    result = subprocess.run([FIMI_BIN, "tokenizer", "train", "--input", str(tmp_path / "missing.txt"),
                             "--vocab-size", "300", "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "missing.txt" in result.stderr
