// tests/test_train_loop.c: the training loop and checkpoints on an
// in-memory SFT dataset and the tiny preset. 10 steps straight == 5 steps,
// stop, resume, 5 steps (bitwise: every step's loss and grad norm in
// metrics.jsonl, the final weights and the optimizer moments); the loss goes
// down; keep_last; a half-written temp dir is removed and a step dir without
// DONE is never loaded; a damaged optimizer.h5 or trainer_state.json fails
// with a message; non-finite losses are skipped and counted, and a run of
// them aborts with a clear message.
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/log.h"
#include "core/rng.h"
#include "tests/test_util.h"
#include "train/loop.h"
#include "model/weights.h"
#include "train/sft.h"

#define ROWS 12
typedef struct MemDataset {
  Dataset ds;
  int64_t offsets[ROWS + 1];
  int32_t tokens[ROWS * 24];
  uint8_t mask[ROWS * 24];
} MemDataset;

// Rows are short arithmetic-like patterns (learnable) of lengths 10..21.
// Id 0 is the pad token: its embedding row is zero (as HF inits it), and a
// zero residual stream has enormous RMSNorm gradients, so real rows avoid it.
static void mem_dataset(MemDataset *m, int vocab) {
  memset(m, 0, sizeof *m);
  for (int r = 0; r < ROWS; r++) {
    int len = 10 + (r * 7) % 12;
    for (int i = 0; i < len; i++) {
      int64_t k = m->offsets[r] + i;
      m->tokens[k] = 1 + (r * 3 + i * (1 + r % 4)) % (vocab - 1);  // not 0: the zeroed pad row
      m->mask[k] = i >= 2;
    }
    m->offsets[r + 1] = m->offsets[r] + len;
  }
  m->ds.kind = DATASET_SFT;
  m->ds.rows = ROWS;
  m->ds.vocab_size = vocab;
  m->ds.num_fields = 1;
  strcpy(m->ds.fields[0].name, "seq");
  m->ds.fields[0].offsets = m->offsets;
  m->ds.fields[0].tokens = m->tokens;
  m->ds.fields[0].loss_mask = m->mask;
}

typedef struct Run {
  GemmaModel model;
  TrainState state;
  SftObjective sft;
  TrainObjective obj;
} Run;

static int run_open(Run *r, FimiError *err) {
  GemmaConfig cfg;
  if (gemma_config_preset(&cfg, "tiny", err) != 0 || gemma_model_create(&r->model, &cfg, err) != 0) return -1;
  gemma_model_init_random(&r->model, 5);
  AdamWConfig ac;
  AdamWDecayRules rules;
  adamw_config_default(&ac);
  ac.weight_decay = 0.01;
  adamw_decay_rules_default(&rules);
  if (train_state_init(&r->state, &r->model, &ac, &rules, err) != 0) return -1;
  sft_objective_init(&r->sft, &cfg, &r->obj);
  return 0;
}

static void run_close(Run *r) {
  sft_objective_free(&r->sft);
  train_state_free(&r->state);
  gemma_model_free(&r->model);
}

static void loop_config(TrainLoopConfig *c, const char *out) {
  train_loop_config_default(c);
  c->out_dir = out;
  c->steps = 10;
  c->micro_batch = 3;
  c->grad_accum = 2;
  c->max_grad_norm = 0.5;
  c->save_every = 5;
  c->keep_last = 0;
  c->eval_every = 4;
  c->schedule.kind = LR_SCHEDULE_COSINE;
  c->schedule.base_lr = 3e-3;
  c->schedule.warmup_steps = 2;
  c->schedule.total_steps = 10;
  c->data_seed = 9;
  c->config_hash = 77;
}

