// tests/test_dpo_loss.c: dpo/loss and dpo/monitor. Losses against an
// independent float64 reference written from TRL's formulas (naive forms,
// valid for moderate margins), gradients against central finite differences
// of that reference, hand-computed sigmoid/ipo/hinge values, step 0 (policy ==
// reference: rewards 0, sigmoid loss log 2), stability at |margin| 1e4, batch
// gradients and metrics (and sums split across ranks), input validation, the
// step-0 baseline, and the divergence monitor triggering exactly after its
// window with the right attribution, and the plumbing into a tiny Gemma model:
// d loss / d summed log-prob as every response token's dlogprobs gives the
// parameter gradients central differences of the whole pipeline give.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/rng.h"
#include "dpo/loss.h"
#include "dpo/monitor.h"
#include "model/gemma.h"
#include "tests/test_util.h"

// The reference: TRL's formulas computed the obvious way.
static double reference_loss(DpoLossType type, double beta, const DpoPair *p) {
  double chosen = p->policy_chosen - p->ref_chosen, rejected = p->policy_rejected - p->ref_rejected;
  double delta = chosen - rejected;
  if (type == DPO_LOSS_SIGMOID) return -log(1.0 / (1.0 + exp(-beta * delta)));
  if (type == DPO_LOSS_HINGE) return fmax(0.0, 1.0 - beta * delta);
  double lc = p->chosen_tokens > 0 ? p->chosen_tokens : 1, lr = p->rejected_tokens > 0 ? p->rejected_tokens : 1;
  double d = chosen / lc - rejected / lr - 1.0 / (2.0 * beta);
  return d * d;
}

static DpoPair random_pair(Rng *rng) {
  DpoPair p;
  p.ref_chosen = -5.0 - 40.0 * rng_uniform_double(rng);
  p.ref_rejected = -5.0 - 40.0 * rng_uniform_double(rng);
  p.policy_chosen = p.ref_chosen + 8.0 * (rng_uniform_double(rng) - 0.5);
  p.policy_rejected = p.ref_rejected + 8.0 * (rng_uniform_double(rng) - 0.5);
  p.chosen_tokens = 1 + (long)(rng_next_u64(rng) % 30);
  p.rejected_tokens = 1 + (long)(rng_next_u64(rng) % 30);
  p.nll_weight = 0;
  return p;
}

static void test_vs_reference(void) {
  Rng rng;
  rng_seed(&rng, 11);
  FimiError err = {0};
  double betas[3] = {0.1, 0.5, 2.0};
  double max_loss_err = 0, max_grad_err = 0;
  int hinge_kinks = 0;
  for (int type = 0; type < 3; type++)
    for (int b = 0; b < 3; b++)
      for (int trial = 0; trial < 200; trial++) {
        DpoConfig cfg = {.loss_type = (DpoLossType)type, .beta = betas[b]};
        DpoPair p = random_pair(&rng);
        DpoPairResult r;
        if (dpo_pair_loss(&cfg, &p, &r, &err) != 0) {
          CHECK(0, "pair loss: %s", err.message);
          continue;
        }
        double ref = reference_loss(cfg.loss_type, cfg.beta, &p);
        max_loss_err = fmax(max_loss_err, fabs(r.loss - ref) / fmax(1.0, fabs(ref)));
        // Central differences on the policy sums (h = 1e-5 on values ~1..50).
        if (cfg.loss_type == DPO_LOSS_HINGE && fabs(1.0 - cfg.beta * ((p.policy_chosen - p.ref_chosen) -
                                                                      (p.policy_rejected - p.ref_rejected))) < 1e-3) {
          hinge_kinks++;  // no derivative at the kink
          continue;
        }
        double h = 1e-5;
        DpoPair q = p;
        q.policy_chosen = p.policy_chosen + h;
        double up = reference_loss(cfg.loss_type, cfg.beta, &q);
        q.policy_chosen = p.policy_chosen - h;
        double fd_c = (up - reference_loss(cfg.loss_type, cfg.beta, &q)) / (2 * h);
        q = p;
        q.policy_rejected = p.policy_rejected + h;
        up = reference_loss(cfg.loss_type, cfg.beta, &q);
        q.policy_rejected = p.policy_rejected - h;
        double fd_r = (up - reference_loss(cfg.loss_type, cfg.beta, &q)) / (2 * h);
        double scale = fmax(fmax(fabs(fd_c), fabs(fd_r)), 1e-3);
        max_grad_err = fmax(max_grad_err, fmax(fabs(r.dpolicy_chosen - fd_c), fabs(r.dpolicy_rejected - fd_r)) / scale);
        // The reference side: no gradient, rewards are beta * log-ratios.
        CHECK(fabs(r.reward_chosen - cfg.beta * (p.policy_chosen - p.ref_chosen)) < 1e-12, "reward_chosen");
        CHECK(fabs(r.reward_rejected - cfg.beta * (p.policy_rejected - p.ref_rejected)) < 1e-12, "reward_rejected");
      }
  printf("1800 random pairs (3 losses x 3 betas): max loss rel err %.2e (tol 1e-12), max grad err vs central "
         "differences %.2e (tol 1e-7), %d hinge kinks skipped\n", max_loss_err, max_grad_err, hinge_kinks);
  CHECK(max_loss_err <= 1e-12, "loss vs float64 reference: %.3g", max_loss_err);
  CHECK(max_grad_err <= 1e-7, "gradient vs central differences: %.3g", max_grad_err);
}

