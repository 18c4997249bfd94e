// env/tasks/insurance.c: task families of the "insurance" use case: the status
// of a claim, filing a claim and reading its status, an incident outside the
// policy period and a claim on a lapsed policy (both refused), and a delayed
// claim escalated to a human (TRANSFER ending). Fixtures put the policy or
// claim into the state the story needs; the generator reads the seeded policy
// it builds on.
// Also the oldest families of this use case, written with the task_gen_*
// helpers directly: policy_enquiry.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/tasks/family_helpers.h"

static const char *const PERSONAS[] = {
    "policyholder worried about a hospital bill", "car owner after a minor accident",
    "elderly customer whose son usually handles insurance", "homeowner after monsoon damage",
    "busy professional who wants it sorted in one call"};
#define NP ((int)(sizeof PERSONAS / sizeof PERSONAS[0]))

// An active policy. Columns: customer, policy, type, sum assured (paise),
// start date, end date.
#define SQL_POLICY                                                                                           \
  "SELECT customer_id, policy_id, policy_type, sum_assured_paise, start_date, end_date FROM insurance_policies" \
  " WHERE status = 'active' ORDER BY policy_id"

// ---- claim_status_check (happy): where is my claim? ------------------------------
static int gen_claim_status_check(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "claim_status_check", seed);
  char c[6][TASK_GEN_COL_MAX], sql[512], claim[32];
  FAM_TRY(fam_pick(ctx, &rng, SQL_POLICY, 6, c, err));
  static const char *const states[] = {"registered", "under_review", "approved", "settled", "rejected"};
  const char *state = fam_choose(&rng, states, 5);
  snprintf(claim, sizeof claim, "CLM8%05d", (int)task_gen_range(&rng, 0, 99999));
  int64_t amount = task_gen_range(&rng, 2, 60) * 1000;
  // A claim filed a few days ago (ids CLM8xxxxx never collide with counter ids).
  snprintf(sql, sizeof sql,
           "INSERT INTO insurance_claims VALUES ('%s', '%s', '%s', %lld, max(date((SELECT today FROM clock),"
           " '-12 days'), '%.10s'), date((SELECT today FROM clock), '-%d days'), 'Claim raised at the branch', '%s')",
           claim, c[1], c[0], (long long)amount * 100, c[4], (int)task_gen_range(&rng, 1, 10), state);
  FAM_TRY(task_add_fixture(t, sql, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "What is the status of my insurance claim %s?",
                 "Mera insurance claim %s kahan tak pahuncha?", "claim %s status?", claim));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "get_claim_status", "claim_id", 0, "{\"claim_id\":\"%s\"}", claim);
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "claim status", s, "status", err));
  FAM_TRY(task_add_communicate(t, "claim amount", s, "claim_amount", err));
  FAM_TRY(fam_assert(t, err, "The agent does not file a new claim.", TASK_RULE_NOT_CALLED, "file_insurance_claim", NULL));
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- claim_outside_period (edge): the incident predates the policy -----------------
static int gen_claim_outside_period(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "claim_outside_period", seed);
  char c[6][TASK_GEN_COL_MAX], sql[160], date[1][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_POLICY, 6, c, err));
  snprintf(sql, sizeof sql, "SELECT date('%.10s', '-%d days')", c[4], (int)task_gen_range(&rng, 3, 60));
  FAM_TRY(task_gen_first(ctx, sql, NULL, 1, date, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I want to claim on my %s policy for something that happened on %s.",
                 "%s policy pe claim karna hai, %s ko hua tha.", "claim %s policy. incident %s", c[2], date[0]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "incident_date", date[0], "when", "date", "happen", NULL));
  int s = fam_gold(t, err, "list_insurance_policies", "", 0, "{}");
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "policy start date", s, "policies.0.start_date", err));
  FAM_TRY(fam_assert(t, err, "The agent does not file a claim for an incident before the policy started.",
                   TASK_RULE_NOT_CALLED, "file_insurance_claim", NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains that the incident is outside the policy period.",
                   TASK_RULE_MENTIONS_ANY, "policy period", NULL));
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// A date inside the policy period and before today (the image's clock):
// between 1 and 25 days ago, never before the start.
static int incident_date(const TaskGenContext *ctx, Rng *rng, const char *start, char out[TASK_GEN_COL_MAX],
                         FimiError *err) {
  char sql[256], row[1][TASK_GEN_COL_MAX];
  int back = (int)task_gen_range(rng, 1, 25);
  snprintf(sql, sizeof sql, "SELECT max(date((SELECT today FROM clock), '-%d days'), '%.10s')", back, start);
  FAM_TRY(task_gen_first(ctx, sql, NULL, 1, row, err));
  snprintf(out, TASK_GEN_COL_MAX, "%s", row[0]);
  return 0;
}

