# tests/slurm/lib_tiny_dpo.sh: the tiny DPO data the launcher tests share
# (sourced after tests/lib_cli.sh, with FIMI and SRC set; not a test itself).
# prepare_tiny_dpo DIR: DIR/tokenizer.json, DIR/train.h5 and DIR/eval.h5 from
# configs/data/tiny-dpo-*.jsonl, DIR/init from configs/tiny-cpu-dpo.ini, and
# the reference log-probs added to both datasets by a 1-step run, so that
# the runs under test only read them (two jobs writing them at once would
# race). Sets TINY_DPO_CONFIG and TINY_DPO_SETS (the --set flags naming
# those files).
prepare_tiny_dpo() {
  local d="$1"
  mkdir -p "$d"
  TINY_DPO_CONFIG="$SRC/configs/tiny-cpu-dpo.ini"
  make_tiny_tokenizer "$d"
  tokenize_tiny dpo "$d"
  expect_ok "init" "$FIMI" init --config "$TINY_DPO_CONFIG" --tokenizer "$d/tokenizer.json" --out "$d/init"
  TINY_DPO_SETS=(--set train.init="$d/init" --set data.train="$d/train.h5" --set data.eval="$d/eval.h5"
                 --set train.progress=false)
  expect_ok "reference log-probs into the datasets" env OMP_NUM_THREADS=1 "$FIMI" train --config "$TINY_DPO_CONFIG" \
    "${TINY_DPO_SETS[@]}" --set train.steps=1 --set train.out_dir="$d/refpass"
}