// Runs steps (stop_at > 0: stop there), resume_dir may be NULL.
static int train(const char *out, int64_t stop_at, const char *resume, const Dataset *ds, Run *r, TrainSummary *s,
                 FimiError *err) {
  if (run_open(r, err) != 0) return -1;
  TrainLoopConfig c;
  loop_config(&c, out);
  c.stop_at_step = stop_at;
  c.resume_dir = resume;
  return train_run(&c, &r->state, &r->obj, ds, ds, s, err);
}

static char *read_text(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  size_t size;
  FimiError err = {0};
  return file_read_all(path, 1 << 24, &size, &err);
}

// metrics.jsonl without the timing fields: step, loss, lr, grad_norm, ... in order.
static void strip_timing(char *text) {
  const char *keys[] = {"\"tokens_per_s\":", "\"elapsed\":"};
  for (int k = 0; k < 2; k++) {
    char *p;
    while ((p = strstr(text, keys[k]))) {
      char *end = strchr(p, ',');
      if (!end) break;
      memmove(p, end + 1, strlen(end + 1) + 1);
    }
  }
}

static int same_floats(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static int exists(const char *dir, const char *name) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return stat(path, &st) == 0;
}

static void test_resume_bitwise(const Dataset *ds, const char *base) {
  char a[512], b[512];
  snprintf(a, sizeof a, "%s/straight", base);
  snprintf(b, sizeof b, "%s/resumed", base);
  FimiError err = {0};
  Run r1, r2, r3;
  TrainSummary s1, s2, s3;
  CHECK(train(a, 0, NULL, ds, &r1, &s1, &err) == 0, "straight: %s", err.message);
  CHECK(s1.end_step == 10 && s1.last_loss < s1.first_loss - 0.5, "loss goes down: %g -> %g", s1.first_loss,
        s1.last_loss);
  CHECK(train(b, 5, NULL, ds, &r2, &s2, &err) == 0 && s2.end_step == 5, "first half: %s", err.message);
  CHECK(exists(b, "step_000005/DONE") && !exists(b, "step_000010"), "checkpoint at the stop");
  // A fresh start into a directory with checkpoints is refused.
  Run rx;
  TrainSummary sx;
  CHECK(train(b, 0, NULL, ds, &rx, &sx, &err) != 0 && strstr(err.message, "--resume"), "refuse: %s", err.message);
  run_close(&rx);
  CHECK(train(b, 0, b, ds, &r3, &s3, &err) == 0, "resume: %s", err.message);
  CHECK(s3.start_step == 5 && s3.end_step == 10, "resumed %lld..%lld", (long long)s3.start_step,
        (long long)s3.end_step);
  char *ma = read_text(a, "metrics.jsonl"), *mb = read_text(b, "metrics.jsonl");
  CHECK(ma && mb, "metrics files");
  if (ma && mb) {
    strip_timing(ma);
    strip_timing(mb);
    CHECK(!strcmp(ma, mb), "metrics (losses, grad norms, lr, eval) equal:\n%s\nvs\n%s", ma, mb);
    CHECK(strstr(ma, "\"eval_loss\"") && strstr(ma, "\"step\":10,"), "metrics hold eval and step 10");
  }
  free(ma);
  free(mb);
  int same = same_floats(r1.model.globals, r3.model.globals, r1.model.globals_numel);
  for (int l = 0; l < r1.model.config.num_hidden_layers; l++)
    same &= same_floats(r1.model.layers[l], r3.model.layers[l], r1.model.layer_numel);
  CHECK(same, "final weights bitwise equal");
  int moments = r1.state.opt.step == r3.state.opt.step;
  for (int i = 0; i < r1.state.opt.num_buffers; i++)
    moments &= same_floats(r1.state.opt.buffers[i].exp_avg_sq, r3.state.opt.buffers[i].exp_avg_sq,
                           r1.state.opt.buffers[i].numel);
  CHECK(moments, "optimizer moments and step equal");
  // The resumed run's step 10 checkpoint equals the straight one's.
  char *ta = read_text(a, "step_000010/trainer_state.json"), *tb = read_text(b, "step_000010/trainer_state.json");
  CHECK(ta && tb && strstr(ta, "\"data_position\"") && strstr(tb, "\"data_position\""), "trainer states");
  free(ta);
  free(tb);
  run_close(&r1);
  run_close(&r2);
  run_close(&r3);
}