static void test_hand_values(void) {
  FimiError err = {0};
  // chosen log-ratio 2, rejected log-ratio -1, delta 3; lengths 4 and 5.
  DpoPair p = {.policy_chosen = -10, .policy_rejected = -15, .ref_chosen = -12, .ref_rejected = -14,
               .chosen_tokens = 4, .rejected_tokens = 5};
  DpoConfig cfg = {DPO_LOSS_SIGMOID, 0.1, 0.0};
  DpoPairResult r;
  CHECK(dpo_pair_loss(&cfg, &p, &r, &err) == 0, "%s", err.message);
  // log(1 + e^-0.3); derivative -0.1 * sigmoid(-0.3) = -0.1 / (1 + e^0.3).
  CHECK_CLOSE(r.loss, 0.554355244468527, 1e-14, "sigmoid loss at beta*delta = 0.3");
  CHECK_CLOSE(r.dpolicy_chosen, -0.1 / (1.0 + 1.3498588075760032), 1e-14, "sigmoid dchosen");
  CHECK_CLOSE(r.dpolicy_rejected, 0.1 / (1.0 + 1.3498588075760032), 1e-14, "sigmoid drejected");
  CHECK_CLOSE(r.reward_chosen, 0.2, 1e-15, "reward chosen");
  CHECK_CLOSE(r.reward_rejected, -0.1, 1e-15, "reward rejected");
  cfg.loss_type = DPO_LOSS_HINGE;
  dpo_pair_loss(&cfg, &p, &r, &err);
  CHECK_CLOSE(r.loss, 0.7, 1e-15, "hinge loss 1 - 0.3");
  CHECK(r.dpolicy_chosen == -0.1 && r.dpolicy_rejected == 0.1, "hinge grads %g %g", r.dpolicy_chosen,
        r.dpolicy_rejected);
  DpoPair far = p;
  far.policy_chosen = 5.0;  // delta = 18, beta*delta = 1.8 > 1
  dpo_pair_loss(&cfg, &far, &r, &err);
  CHECK(r.loss == 0.0 && r.dpolicy_chosen == 0.0 && r.dpolicy_rejected == 0.0, "hinge beyond the margin: %g", r.loss);
  // IPO: per-token scores 2/4 and -1/5: delta 0.7, target 1/(2*0.1) = 5, d = -4.3.
  cfg.loss_type = DPO_LOSS_IPO;
  dpo_pair_loss(&cfg, &p, &r, &err);
  CHECK_CLOSE(r.loss, 18.49, 1e-13, "ipo loss (0.7 - 5)^2");
  CHECK_CLOSE(r.dpolicy_chosen, -2.15, 1e-14, "ipo dchosen 2 * -4.3 / 4");
  CHECK_CLOSE(r.dpolicy_rejected, 1.72, 1e-14, "ipo drejected -2 * -4.3 / 5");
  // TRL clamps the length at 1: a zero-length response counts as one token.
  DpoPair empty = p;
  empty.chosen_tokens = 0, empty.rejected_tokens = 1;
  dpo_pair_loss(&cfg, &empty, &r, &err);
  CHECK_CLOSE(r.loss, (3.0 - 5.0) * (3.0 - 5.0), 1e-13, "ipo with length clamped to 1");
}

