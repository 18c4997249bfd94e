"""The tiny bank checkpoint the served-model tests share (test_serve_openai.py, test_served_eval.py,
test_served_independent.py): balance-enquiry tasks, their oracle transcripts, a 512-token BPE trained on
them and a random `tiny` model with that vocabulary, made by the fimi binary under test. Not a test module."""
import subprocess


def tiny_checkpoint(fimi_bin, d, n=3, seed=9):
    """Writes d/bal.jsonl (n tasks), d/bal-sft.jsonl (their transcripts), d/tok.json and d/model; returns d/model."""
    def fimi(*args):
        subprocess.run([fimi_bin, *map(str, args)], capture_output=True, text=True, timeout=120, check=True)
    fimi("env", "sample", "--family", "balance_enquiry", "--n", n, "--seed", seed, "--out", d / "bal.jsonl")
    fimi("env", "transcripts", "--task-file", d / "bal.jsonl", "--catalog", "family", "--out", d / "bal-sft.jsonl")
    fimi("tokenizer", "train", "--input", d / "bal-sft.jsonl", "--vocab-size", 512, "--out", d / "tok.json")
    fimi("init", "--preset", "tiny", "--tokenizer", d / "tok.json", "--out", d / "model")
    return d / "model"