static const char *const INCIDENTS[][2] = {{"health", "hospitalisation for dengue"},
                                           {"life", "hospitalisation after a fall"},
                                           {"motor", "rear bumper damaged in a collision"},
                                           {"home", "water damage to the kitchen in heavy rain"}};
static const char *incident_text(const char *type) {
  for (int i = 0; i < 4; i++)
    if (strcmp(INCIDENTS[i][0], type) == 0) return INCIDENTS[i][1];
  return "an incident covered by the policy";
}

// ---- claim_file (seq, 4 steps): list policies, file the claim, read status -----
static int gen_claim_file(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "claim_file", seed);
  char c[6][TASK_GEN_COL_MAX], date[TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_POLICY, 6, c, err));
  FAM_TRY(incident_date(ctx, &rng, c[4], date, err));
  int64_t cap = atoll(c[3]) / 100 / 2;
  int64_t amount = task_gen_range(&rng, 1, cap / 1000 > 1 ? cap / 1000 : 1) * 1000;
  char amount_text[32];
  snprintf(amount_text, sizeof amount_text, "%lld", (long long)amount);
  const char *what = incident_text(c[2]);
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I need to make a claim on my %s policy: %s.",
                 "Meri %s policy pe claim karna hai: %s.", "claim. %s policy. %s", c[2], what));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "incident_date", date, "when", "date", "happen", NULL));
  FAM_TRY(fam_field(t, err, "claim_amount", amount_text, "how much", "amount", NULL));
  FAM_TRY(fam_gold(t, err, "list_insurance_policies", "", 0, "{}"));
  int s = fam_gold(t, err, "file_insurance_claim", "policy_id,claim_amount,incident_date", 0,
                  "{\"policy_id\":\"%s\",\"claim_amount\":%lld,\"incident_date\":\"%s\",\"description\":\"%s\"}", c[1],
                  (long long)amount, date, what);
  FAM_TRY(s);
  char claim[TASK_GEN_COL_MAX];
  FAM_TRY(fam_replay_text(ctx, t, s, "claim_id", claim, sizeof claim, err));
  int st = fam_gold(t, err, "get_claim_status", "claim_id", 0, "{\"claim_id\":\"%s\"}", claim);
  FAM_TRY(st);
  FAM_TRY(task_add_communicate(t, "claim_id", s, "claim_id", err));
  FAM_TRY(task_add_communicate(t, "claim status", st, "status", err));
  FAM_TRY(fam_assert(t, err, "The agent files the claim.", TASK_RULE_CALLED, "file_insurance_claim", NULL));
  FAM_TRY(fam_variant(t, err, c[2]));
  // The db check leaves free-text columns out (env/episode.c), so the
  // wording of the description or reason does not decide it.
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- claim_lapsed_policy (edge): the policy lapsed, no claim ---------------------
static int gen_claim_lapsed_policy(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "claim_lapsed_policy", seed);
  char c[6][TASK_GEN_COL_MAX], sql[256];
  FAM_TRY(fam_pick(ctx, &rng, SQL_POLICY, 6, c, err));
  snprintf(sql, sizeof sql, "UPDATE insurance_policies SET status = 'lapsed' WHERE policy_id = '%s'", c[1]);
  FAM_TRY(task_add_fixture(t, sql, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I want to claim on my %s policy for %s.",
                 "%s policy pe claim dalna hai, %s hua tha.", "claim %s policy. %s", c[2], incident_text(c[2])));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "list_insurance_policies", "", 0, "{}");
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "policy status", s, "policies.0.status", err));
  FAM_TRY(fam_assert(t, err, "The agent does not file a claim on a lapsed policy.", TASK_RULE_NOT_CALLED,
                   "file_insurance_claim", NULL));
  FAM_TRY(fam_assert(t, err, "The agent explains that the policy has lapsed.", TASK_RULE_MENTIONS_ANY, "lapsed", NULL));
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- claim_escalate (seq, TRANSFER): a stuck claim goes to a human ---------------
static int gen_claim_escalate(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "claim_escalate", seed);
  char c[6][TASK_GEN_COL_MAX], sql[512], claim[32];
  // The policy must have run for 50 days so the incident and filing dates fall inside it.
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, policy_id, policy_type, sum_assured_paise, start_date, end_date"
                 " FROM insurance_policies WHERE status = 'active'"
                 " AND start_date <= date((SELECT today FROM clock), '-50 days') ORDER BY policy_id",
                 6, c, err));
  // A claim filed weeks ago and still under review (ids of the form CLM9xxxxx
  // never collide with counter ids CLM001001...).
  snprintf(claim, sizeof claim, "CLM9%05d", (int)task_gen_range(&rng, 0, 99999));
  int64_t amount = task_gen_range(&rng, 5, 50) * 1000;
  snprintf(sql, sizeof sql,
           "INSERT INTO insurance_claims VALUES ('%s', '%s', '%s', %lld, date((SELECT today FROM clock),"
           " '-45 days'), date((SELECT today FROM clock), '-40 days'), '%s', 'under_review')",
           claim, c[1], c[0], (long long)amount * 100, incident_text(c[2]));
  FAM_TRY(task_add_fixture(t, sql, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err,
                 "My claim %s has been pending for over a month. I want to speak to a person about it.",
                 "Mera claim %s ek mahine se pending hai. Kisi insaan se baat karwao.",
                 "claim %s stuck 40 days. human pls", claim));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "get_claim_status", "claim_id", 0, "{\"claim_id\":\"%s\"}", claim);
  FAM_TRY(s);
  FAM_TRY(fam_gold(t, err, "transfer_to_human_agent", "", 0,
                 "{\"reason\":\"Insurance claim %s under review for 40 days; customer asks for a person\"}", claim));
  FAM_TRY(task_add_communicate(t, "claim status", s, "status", err));
  FAM_TRY(fam_assert(t, err, "The agent checks the claim before handing over.", TASK_RULE_CALLED_BEFORE,
                   "get_claim_status", "transfer_to_human_agent", NULL));
  FAM_TRY(fam_assert(t, err, "The conversation ends with a hand-off to a human.", TASK_RULE_END_IS, "transfer", NULL));
  t->expected_end = TASK_END_TRANSFER;
  FAM_TRY(fam_variant(t, err, c[2]));
  // The db check leaves free-text columns out (env/episode.c), so the
  // wording of the description or reason does not decide it.
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- policy_enquiry: which policies do I hold (happy, insurance) ------------
static const char *const policy_reasons[TASK_STYLE_COUNT][2] = {
    {"Which insurance policies do I have with you?", "I want the details of my insurance policy."},
    {"Meri kaunsi insurance policies hain aapke paas?", "Policy ki details chahiye mujhe."},
    {"my insurance policy details", "policy info pls"},
};
static int gen_policy_enquiry(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  rng_seed(&rng, seed);
  char row[2][TASK_GEN_COL_MAX];
  // policy_type: the customer's one policy (count 1), so the variant is its type.
  if (task_gen_pick(ctx, &rng,
                    "SELECT customer_id, policy_type FROM insurance_policies GROUP BY customer_id HAVING count(*) = 1"
                    " ORDER BY customer_id",
                    NULL, 2, row, err) != 0)
    return -1;
  if (task_set(&t->persona, err, "A policyholder who lost the policy papers.") ||
      fam_pick_reason(t, &rng, policy_reasons, err) || task_gen_add_verify(ctx, t, row[0], err) < 0)
    return -1;
  int step = task_add_gold(t, "list_insurance_policies", "{}", NULL, 0, err);
  if (step < 0 || task_add_communicate(t, "policy_id", step, "policies.0.policy_id", err) ||
      task_add_communicate(t, "sum_assured", step, "policies.0.sum_assured", err))
    return -1;
  FAM_TRY(fam_variant(t, err, row[1]));
  t->checks = FAM_CHECKS_WORK;
  t->kind = TASK_KIND_HAPPY;
  t->max_turns = 12;
  return 0;
}
const TaskFamily fam_policy_enquiry = {"policy_enquiry", TASK_USE_INSURANCE, TASK_KIND_HAPPY,
                                          "Verify, list the insurance policy, say its id and cover.",
                                          gen_policy_enquiry, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS,
    "health,life,motor,home"};