static void test_step_zero(void) {
  FimiError err = {0};
  Rng rng;
  rng_seed(&rng, 3);
  DpoConfig cfg;
  dpo_config_default(&cfg);
  CHECK(cfg.loss_type == DPO_LOSS_SIGMOID && cfg.beta == 0.1, "defaults: sigmoid, beta 0.1");
  DpoPair pairs[8];
  double dc[8], dr[8];
  for (int i = 0; i < 8; i++) {
    pairs[i] = random_pair(&rng);
    pairs[i].policy_chosen = pairs[i].ref_chosen, pairs[i].policy_rejected = pairs[i].ref_rejected;
  }
  DpoSums sums;
  dpo_sums_clear(&sums);
  CHECK(dpo_batch_loss(&cfg, pairs, 8, 1.0 / 8, dc, dr, &sums, &err) == 0, "%s", err.message);
  DpoMetrics m;
  CHECK(dpo_metrics_from_sums(&sums, &m, &err) == 0, "%s", err.message);
  CHECK(fabs(m.loss - log(2.0)) < 1e-15, "step 0 loss %.17g != log 2", m.loss);
  CHECK(m.rewards_chosen == 0 && m.rewards_rejected == 0 && m.rewards_margins == 0, "step 0 rewards not 0");
  CHECK(m.rewards_accuracies == 0, "step 0 accuracy %g (ties are not correct, as in TRL)", m.rewards_accuracies);
  for (int i = 0; i < 8; i++)
    CHECK(fabs(dc[i] + 0.1 * 0.5 / 8) < 1e-17 && fabs(dr[i] - 0.1 * 0.5 / 8) < 1e-17,
          "step 0 gradient of pair %d: %g %g (expected -/+ beta/2/n)", i, dc[i], dr[i]);
  DpoBaseline base = {0};
  dpo_baseline_apply(&base, &m);
  CHECK(base.set && m.chosen_change == 0 && m.rejected_change == 0, "baseline at step 0");
}

static void test_stability(void) {
  FimiError err = {0};
  double margins[4] = {1e4, -1e4, 1e3, -1e3};
  for (int type = 0; type < 3; type++)
    for (int k = 0; k < 4; k++) {
      DpoConfig cfg = {(DpoLossType)type, 0.1, 0.0};
      // reward margin = beta * delta = margins[k]
      DpoPair p = {.policy_chosen = -20.0 + margins[k] / 0.1, .policy_rejected = -30, .ref_chosen = -20,
                   .ref_rejected = -30, .chosen_tokens = 10, .rejected_tokens = 10};
      DpoPairResult r;
      CHECK(dpo_pair_loss(&cfg, &p, &r, &err) == 0, "%s", err.message);
      CHECK(isfinite(r.loss) && isfinite(r.dpolicy_chosen) && isfinite(r.dpolicy_rejected),
            "%s at margin %g: loss %g grads %g %g", dpo_loss_type_name(cfg.loss_type), margins[k], r.loss,
            r.dpolicy_chosen, r.dpolicy_rejected);
      if (type == DPO_LOSS_SIGMOID && margins[k] > 0)
        CHECK(r.loss >= 0 && r.loss < 1e-300 && fabs(r.dpolicy_chosen) < 1e-300, "sigmoid at +%g: %g", margins[k],
              r.loss);
      if (type == DPO_LOSS_SIGMOID && margins[k] < 0)
        CHECK(fabs(r.loss + margins[k]) < 1e-9 * fabs(margins[k]) && fabs(r.dpolicy_chosen + 0.1) < 1e-15,
              "sigmoid at %g: loss %.17g (expected %g), dchosen %g (expected -beta)", margins[k], r.loss, -margins[k],
              r.dpolicy_chosen);
    }
}