static void test_checkpoint_hygiene(const Dataset *ds, const char *base) {
  char out[512], path[1024];
  snprintf(out, sizeof out, "%s/hygiene", base);
  FimiError err = {0};
  Run r;
  TrainSummary s;
  CHECK(train(out, 0, NULL, ds, &r, &s, &err) == 0, "run: %s", err.message);
  run_close(&r);
  // keep_last 0 kept both; now simulate a kill mid-save and a step dir without DONE.
  snprintf(path, sizeof path, "%s/.tmp-step_000015", out);
  CHECK(mkdir(path, 0755) == 0, "mkdir tmp");
  snprintf(path, sizeof path, "%s/.tmp-step_000015/model.safetensors", out);
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
  snprintf(path, sizeof path, "%s/step_000099", out);
  CHECK(mkdir(path, 0755) == 0, "mkdir step_000099");
  char latest[4096];
  int64_t step = -1;
  CHECK(checkpoint_find_latest(out, latest, sizeof latest, &step, &err) == 1 && step == 10,
        "newest complete is 10 (got %lld)", (long long)step);
  CHECK(checkpoint_clean_temp(out, &err) == 1 && !exists(out, ".tmp-step_000015"), "temp dir removed");
  CHECK(exists(out, "step_000099"), "a step dir without DONE is left alone");

  // Damaged files: errors, not crashes.
  CHECK(run_open(&r, &err) == 0, "open");
  TrainerState ts;
  snprintf(path, sizeof path, "%s/step_000005/optimizer.h5", out);
  FILE *h = fopen(path, "r+b");
  CHECK(h != NULL, "open optimizer.h5");
  if (h) {
    CHECK(ftruncate(fileno(h), 100) == 0, "truncate");
    fclose(h);
  }
  snprintf(path, sizeof path, "%s/step_000005", out);
  CHECK(checkpoint_load(path, &r.model, &r.state.opt, &ts, &err) != 0 && strstr(err.message, "optimizer.h5"),
        "damaged optimizer.h5: %s", err.message);
  snprintf(path, sizeof path, "%s/step_000010/trainer_state.json", out);
  CHECK(file_write_atomic(path, "{\"format_version\": 1, \"step\": \"x\"}", 34, &err) == 0, "write");
  snprintf(path, sizeof path, "%s/step_000010", out);
  CHECK(checkpoint_load(path, &r.model, &r.state.opt, &ts, &err) != 0 && strstr(err.message, "step"),
        "damaged trainer_state.json: %s", err.message);
  snprintf(path, sizeof path, "%s/step_000099", out);
  CHECK(checkpoint_load(path, &r.model, &r.state.opt, &ts, &err) != 0 && strstr(err.message, "DONE"),
        "no DONE: %s", err.message);
  // Weights of another architecture (Gemma 2: no q/k norms) are refused.
  GemmaConfig other;
  GemmaModel g2;
  CHECK(gemma_config_preset(&other, "tiny-gemma2", &err) == 0 && gemma_model_create(&g2, &other, &err) == 0,
        "gemma2: %s", err.message);
  snprintf(path, sizeof path, "%s/step_000005", out);
  CHECK(gemma_save_pretrained(&g2, path, SAFETENSORS_F32, 0, &err) == 0, "save gemma2: %s", err.message);
  gemma_model_free(&g2);
  CHECK(checkpoint_load(path, &r.model, &r.state.opt, &ts, &err) != 0 && strstr(err.message, "architecture"),
        "other architecture: %s", err.message);
  run_close(&r);

  // keep_last 2 with a save every 2 steps: only steps 8 and 10 remain.
  snprintf(out, sizeof out, "%s/keep", base);
  CHECK(run_open(&r, &err) == 0, "open");
  TrainLoopConfig c;
  loop_config(&c, out);
  c.save_every = 2;
  c.keep_last = 2;
  CHECK(train_run(&c, &r.state, &r.obj, ds, NULL, &s, &err) == 0, "keep run: %s", err.message);
  CHECK(exists(out, "step_000008/DONE") && exists(out, "step_000010/DONE") && !exists(out, "step_000006") &&
            !exists(out, "step_000002"),
        "keep_last 2");
  run_close(&r);
}