// slice: TASK_SLICE_SHALLOW or _DEEP; flags: TASK_FAMILY_*; variants: comma-separated prefixes.
#define FAMILY(var, name, kind, slice, flags, variants, summary) \
  const TaskFamily var = {#name, TASK_USE_INSURANCE, kind, summary, gen_##name, slice, flags, variants};
FAMILY(fam_claim_status_check, claim_status_check, TASK_KIND_HAPPY, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "health,life,motor,home", "status of an existing claim (read-only)")
FAMILY(fam_claim_outside_period, claim_outside_period, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "health,life,motor,home", "incident before the policy start: refuse")
FAMILY(fam_claim_file, claim_file, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "health,life,motor,home", "list policies, file a claim, read its status")
FAMILY(fam_claim_lapsed_policy, claim_lapsed_policy, TASK_KIND_EDGE, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "health,life,motor,home", "claim on a lapsed policy: refuse")
FAMILY(fam_claim_escalate, claim_escalate, TASK_KIND_SEQ, TASK_SLICE_SHALLOW, TASK_FAMILY_CHANNELS, "health,life,motor,home", "stuck claim: status, hand-off to a human (TRANSFER)")

// ==== second round (the deep slice) ===========================================
// ---- claim_over_cover (edge, 2 steps): more than the sum assured is refused ------------
static int gen_claim_over_cover(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "claim_over_cover", seed);
  char c[6][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng, SQL_POLICY, 6, c, err));
  char amount[32];
  snprintf(amount, sizeof amount, "%lld", (long long)(atoll(c[3]) / 100 + task_gen_range(&rng, 1, 50) * 10000));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "I want to claim Rs %s on my %s policy for %s.",
                 "Meri %2$s policy pe Rs %1$s ka claim karna hai, %3$s hua.", "claim %s. %s policy. %s", amount, c[2],
                 incident_text(c[2])));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  FAM_TRY(fam_field(t, err, "claim_amount", amount, "how much", "amount", NULL));
  FAM_TRY(fam_gold(t, err, "list_insurance_policies", "", 0, "{}"));
  FAM_TRY(fam_assert(t, err, "The agent does not file a claim above the sum assured.", TASK_RULE_NOT_CALLED,
                   "file_insurance_claim", NULL));
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_WORK);
  return 0;
}