static void test_batch_and_metrics(void) {
  FimiError err = {0};
  Rng rng;
  rng_seed(&rng, 21);
  DpoConfig cfg = {DPO_LOSS_SIGMOID, 0.1, 0.0};
  enum { N = 16 };
  DpoPair pairs[N];
  double dc[N], dr[N];
  for (int i = 0; i < N; i++) pairs[i] = random_pair(&rng);
  DpoSums whole, half;
  dpo_sums_clear(&whole);
  CHECK(dpo_batch_loss(&cfg, pairs, N, 1.0 / N, dc, dr, &whole, &err) == 0, "%s", err.message);
  double loss = 0, rc = 0, rr = 0, acc = 0, lc = 0, lr = 0;
  for (int i = 0; i < N; i++) {
    DpoPairResult r;
    dpo_pair_loss(&cfg, &pairs[i], &r, &err);
    CHECK(dc[i] == r.dpolicy_chosen * (1.0 / N) && dr[i] == r.dpolicy_rejected * (1.0 / N), "batch grad %d", i);
    loss += r.loss, rc += r.reward_chosen, rr += r.reward_rejected, acc += r.reward_chosen > r.reward_rejected;
    lc += pairs[i].policy_chosen, lr += pairs[i].policy_rejected;
  }
  DpoMetrics m;
  dpo_metrics_from_sums(&whole, &m, &err);
  CHECK_CLOSE(m.loss, loss / N, 1e-14, "metric loss");
  CHECK_CLOSE(m.rewards_chosen, rc / N, 1e-14, "rewards/chosen");
  CHECK_CLOSE(m.rewards_rejected, rr / N, 1e-14, "rewards/rejected");
  CHECK_CLOSE(m.rewards_margins, (rc - rr) / N, 1e-14, "rewards/margins");
  CHECK_CLOSE(m.rewards_accuracies, acc / N, 1e-15, "rewards/accuracies");
  CHECK(acc > 0 && acc < N, "random pairs should mix right and wrong (%g of %d)", acc, N);
  CHECK_CLOSE(m.logps_chosen, lc / N, 1e-14, "logps/chosen");
  CHECK_CLOSE(m.logps_rejected, lr / N, 1e-14, "logps/rejected");
  CHECK(m.pairs == N, "pairs %ld", m.pairs);
  // Two "ranks" with 10 and 6 pairs: the element-wise sum of their sums
  // (what an all-reduce does) gives the same metrics.
  DpoSums r0, r1;
  dpo_sums_clear(&r0), dpo_sums_clear(&r1);
  dpo_batch_loss(&cfg, pairs, 10, 1.0 / N, dc, dr, &r0, &err);
  dpo_batch_loss(&cfg, pairs + 10, 6, 1.0 / N, dc + 10, dr + 10, &r1, &err);
  for (int k = 0; k < DPO_SUM_COUNT; k++) half.v[k] = r0.v[k] + r1.v[k];
  DpoMetrics mh;
  dpo_metrics_from_sums(&half, &mh, &err);
  CHECK_CLOSE(mh.loss, m.loss, 1e-14, "sharded loss");
  CHECK_CLOSE(mh.rewards_margins, m.rewards_margins, 1e-14, "sharded margin");
  // Baseline: changes measured from the first step's rewards.
  DpoBaseline base = {0};
  dpo_baseline_apply(&base, &m);
  DpoMetrics later = m;
  later.rewards_chosen += 0.25, later.rewards_rejected -= 1.5;
  dpo_baseline_apply(&base, &later);
  CHECK_CLOSE(later.chosen_change, 0.25, 1e-14, "chosen change");
  CHECK_CLOSE(later.rejected_change, -1.5, 1e-14, "rejected change");

  // Validation: the failing field and pair are named, sums untouched.
  DpoSums before = whole;
  pairs[3].ref_rejected = NAN;
  CHECK(dpo_batch_loss(&cfg, pairs, N, 1.0 / N, dc, dr, &whole, &err) != 0 && strstr(err.message, "pair 3") &&
            strstr(err.message, "ref_rejected"),
        "NaN input: %s", err.message);
  CHECK(memcmp(&before, &whole, sizeof whole) == 0, "failed batch changed the sums");
  pairs[3].ref_rejected = -1, pairs[4].chosen_tokens = -2;
  CHECK(dpo_batch_loss(&cfg, pairs, N, 1.0 / N, dc, dr, &whole, &err) != 0 && strstr(err.message, "length"),
        "negative length accepted");
  cfg.beta = 0;
  CHECK(dpo_config_validate(&cfg, &err) != 0 && strstr(err.message, "beta"), "beta 0 accepted");
  DpoLossType t;
  CHECK(dpo_loss_type_parse("ipo", &t, &err) == 0 && t == DPO_LOSS_IPO, "parse ipo");
  CHECK(dpo_loss_type_parse("robust", &t, &err) != 0 && strstr(err.message, "robust"), "unknown loss accepted");
  DpoSums none;
  dpo_sums_clear(&none);
  CHECK(dpo_metrics_from_sums(&none, &m, &err) != 0, "metrics of zero pairs");
}