// Wraps SFT: the loss (and gradients) become NaN on chosen steps.
typedef struct Poison {
  TrainObjective inner;
  int calls, micro_per_step;
  int from_step, to_step;  // 1-based, inclusive
} Poison;

static int poison_train(void *ctx, GemmaModel *model, const Dataset *ds, const int64_t *rows, int64_t count,
                        double weight, TrainBatchResult *out, FimiError *err) {
  Poison *p = ctx;
  int step = p->calls++ / p->micro_per_step + 1;
  double w = step >= p->from_step && step <= p->to_step ? NAN : weight;
  int rc = p->inner.train_batch(p->inner.ctx, model, ds, rows, count, w, out, err);
  if (step >= p->from_step && step <= p->to_step) out->loss = NAN;
  return rc;
}

static void test_nonfinite(const Dataset *ds, const char *base) {
  char out[512];
  FimiError err = {0};
  Run r;
  TrainSummary s;
  snprintf(out, sizeof out, "%s/nan1", base);
  CHECK(run_open(&r, &err) == 0, "open");
  Poison p = {r.obj, 0, 2, 3, 4};
  TrainObjective obj = {"poison", &p, poison_train, NULL};
  TrainLoopConfig c;
  loop_config(&c, out);
  c.eval_every = 0;
  float before = 0, after = 0;
  CHECK(train_run(&c, &r.state, &obj, ds, NULL, &s, &err) == 0, "2 NaN steps are skipped: %s", err.message);
  CHECK(s.skipped == 2 && r.state.opt.step == 8, "skipped %lld, adam steps %lld", (long long)s.skipped,
        (long long)r.state.opt.step);
  for (size_t i = 0; i < r.model.globals_numel; i++) after += fabsf(r.model.globals[i]);
  CHECK(isfinite(after), "weights stay finite");
  char *m = read_text(out, "metrics.jsonl");
  CHECK(m && strstr(m, "\"step\":3,\"loss\":null") && strstr(m, "\"step_skipped\":true"), "metrics mark the skip");
  free(m);
  run_close(&r);
  (void)before;

  snprintf(out, sizeof out, "%s/nan2", base);
  CHECK(run_open(&r, &err) == 0, "open");
  Poison q = {r.obj, 0, 2, 2, 100};
  obj.ctx = &q;
  loop_config(&c, out);
  c.eval_every = 0;
  c.max_nonfinite_in_row = 3;
  CHECK(train_run(&c, &r.state, &obj, ds, NULL, &s, &err) != 0 && strstr(err.message, "3 steps in a row") &&
            strstr(err.message, "step 4"),
        "abort after 3 in a row: %s", err.message);
  run_close(&r);
}

int main(void) {
  log_set_level(LOG_ERROR);
  char base[] = "/tmp/fimi_test_train_XXXXXX";
  if (!mkdtemp(base)) return 1;
  GemmaConfig cfg;
  FimiError err = {0};
  if (gemma_config_preset(&cfg, "tiny", &err) != 0) return 1;
  MemDataset m;
  mem_dataset(&m, cfg.vocab_size);
  test_resume_bitwise(&m.ds, base);
  test_checkpoint_hygiene(&m.ds, base);
  test_nonfinite(&m.ds, base);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", base);
  TEST_MAIN_END();
}