// ---- policy_renewal_comm (happy, communication, 2 steps): premium and end date said ----
static int gen_policy_renewal_comm(const TaskGenContext *ctx, uint64_t seed, Task *t, FimiError *err) {
  Rng rng;
  fam_rng(&rng, "policy_renewal_comm", seed);
  char c[3][TASK_GEN_COL_MAX];
  FAM_TRY(fam_pick(ctx, &rng,
                 "SELECT customer_id, policy_id, policy_type FROM insurance_policies WHERE customer_id IN (SELECT"
                 " customer_id FROM insurance_policies GROUP BY customer_id HAVING count(*) = 1) ORDER BY policy_id",
                 3, c, err));
  fam_style(t, &rng);
  FAM_TRY(fam_open(t, &rng, PERSONAS, NP, err, "When does my %s policy end, and what is its yearly premium?",
                 "Meri %s policy kab khatam hogi aur saal ka premium kitna hai?", "%s policy end date + premium?",
                 c[2]));
  FAM_TRY(task_gen_add_verify(ctx, t, c[0], err));
  int s = fam_gold(t, err, "list_insurance_policies", "", 0, "{}");
  FAM_TRY(s);
  FAM_TRY(task_add_communicate(t, "policy end date", s, "policies.0.end_date", err));
  FAM_TRY(task_add_communicate(t, "annual premium", s, "policies.0.annual_premium", err));
  FAM_TRY(fam_variant(t, err, c[2]));
  fam_finish(t, FAM_CHECKS_COMM);
  return 0;
}

// slice: TASK_SLICE_DEEP; flags: TASK_FAMILY_*; variants: comma-separated prefixes.
FAMILY(fam_claim_over_cover, claim_over_cover, TASK_KIND_EDGE, TASK_SLICE_DEEP, TASK_FAMILY_CHANNELS, "health,life,motor,home",
       "claim above the sum assured: policies read, refuse")
FAMILY(fam_policy_renewal_comm, policy_renewal_comm, TASK_KIND_HAPPY, TASK_SLICE_DEEP, TASK_FAMILY_COMMUNICATION | TASK_FAMILY_CHANNELS,
       "health,life,motor,home", "policy end date and annual premium said")