static DpoMetrics step_metrics(double margin, double chosen_change, double rejected_change) {
  DpoMetrics m;
  memset(&m, 0, sizeof m);
  m.rewards_margins = margin, m.chosen_change = chosen_change, m.rejected_change = rejected_change;
  return m;
}

static void test_monitor(void) {
  FimiError err = {0};
  DpoMonitorConfig cfg;
  dpo_monitor_config_default(&cfg);
  CHECK(cfg.threshold == 5.0, "default threshold %g", cfg.threshold);
  cfg.window = 3;
  DpoMonitor mon;
  CHECK(dpo_monitor_init(&mon, &cfg, &err) == 0, "%s", err.message);
  // Margins: two above, a dip (resets), then above for 7 steps; 5.0 itself is
  // not above. Warnings expected exactly at steps 5 and 8 (0-based).
  double margins[11] = {6, 7, 2, 6, 6, 6, 7, 8, 9, 10, 5.0};
  int expect[11] = {0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0};
  DpoMonitorReport rep;
  for (int s = 0; s < 11; s++) {
    // The rejected term falls faster than the chosen term rises.
    DpoMetrics m = step_metrics(margins[s], 0.1 * s, -0.8 * s);
    int warn = dpo_monitor_update(&mon, &m, &rep);
    CHECK(warn == expect[s], "step %d margin %g: warn %d expected %d (streak %d)", s, margins[s], warn, expect[s],
          rep.streak);
    if (warn) {
      CHECK(rep.mainly == DPO_GROWTH_REJECTED && strstr(rep.message, "mainly through the rejected term"),
            "attribution: %s", rep.message);
      printf("monitor at step %d: %s\n", s, rep.message);
    }
  }
  CHECK(mon.warnings == 2, "warnings %ld", mon.warnings);
  // Growth through the chosen term.
  dpo_monitor_init(&mon, &cfg, &err);
  for (int s = 0; s < 3; s++) dpo_monitor_update(&mon, &(DpoMetrics){.rewards_margins = 6, .chosen_change = 4,
                                                                      .rejected_change = -2}, &rep);
  CHECK(rep.warn && rep.mainly == DPO_GROWTH_CHOSEN && strstr(rep.message, "chosen term"), "chosen attribution: %s",
        rep.message);
  // NaN resets the streak.
  dpo_monitor_init(&mon, &cfg, &err);
  dpo_monitor_update(&mon, &(DpoMetrics){.rewards_margins = 6}, &rep);
  dpo_monitor_update(&mon, &(DpoMetrics){.rewards_margins = 6}, &rep);
  dpo_monitor_update(&mon, &(DpoMetrics){.rewards_margins = NAN}, &rep);
  CHECK(rep.streak == 0 && !rep.warn, "NaN margin should reset the streak");
  cfg.window = 0;
  CHECK(dpo_monitor_init(&mon, &cfg, &err) != 0 && strstr(err.message, "window"), "window 0 accepted");
}

// The tiny model: one pair = row 0 (prompt + chosen) and row 1 (prompt +
// rejected); targets are -1 on the prompt, so each row's log-prob sum is the
// response's summed log-prob.
enum { PAIR_T = 12, PROMPT = 5 };

typedef struct TinyPair {
  GemmaModel *model;
  int tokens[2 * PAIR_T], targets[2 * PAIR_T];
  double ref[2];
  long ntok[2];
  DpoConfig cfg;
} TinyPair;

static int row_sums(TinyPair *tp, double sums[2]) {
  FimiError err = {0};
  float lp[2 * PAIR_T];
  if (gemma_forward(tp->model, tp->tokens, tp->targets, 2, PAIR_T, lp, &err) != 0) {
    CHECK(0, "forward: %s", err.message);
    return -1;
  }
  for (int b = 0; b < 2; b++) {
    sums[b] = 0;
    for (int t = 0; t < PAIR_T; t++) sums[b] += lp[b * PAIR_T + t];
  }
  return 0;
}

static double tiny_loss(TinyPair *tp, DpoPairResult *r) {
  FimiError err = {0};
  double s[2];
  if (row_sums(tp, s) != 0) return NAN;
  DpoPair p = {.policy_chosen = s[0], .policy_rejected = s[1], .ref_chosen = tp->ref[0], .ref_rejected = tp->ref[1],
               .chosen_tokens = tp->ntok[0], .rejected_tokens = tp->ntok[1], .nll_weight = 1.0 / tp->ntok[0]};
  if (dpo_pair_loss(&tp->cfg, &p, r, &err) != 0) return NAN;
  return r->loss;
}

static void test_tiny_model_gradients(void) {
  FimiError err = {0};
  GemmaConfig gcfg;
  GemmaModel model;
  if (gemma_config_preset(&gcfg, "tiny", &err) != 0 || gemma_model_create(&model, &gcfg, &err) != 0) {
    CHECK(0, "tiny model: %s", err.message);
    return;
  }
  TinyPair tp = {.model = &model};
  Rng rng;
  rng_seed(&rng, 99);
  for (int b = 0; b < 2; b++)
    for (int t = 0; t < PAIR_T; t++) {
      // Same prompt on both rows, different responses.
      int tok = t < PROMPT ? 10 + t : (int)(rng_next_u64(&rng) % (uint64_t)gcfg.vocab_size);
      tp.tokens[b * PAIR_T + t] = tok;
    }
  for (int b = 0; b < 2; b++) {
    tp.ntok[b] = 0;
    for (int t = 0; t < PAIR_T; t++) {
      int scored = t + 1 < PAIR_T && t + 1 >= PROMPT;
      tp.targets[b * PAIR_T + t] = scored ? tp.tokens[b * PAIR_T + t + 1] : -1;
      tp.ntok[b] += scored;
    }
  }
  // Reference = the model at seed 1; the policy = the same model moved a bit
  // (seed 2 noise added), so the rewards are not 0.
  gemma_model_init_random(&model, 1);
  row_sums(&tp, tp.ref);
  Rng noise;
  rng_seed(&noise, 2);
  for (int i = 0; i < model.num_tensors; i++) {
    const GemmaTensor *t = &model.tensors[i];
    float *d = gemma_tensor_data(&model, t);
    for (size_t k = 0; k < t->numel; k++) d[k] += 0.01f * (float)rng_normal(&noise);
  }
  // Types 0-2, then 3: sigmoid with the RPO term (rpo_alpha 0.5).
  for (int type = 0; type < 4; type++) {
    tp.cfg.loss_type = type == 3 ? DPO_LOSS_SIGMOID : (DpoLossType)type;
    tp.cfg.beta = type == DPO_LOSS_IPO ? 0.1 : 1.0;
    tp.cfg.rpo_alpha = type == 3 ? 0.5 : 0.0;
    DpoPairResult r;
    tiny_loss(&tp, &r);
    if (type == DPO_LOSS_HINGE && r.dpolicy_chosen == 0) {
      CHECK(0, "hinge saturated on the tiny pair: the check would be empty");
      continue;
    }
    float dlogprobs[2 * PAIR_T];
    for (int b = 0; b < 2; b++)
      for (int t = 0; t < PAIR_T; t++)
        dlogprobs[b * PAIR_T + t] = tp.targets[b * PAIR_T + t] >= 0 ? (float)(b == 0 ? r.dpolicy_chosen
                                                                                      : r.dpolicy_rejected) : 0.0f;
    if (gemma_model_alloc_grads(&model, &err) != 0 || gemma_backward(&model, dlogprobs, &err) != 0) {
      CHECK(0, "backward: %s", err.message);
      break;
    }
    // In a few tensors, the element with the largest gradient vs central
    // differences of the fp32 pipeline (step 3e-3).
    const char *names[4] = {"model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight",
                            "model.layers.3.mlp.down_proj.weight", "model.layers.1.input_layernorm.weight"};
    double worst = 0;
    for (int k = 0; k < 4; k++) {
      const GemmaTensor *t = gemma_find_tensor(&model, names[k]);
      float *data = gemma_tensor_data(&model, t), *grad = gemma_tensor_grad(&model, t);
      size_t best = 0;
      for (size_t i = 1; i < t->numel; i++)
        if (fabsf(grad[i]) > fabsf(grad[best])) best = i;
      float saved = data[best], h = 3e-3f;
      DpoPairResult tmp;
      data[best] = saved + h;
      double up = tiny_loss(&tp, &tmp), hu = (double)data[best] - saved;
      data[best] = saved - h;
      double down = tiny_loss(&tp, &tmp), hd = saved - (double)data[best];
      data[best] = saved;
      double fd = (up - down) / (hu + hd);
      double e = fabs(grad[best] - fd) / fabs(fd);
      worst = fmax(worst, e);
      CHECK(fabs(fd) > 1e-4, "%s: gradient %g too small to check", names[k], fd);
      CHECK(e < 1e-2, "%s loss, %s[%zu]: backward %.6g vs central differences %.6g", dpo_loss_type_name(tp.cfg.loss_type),
            names[k], best, grad[best], fd);
    }
    printf("tiny Gemma, %s%s loss %.4f (rewards %.3f / %.3f): max rel. error of 4 parameter gradients vs central "
           "differences %.2e (tol 1e-2)\n", dpo_loss_type_name(tp.cfg.loss_type), type == 3 ? " + rpo" : "", r.loss, r.reward_chosen,
           r.reward_rejected, worst);
    gemma_model_zero_grads(&model);
  }
  gemma_model_free(&model);
}

// TRL's RPO: every pair's loss + rpo_alpha * the micro-batch's token-mean
// NLL of the chosen responses, -sum(policy_chosen) / sum(chosen_tokens).
static void test_rpo(void) {
  FimiError err = {0};
  Rng rng;
  rng_seed(&rng, 5);
  enum { N = 6 };
  DpoPair pairs[N];
  double dc[N], dr[N], tokens = 0, logp = 0, plain_loss = 0;
  DpoConfig plain = {DPO_LOSS_SIGMOID, 0.1, 0.0}, rpo = {DPO_LOSS_SIGMOID, 0.1, 0.7};
  for (int i = 0; i < N; i++) {
    pairs[i] = random_pair(&rng);
    tokens += (double)pairs[i].chosen_tokens;
    logp += pairs[i].policy_chosen;
  }
  for (int i = 0; i < N; i++) {
    pairs[i].nll_weight = N / tokens;
    DpoPairResult r;
    dpo_pair_loss(&plain, &pairs[i], &r, &err);
    plain_loss += r.loss / N;
  }
  double nll = -logp / tokens;  // TRL: cross_entropy over the chosen tokens, mean
  DpoSums sums;
  dpo_sums_clear(&sums);
  CHECK(dpo_batch_loss(&rpo, pairs, N, 1.0 / N, dc, dr, &sums, &err) == 0, "rpo batch: %s", err.message);
  DpoMetrics m;
  dpo_metrics_from_sums(&sums, &m, &err);
  CHECK_CLOSE(m.loss, plain_loss + 0.7 * nll, 1e-12, "rpo loss = mean DPO loss + alpha * token-mean NLL");
  CHECK_CLOSE(m.nll_loss, nll, 1e-12, "nll_loss metric");
  // d mean loss / d policy_chosen_i gains -alpha / (chosen tokens of the batch).
  for (int i = 0; i < N; i++) {
    DpoPairResult r;
    dpo_pair_loss(&plain, &pairs[i], &r, &err);
    CHECK(fabs(dc[i] - (r.dpolicy_chosen / N - 0.7 / tokens)) < 1e-15, "rpo dchosen %d: %.17g", i, dc[i]);
    CHECK(fabs(dr[i] - r.dpolicy_rejected / N) < 1e-17, "rpo leaves drejected %d", i);
  }
  DpoConfig bad = {DPO_LOSS_SIGMOID, 0.1, -1.0};
  CHECK(dpo_config_validate(&bad, &err) != 0 && strstr(err.message, "rpo_alpha"), "negative rpo_alpha refused");
}

int main(void) {
  test_vs_reference();
  test_rpo();
  test_hand_values();
  test_step_zero();
  test_stability();
  test_batch_and_metrics();
  test_monitor();
  test_tiny_model_gradients();
  TEST_MAIN_END();
}
