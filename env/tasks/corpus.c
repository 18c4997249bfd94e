// env/tasks/corpus.c: building the task corpus (env/tasks/corpus.h,
// docs/corpus.md): per-use-case quotas filled round-robin over the
// registered families, the task gates run on every draw, then the held-out,
// validation and training splits drawn family-stratified with the selection
// gates, and the check gates over the result.
#include "env/tasks/corpus.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "env/agents.h"
#include "env/episode.h"
#include "env/tasks/family.h"

// ---- names -------------------------------------------------------------------

static const char *const SPLIT_NAMES[CORPUS_SPLIT_COUNT] = {"corpus", "heldout", "validation", "train"};
static const char *const SPLIT_FILES[CORPUS_SPLIT_COUNT] = {"corpus.jsonl", "heldout.jsonl", "validation.jsonl",
                                                            "train.jsonl"};
const char *corpus_split_name(CorpusSplit s) { return s < CORPUS_SPLIT_COUNT ? SPLIT_NAMES[s] : "?"; }
const char *corpus_split_file(CorpusSplit s) { return s < CORPUS_SPLIT_COUNT ? SPLIT_FILES[s] : "?"; }

static const struct {
  const char *name, *rule;
} GATES[CORPUS_GATE_COUNT] = {
    {"replay", "the family generates the task and its gold chain replays end to end on the bank"},
    {"relevant_args", "training sample: every gold action with arguments (consent aside) names a relevant one, none empty"},
    {"distinct", "no other corpus task has the same JSON line (id aside)"},
    {"roundtrip", "the JSON line reads back through the strict reader to the same line"},
    {"oracle", "the oracle agent scores total 1.0 and strict 1.0 and ends as expected"},
    {"not_trivial", "the do-nothing agent scores below 1.0"},
    {"depth", "gold chain of at most 8 actions, 6 in the shallow slice"},
    {"order_spread", "seq tasks call at least two different tools; no chain length holds over 50% of the sample"},
    {"opening_diversity", "one opening line at most 3 times in a split"},
    {"leakage", "no training or validation task shares a held-out task's instance (family and customer, or family and gold chain)"},
    {"customer_spread", "one customer in at most max(8, 3 x the split's tasks per customer) tasks of a split"},
    {"family_balance", "one family at most 3% of the training sample"},
    {"family_coverage", "every sample family with tasks passing relevant_args and an instance not held out is in the training sample; every shallow family has held-out tasks"},
    {"use_case_shares", "corpus use-case shares within 1.5 points of the target"},
    {"disjoint", "no task in two splits; no training or validation task shares a held-out instance"},
    {"stratified", "each kind's share of the training sample within 2 points of its held-out share"},
};
const char *corpus_gate_name(CorpusGate g) { return g < CORPUS_GATE_COUNT ? GATES[g].name : "?"; }
const char *corpus_gate_rule(CorpusGate g) { return g < CORPUS_GATE_COUNT ? GATES[g].rule : "?"; }

void corpus_config_default(CorpusConfig *c) {
  memset(c, 0, sizeof *c);
  c->seed = 1;
  c->image_seed = bank_image_seed(1, CORPUS_CUSTOMERS);
  c->total = 48245;
  c->heldout = 1000;
  c->validation = 100;
  c->train = 10000;
  // The FiMI paper, section 5.1: corpus task shares by use case.
  c->use_case_share[TASK_USE_ACCOUNTS_KYC] = 0.322;
  c->use_case_share[TASK_USE_DEPOSITS_LOANS] = 0.326;
  c->use_case_share[TASK_USE_INSURANCE] = 0.048;
  c->use_case_share[TASK_USE_GOV_SCHEMES] = 0.012;
  c->use_case_share[TASK_USE_CROSS_CUTTING] = 0.291;
}

// ---- small helpers -------------------------------------------------------------

uint64_t corpus_fnv1a64(const void *data, size_t size) { return hash_fnv1a(HASH_FNV1A_BASIS, data, size); }

static uint64_t text_hash(const char *s) { return hash_mix64(corpus_fnv1a64(s, strlen(s))); }

// Seed of draw i of a family: the run seed, the family's name and i, so a
// new family never changes another family's draws.
static uint64_t draw_seed(uint64_t seed, const char *family, int i) {
  return hash_mix64(text_hash(family) ^ hash_mix64(seed) ^ ((uint64_t)i * 0x9E3779B97F4A7C15ULL));
}

// A set of 64-bit keys (open addressing; 0 is stored as a separate flag).
typedef struct KeySet {
  uint64_t *slots;
  size_t cap, count;
  int has_zero;
} KeySet;

static int keyset_grow(KeySet *s) {
  size_t cap = s->cap ? s->cap * 2 : 1024;
  uint64_t *slots = calloc(cap, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < s->cap; i++)
    if (s->slots[i]) {
      size_t j = s->slots[i] & (cap - 1);
      while (slots[j]) j = (j + 1) & (cap - 1);
      slots[j] = s->slots[i];
    }
  free(s->slots);
  s->slots = slots;
  s->cap = cap;
  return 0;
}

static int keyset_has(const KeySet *s, uint64_t key) {
  if (!key) return s->has_zero;
  if (!s->cap) return 0;
  for (size_t j = key & (s->cap - 1); s->slots[j]; j = (j + 1) & (s->cap - 1))
    if (s->slots[j] == key) return 1;
  return 0;
}

// Adds key; 1 when it was new, 0 when present, -1 out of memory.
static int keyset_add(KeySet *s, uint64_t key) {
  if (keyset_has(s, key)) return 0;
  if (!key) return s->has_zero = 1;
  if ((s->count + 1) * 2 > s->cap && keyset_grow(s) != 0) return -1;
  size_t j = key & (s->cap - 1);
  while (s->slots[j]) j = (j + 1) & (s->cap - 1);
  s->slots[j] = key;
  s->count++;
  return 1;
}

static void keyset_free(KeySet *s) {
  free(s->slots);
  memset(s, 0, sizeof *s);
}

// Counts per key (opening lines, customers) within one split.
typedef struct KeyCount {
  uint64_t *keys;
  int *counts;
  size_t cap;
} KeyCount;

static int *keycount_slot(KeyCount *k, uint64_t key) {
  key |= 1;  // never 0 (empty slot)
  if (!k->cap) {
    k->cap = 1 << 16;
    k->keys = calloc(k->cap, sizeof *k->keys);
    k->counts = calloc(k->cap, sizeof *k->counts);
    if (!k->keys || !k->counts) return NULL;
  }
  size_t j = key & (k->cap - 1);
  for (size_t probes = 0; probes < k->cap; probes++, j = (j + 1) & (k->cap - 1)) {
    if (k->keys[j] == key) return &k->counts[j];
    if (!k->keys[j]) {
      k->keys[j] = key;
      return &k->counts[j];
    }
  }
  return NULL;  // full: more distinct keys than 65,536 in one split (callers treat as over the cap)
}

static void keycount_free(KeyCount *k) {
  free(k->keys);
  free(k->counts);
  memset(k, 0, sizeof *k);
}

// ---- what a task is about ---------------------------------------------------------

void corpus_task_customer(const Task *t, char out[BANK_ID_MAX]) {
  out[0] = '\0';
  const char *id = t->authenticated;
  for (int i = 0; !id && i < t->num_fields; i++)
    if (strcmp(t->fields[i].name, "customer_id") == 0) id = t->fields[i].value;
  for (int i = 0; !id && i < t->num_gold; i++)
    if (strcmp(t->gold[i].name, "verify_customer") == 0) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(t->gold[i].arguments, "customer_id");
      if (cJSON_IsString(v)) id = v->valuestring;
    }
  if (id) snprintf(out, BANK_ID_MAX, "%s", id);
}

// The task's JSON line without its id: what "the same task" means.
static int content_hash(Task *t, uint64_t *out, FimiError *err) {
  char *id = t->id;
  t->id = NULL;
  char *line = task_to_json_line(t, err);
  t->id = id;
  if (!line) return -1;
  *out = text_hash(line);
  free(line);
  return 0;
}

// The gold actions' names and arguments (compact JSON), in order: what a
// customer-less task asks the bank to do, whatever its wording.
static int gold_chain_hash(const Task *t, uint64_t *out, FimiError *err) {
  uint64_t h = 0;
  for (int i = 0; i < t->num_gold; i++) {
    char *args = cJSON_PrintUnformatted(t->gold[i].arguments);
    if (!args) return fimi_fail(err, "corpus: out of memory hashing task %s", t->id ? t->id : "?");
    h = hash_mix64(h ^ text_hash(t->gold[i].name));
    h = hash_mix64(h ^ text_hash(args));
    free(args);
  }
  *out = h;
  return 0;
}

void corpus_instance_key(const CorpusTask *t, const char *family, char *out, size_t size) {
  if (t->customer[0]) snprintf(out, size, "%s|%s", family, t->customer);
  else snprintf(out, size, "%s|gold:%016llx", family, (unsigned long long)t->gold_chain);
}

static uint64_t instance_hash(const CorpusTask *t, const char *family) {
  char key[CORPUS_NAME_MAX + 64];
  corpus_instance_key(t, family, key, sizeof key);
  return text_hash(key);
}

// ---- task gates --------------------------------------------------------------------

// The consent flag is checked apart from the arguments the sequence check
// compares, so it does not count as an argument here.
static int compared_arguments(const cJSON *arguments) {
  int n = 0;
  for (const cJSON *a = arguments ? arguments->child : NULL; a; a = a->next)
    n += strcmp(a->string, "customer_confirmed") != 0;
  return n;
}

static int relevant_args_ok(const Task *t) {
  for (int i = 0; i < t->num_gold; i++) {
    const TaskAction *a = &t->gold[i];
    if (compared_arguments(a->arguments) > 0 && a->num_relevant == 0) return 0;
    for (int r = 0; r < a->num_relevant; r++) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(a->arguments, a->relevant[r]);
      if (!v || cJSON_IsNull(v) || (cJSON_IsString(v) && !v->valuestring[0])) return 0;
    }
  }
  return 1;
}

static int roundtrip_ok(const Task *t, FimiError *err) {
  char *line = task_to_json_line(t, err);
  if (!line) return -1;
  cJSON *json = cJSON_Parse(line);
  Task back;
  int ok = 0;
  if (json && task_from_json(json, &back, err) == 0) {
    char *again = task_to_json_line(&back, err);
    ok = again && strcmp(again, line) == 0;
    free(again);
    task_free(&back);
  }
  fimi_error_clear(err);
  cJSON_Delete(json);
  free(line);
  return ok;
}

// Seq tasks exist to test order: a chain of one repeated tool cannot be
// called out of order.
static int order_ok(const Task *t) {
  if (t->kind != TASK_KIND_SEQ) return 1;
  for (int i = 1; i < t->num_gold; i++)
    if (strcmp(t->gold[i].name, t->gold[0].name) != 0) return 1;
  return 0;
}

// Runs the task gates after generation; returns the first gate failed, or
// CORPUS_GATE_COUNT when all pass, or -1 on an internal error.
static int task_gates(EnvWorld *world, const Task *t, int shallow, uint64_t seed, FimiError *err) {
  int rt = roundtrip_ok(t, err);
  if (rt < 0) return -1;
  if (!rt) return CORPUS_GATE_ROUNDTRIP;
  if (t->num_gold > (shallow ? CORPUS_SHALLOW_CHAIN : CORPUS_MAX_CHAIN)) return CORPUS_GATE_DEPTH;
  if (!order_ok(t)) return CORPUS_GATE_ORDER_SPREAD;
  RewardBreakdown r;
  if (agent_run_episode(world, t, seed, AGENT_ORACLE, &r, err) != 0) return -1;
  if (r.total != 1.0 || r.strict_total != 1.0 || r.end != t->expected_end) return CORPUS_GATE_ORACLE;
  // An agent that calls nothing scores seq 0 on a declared seq check with a
  // non-empty chain (weight 0.40 of the total): no episode needed then.
  if ((t->checks & TASK_CHECK_SEQ) && t->num_gold > 0) return CORPUS_GATE_COUNT;
  if (agent_run_episode(world, t, seed, AGENT_DO_NOTHING, &r, err) != 0) return -1;
  if (r.total >= 1.0) return CORPUS_GATE_NOT_TRIVIAL;
  return CORPUS_GATE_COUNT;
}

// ---- generation ------------------------------------------------------------------

typedef struct Builder {
  Corpus *c;
  TaskGenContext ctx;
  EnvWorld *world;
  KeySet seen;  // content hashes
  int cap;
} Builder;

static int push_task(Builder *b, Task *t, int family, uint64_t content, FimiError *err) {
  Corpus *c = b->c;
  uint64_t gold_chain = 0;
  if (gold_chain_hash(t, &gold_chain, err) != 0) return -1;
  if (c->count == b->cap) {
    int cap = b->cap ? b->cap * 2 : 4096;
    if (cap > CORPUS_MAX_TASKS) return fimi_fail(err, "corpus: more than %d tasks", CORPUS_MAX_TASKS);
    CorpusTask *grown = realloc(c->tasks, (size_t)cap * sizeof *grown);
    if (!grown) return fimi_fail(err, "corpus: out of memory");
    c->tasks = grown;
    b->cap = cap;
  }
  CorpusTask *ct = &c->tasks[c->count++];
  memset(ct, 0, sizeof *ct);
  ct->task = *t;
  ct->family = family;
  ct->content = content;
  ct->relevant_ok = relevant_args_ok(t);
  corpus_task_customer(t, ct->customer);
  ct->gold_chain = gold_chain;
  return 0;
}

static void reject(Corpus *c, int family, int gate) {
  c->gate_rejected[gate]++;
  c->families[family].gate_rejected[gate]++;
}

// Draws seeds of one family until it yields a new task that passes the task
// gates (1), or CORPUS_EXHAUSTED_STREAK draws in a row gave none (0).
static int draw_one(Builder *b, int f, FimiError *err) {
  Corpus *c = b->c;
  CorpusFamily *fam = &c->families[f];
  const TaskFamily *family = task_family_at(f);
  for (int streak = 0; streak < CORPUS_EXHAUSTED_STREAK; streak++) {
    uint64_t seed = draw_seed(c->config.seed, family->name, fam->draws++);
    Task t;
    FimiError gen_err = {0};
    if (task_generate(&b->ctx, family, seed, &t, &gen_err) != 0) {
      reject(c, f, CORPUS_GATE_REPLAY);
      continue;
    }
    uint64_t content = 0;
    if (content_hash(&t, &content, err) != 0) {
      task_free(&t);
      return -1;
    }
    if (keyset_has(&b->seen, content)) {
      reject(c, f, CORPUS_GATE_DISTINCT);
      task_free(&t);
      continue;
    }
    int gate = task_gates(b->world, &t, fam->shallow, seed, err);
    if (gate < 0) {
      task_free(&t);
      return fimi_fail_wrap(err, "corpus: family %s, seed %llu", family->name, (unsigned long long)seed);
    }
    if (gate != CORPUS_GATE_COUNT) {
      reject(c, f, gate);
      task_free(&t);
      continue;
    }
    if (keyset_add(&b->seen, content) < 0 || push_task(b, &t, f, content, err) != 0) {
      task_free(&t);
      return fimi_fail(err, "corpus: out of memory");
    }
    fam->tasks++;
    return 1;
  }
  return 0;
}

// Target task counts per use case (largest remainder, summing to total).
static void use_case_targets(const CorpusConfig *cfg, int targets[TASK_USE_COUNT]) {
  double sum = 0;
  for (int u = 0; u < TASK_USE_COUNT; u++) sum += cfg->use_case_share[u];
  int given = 0;
  double rest[TASK_USE_COUNT];
  for (int u = 0; u < TASK_USE_COUNT; u++) {
    double exact = sum > 0 ? cfg->total * cfg->use_case_share[u] / sum : 0;
    targets[u] = (int)floor(exact);
    rest[u] = exact - targets[u];
    given += targets[u];
  }
  while (given < cfg->total) {
    int best = 0;
    for (int u = 1; u < TASK_USE_COUNT; u++)
      if (rest[u] > rest[best]) best = u;
    targets[best]++;
    rest[best] = -1;
    given++;
  }
}

static int generate_use_case(Builder *b, TaskUseCase u, int target, FimiError *err) {
  Corpus *c = b->c;
  int made = 0, active = 1;
  while (made < target && active) {
    active = 0;
    for (int f = 0; f < c->num_families && made < target; f++) {
      CorpusFamily *fam = &c->families[f];
      if (fam->use_case != u || fam->exhausted) continue;
      int got = draw_one(b, f, err);
      if (got < 0) return -1;
      if (got) made++, active = 1;
      else fam->exhausted = 1;
    }
    if (c->config.progress) fprintf(stderr, "\rcorpus: %-15s %6d/%d tasks", task_use_case_name(u), made, target);
  }
  if (c->config.progress) fprintf(stderr, "\n");
  return 0;
}

// ---- splits ----------------------------------------------------------------------

typedef struct SplitState {
  KeyCount openings, customers;
  int count;
  int customer_cap;  // the customer spread gate's limit for this split
} SplitState;

// At most 3 times a split's mean tasks per customer, and never below 8.
static int customer_cap(const Corpus *c, int split_size) {
  int customers = c->image_customers > 0 ? c->image_customers : 1;
  int cap = (3 * split_size + customers - 1) / customers;
  return cap > CORPUS_CUSTOMER_MAX_TASKS ? cap : CORPUS_CUSTOMER_MAX_TASKS;
}

// The selection gates of one split for one candidate: 1 taken, 0 rejected.
static int try_take(Corpus *c, SplitState *s, CorpusTask *t, CorpusSplit split) {
  int *opening = keycount_slot(&s->openings, text_hash(t->task.reason));
  if (!opening || *opening >= CORPUS_OPENING_MAX_REPEATS) {
    reject(c, t->family, CORPUS_GATE_OPENING);
    return 0;
  }
  int *customer = t->customer[0] ? keycount_slot(&s->customers, text_hash(t->customer)) : NULL;
  if (t->customer[0] && (!customer || *customer >= s->customer_cap)) {
    reject(c, t->family, CORPUS_GATE_CUSTOMER_SPREAD);
    return 0;
  }
  (*opening)++;
  if (customer) (*customer)++;
  t->split = split;
  c->families[t->family].split_tasks[split]++;
  s->count++;
  return 1;
}

// Tasks of each family in a fixed pseudo-random order (by seed and content).
typedef struct Order {
  int *index;  // task indices grouped by family
  int *start;  // [num_families + 1]
} Order;

static uint64_t order_seed;
static const Corpus *order_corpus;
static int by_family_then_hash(const void *a, const void *b) {
  const CorpusTask *x = &order_corpus->tasks[*(const int *)a], *y = &order_corpus->tasks[*(const int *)b];
  if (x->family != y->family) return x->family - y->family;
  uint64_t hx = hash_mix64(x->content ^ order_seed), hy = hash_mix64(y->content ^ order_seed);
  return hx < hy ? -1 : hx > hy;
}

static int order_build(const Corpus *c, uint64_t salt, Order *o, FimiError *err) {
  o->index = calloc((size_t)c->count + 1, sizeof *o->index);
  o->start = calloc((size_t)c->num_families + 1, sizeof *o->start);
  if (!o->index || !o->start) return fimi_fail(err, "corpus: out of memory");
  for (int i = 0; i < c->count; i++) o->index[i] = i;
  order_seed = hash_mix64(c->config.seed ^ salt);
  order_corpus = c;
  qsort(o->index, (size_t)c->count, sizeof *o->index, by_family_then_hash);
  for (int i = 0, f = 0; f <= c->num_families; f++) {
    while (i < c->count && c->tasks[o->index[i]].family < f) i++;
    o->start[f] = i;
  }
  return 0;
}

static void order_free(Order *o) {
  free(o->index);
  free(o->start);
}

// Largest-remainder shares of `total` over weights (0 weight: 0).
static void apportion(const double *weights, int n, int total, int *out) {
  double sum = 0;
  for (int i = 0; i < n; i++) sum += weights[i];
  int given = 0;
  for (int i = 0; i < n; i++) {
    out[i] = sum > 0 ? (int)floor(total * weights[i] / sum) : 0;
    given += out[i];
  }
  for (int round = 0; given < total && sum > 0 && round < n; round++) {
    int best = -1;
    double best_rest = -1;
    for (int i = 0; i < n; i++) {
      double rest = total * weights[i] / sum - out[i];
      if (weights[i] > 0 && rest > best_rest && rest < 1.0) best = i, best_rest = rest;
    }
    if (best < 0) break;
    out[best]++;
    given++;
  }
}

// Which tasks a split may take: a family flag, a kind (-1: any) and the
// instances already used by the held-out set (and validation).
typedef struct Pick {
  int need_shallow, need_sample, kind;
  const KeySet *blocked;
} Pick;

static int family_fits(const Corpus *c, int f, const Pick *p) {
  const CorpusFamily *fam = &c->families[f];
  return (!p->need_shallow || fam->shallow) && (!p->need_sample || fam->in_sample) &&
         (p->kind < 0 || fam->kind == (TaskKind)p->kind);
}

static int eligible(const Corpus *c, const CorpusTask *t, const Pick *p) {
  return t->split == CORPUS_SPLIT_CORPUS && family_fits(c, t->family, p) && (!p->need_sample || t->relevant_ok) &&
         !keyset_has(p->blocked, instance_hash(t, c->families[t->family].name));
}

// Fills one split up to `want` tasks: each family up to its quota, then any
// shortfall one task at a time round-robin over the fitting families (up to
// cap each); every candidate passes the selection gates.
static int fill_split(Corpus *c, const Order *o, CorpusSplit split, const int *quota, int cap, const Pick *p,
                      SplitState *s, int want) {
  int *next = calloc((size_t)c->num_families + 1, sizeof *next);
  if (!next) return -1;
  for (int f = 0; f < c->num_families && s->count < want; f++) {
    int *have = &c->families[f].split_tasks[split];
    while (*have < quota[f] && s->count < want && o->start[f] + next[f] < o->start[f + 1]) {
      CorpusTask *t = &c->tasks[o->index[o->start[f] + next[f]++]];
      if (eligible(c, t, p)) try_take(c, s, t, split);
    }
  }
  for (int progress = 1; progress && s->count < want;) {
    progress = 0;
    for (int f = 0; f < c->num_families && s->count < want; f++) {
      if (!family_fits(c, f, p) || c->families[f].split_tasks[split] >= cap) continue;
      while (o->start[f] + next[f] < o->start[f + 1]) {
        CorpusTask *t = &c->tasks[o->index[o->start[f] + next[f]++]];
        if (eligible(c, t, p) && try_take(c, s, t, split)) {
          progress = 1;
          break;
        }
      }
    }
  }
  free(next);
  return 0;
}

static int block_instances(const Corpus *c, CorpusSplit split, KeySet *blocked) {
  for (int i = 0; i < c->count; i++)
    if (c->tasks[i].split == split &&
        keyset_add(blocked, instance_hash(&c->tasks[i], c->families[c->tasks[i].family].name)) < 0)
      return -1;
  return 0;
}

static void split_state_free(SplitState *s) {
  keycount_free(&s->openings);
  keycount_free(&s->customers);
}

// Held-out and validation: shallow families, quotas by their corpus size.
static int draw_heldout_like(Corpus *c, const Order *o, CorpusSplit split, int want, const KeySet *blocked) {
  double w[CORPUS_MAX_FAMILIES];
  int quota[CORPUS_MAX_FAMILIES];
  for (int f = 0; f < c->num_families; f++) w[f] = c->families[f].shallow ? c->families[f].tasks : 0;
  apportion(w, c->num_families, want, quota);
  Pick p = {1, 0, -1, blocked};
  SplitState s = {.customer_cap = customer_cap(c, want)};
  int rc = fill_split(c, o, split, quota, 1 << 30, &p, &s, want);
  split_state_free(&s);
  return rc;
}

// Training sample: kind quotas from the held-out mix (the stratification
// gate); within a kind, family quotas by candidates left, each capped by the
// family balance gate. One opening/customer state for the whole split.
static int draw_train(Corpus *c, const Order *o, const KeySet *blocked) {
  int want = c->config.train, cap = (int)floor(CORPUS_FAMILY_MAX_SHARE * want);
  double kind_w[TASK_KIND_COUNT] = {0};
  int kind_quota[TASK_KIND_COUNT];
  for (int i = 0; i < c->count; i++)
    if (c->tasks[i].split == CORPUS_SPLIT_HELDOUT) kind_w[c->tasks[i].task.kind] += 1;
  apportion(kind_w, TASK_KIND_COUNT, want, kind_quota);
  SplitState s = {.customer_cap = customer_cap(c, want)};
  int rc = 0;
  for (int k = 0; k < TASK_KIND_COUNT && rc == 0; k++) {
    Pick p = {0, 1, k, blocked};
    double w[CORPUS_MAX_FAMILIES];
    int quota[CORPUS_MAX_FAMILIES];
    for (int f = 0; f < c->num_families; f++) {
      w[f] = 0;
      for (int j = o->start[f]; family_fits(c, f, &p) && j < o->start[f + 1]; j++)
        w[f] += eligible(c, &c->tasks[o->index[j]], &p);
    }
    apportion(w, c->num_families, kind_quota[k], quota);
    for (int f = 0; f < c->num_families; f++)
      if (quota[f] > cap) quota[f] = cap;
    rc = fill_split(c, o, CORPUS_SPLIT_TRAIN, quota, cap, &p, &s, s.count + kind_quota[k]);
  }
  split_state_free(&s);
  return rc;
}

// Candidates of the sample families that share a held-out or validation
// instance: what the leakage gate keeps out of training; and those whose
// gold actions lack relevant arguments (the sample's relevant_args gate).
static void count_leakage(Corpus *c, const KeySet *blocked) {
  for (int i = 0; i < c->count; i++) {
    const CorpusTask *t = &c->tasks[i];
    if (t->split == CORPUS_SPLIT_CORPUS && c->families[t->family].in_sample && !t->relevant_ok)
      reject(c, t->family, CORPUS_GATE_RELEVANT);
    if (t->split == CORPUS_SPLIT_CORPUS && c->families[t->family].in_sample &&
        keyset_has(blocked, instance_hash(t, c->families[t->family].name)))
      reject(c, t->family, CORPUS_GATE_LEAKAGE);
  }
}

// ---- checks ------------------------------------------------------------------------

static void check(Corpus *c, CorpusGate g, int failed, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void check(Corpus *c, CorpusGate g, int failed, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->gate_detail[g], sizeof c->gate_detail[g], fmt, ap);
  va_end(ap);
  c->gate_failed[g] = failed;
}

static int split_count(const Corpus *c, CorpusSplit s) {
  int n = 0;
  for (int i = 0; i < c->count; i++) n += c->tasks[i].split == s;
  return n;
}

// heldout_instances: held-out's; used: held-out's and validation's.
static void run_checks(Corpus *c, const KeySet *heldout_instances, const KeySet *used) {
  int train = split_count(c, CORPUS_SPLIT_TRAIN), heldout = split_count(c, CORPUS_SPLIT_HELDOUT);
  // order spread: the most common chain length of the sample.
  int lengths[TASK_MAX_ITEMS + 1] = {0}, top = 0;
  for (int i = 0; i < c->count; i++)
    if (c->tasks[i].split == CORPUS_SPLIT_TRAIN && c->tasks[i].task.num_gold <= TASK_MAX_ITEMS)
      lengths[c->tasks[i].task.num_gold]++;
  for (int n = 0; n <= TASK_MAX_ITEMS; n++)
    if (lengths[n] > lengths[top]) top = n;
  double top_share = train ? (double)lengths[top] / train : 0;
  check(c, CORPUS_GATE_ORDER_SPREAD, top_share > CORPUS_ORDER_MAX_SHARE, "most common chain length %d: %.1f%% of the sample",
        top, 100 * top_share);
  // family coverage.
  // (Checked when the split has room for 10 tasks per family; small test
  // corpora spread a kind's few tasks over fewer families.)
  int missing_train = 0, missing_heldout = 0, sample_families = 0, shallow_families = 0;
  // A sample family counts when some task of it passes the sample's
  // relevant_args gate (families whose every task fails it are that gate's).
  int sample_ok[CORPUS_MAX_FAMILIES] = {0};
  // A family whose every instance is held out or validates (one scenario,
  // worded many ways) cannot be in training too; it stays a held-out family.
  int trainable[CORPUS_MAX_FAMILIES] = {0};
  for (int i = 0; i < c->count; i++) {
    const CorpusTask *t = &c->tasks[i];
    sample_ok[t->family] |= t->relevant_ok;
    trainable[t->family] |= !keyset_has(used, instance_hash(t, c->families[t->family].name));
  }
  for (int f = 0; f < c->num_families; f++) {
    sample_families += c->families[f].in_sample && sample_ok[f];
    shallow_families += c->families[f].shallow && c->families[f].tasks > 0;
  }
  for (int f = 0; f < c->num_families; f++) {
    const CorpusFamily *fam = &c->families[f];
    if (fam->in_sample && sample_ok[f] && trainable[f] && fam->split_tasks[CORPUS_SPLIT_TRAIN] == 0 &&
        c->config.train >= 10 * sample_families)
      missing_train++;
    if (fam->shallow && fam->tasks > 0 && fam->split_tasks[CORPUS_SPLIT_HELDOUT] == 0 &&
        c->config.heldout >= 10 * shallow_families)
      missing_heldout++;
  }
  check(c, CORPUS_GATE_FAMILY_COVERAGE, missing_train + missing_heldout > 0,
        "%d sample families missing from train, %d shallow families missing from held-out%s", missing_train,
        missing_heldout,
        c->config.train < 10 * sample_families || c->config.heldout < 10 * shallow_families
            ? " (a split under 10 tasks per family is not checked)"
            : "");
  // use-case shares.
  double worst = 0;
  int uc[TASK_USE_COUNT] = {0};
  for (int i = 0; i < c->count; i++) uc[c->tasks[i].task.use_case]++;
  for (int u = 0; u < TASK_USE_COUNT; u++) {
    double d = fabs((c->count ? (double)uc[u] / c->count : 0) - c->config.use_case_share[u]);
    if (d > worst) worst = d;
  }
  check(c, CORPUS_GATE_USE_CASE_SHARES, worst > CORPUS_USE_CASE_TOLERANCE, "largest gap %.2f points", 100 * worst);
  // disjointness: one split per task by construction; instances recomputed.
  int shared = 0;
  for (int i = 0; i < c->count; i++)
    if ((c->tasks[i].split == CORPUS_SPLIT_TRAIN || c->tasks[i].split == CORPUS_SPLIT_VALIDATION) &&
        keyset_has(heldout_instances, instance_hash(&c->tasks[i], c->families[c->tasks[i].family].name)))
      shared++;
  check(c, CORPUS_GATE_DISJOINT, shared > 0, "%d training or validation tasks share a held-out instance", shared);
  // stratification: kind shares.
  int kt[TASK_KIND_COUNT] = {0}, kh[TASK_KIND_COUNT] = {0};
  for (int i = 0; i < c->count; i++) {
    if (c->tasks[i].split == CORPUS_SPLIT_TRAIN) kt[c->tasks[i].task.kind]++;
    if (c->tasks[i].split == CORPUS_SPLIT_HELDOUT) kh[c->tasks[i].task.kind]++;
  }
  double gap = 0;
  for (int k = 0; k < TASK_KIND_COUNT; k++) {
    double d = fabs((train ? (double)kt[k] / train : 0) - (heldout ? (double)kh[k] / heldout : 0));
    if (d > gap) gap = d;
  }
  check(c, CORPUS_GATE_STRATIFIED, gap > CORPUS_KIND_TOLERANCE || train < c->config.train, "largest kind gap %.2f points; %d of %d sample tasks",
        100 * gap, train, c->config.train);
}

// ---- build -------------------------------------------------------------------------

static void init_families(Corpus *c) {
  c->num_families = task_family_count() < CORPUS_MAX_FAMILIES ? task_family_count() : CORPUS_MAX_FAMILIES;
  for (int f = 0; f < c->num_families; f++) {
    const TaskFamily *family = task_family_at(f);
    CorpusFamily *fam = &c->families[f];
    snprintf(fam->name, sizeof fam->name, "%s", family->name);
    fam->use_case = family->use_case;
    fam->kind = family->kind;
    fam->shallow = family->slice == TASK_SLICE_SHALLOW;
    fam->in_sample = task_family_in_training_sample(family);
  }
}

static int draw_splits(Corpus *c, FimiError *err) {
  Order o = {0};
  KeySet heldout = {0}, used = {0};
  int rc = order_build(c, 0x68656c64ULL, &o, err);
  if (rc == 0) rc = draw_heldout_like(c, &o, CORPUS_SPLIT_HELDOUT, c->config.heldout, &used);
  if (rc == 0) rc = block_instances(c, CORPUS_SPLIT_HELDOUT, &heldout) | block_instances(c, CORPUS_SPLIT_HELDOUT, &used);
  if (rc == 0) rc = draw_heldout_like(c, &o, CORPUS_SPLIT_VALIDATION, c->config.validation, &used);
  if (rc == 0) rc = block_instances(c, CORPUS_SPLIT_VALIDATION, &used);
  if (rc == 0) {
    count_leakage(c, &used);
    rc = draw_train(c, &o, &used);
  }
  if (rc == 0) run_checks(c, &heldout, &used);
  else fimi_fail(err, "corpus: out of memory drawing the splits");
  keyset_free(&heldout);
  keyset_free(&used);
  order_free(&o);
  return rc;
}

int corpus_build(const CorpusConfig *config, Corpus *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  out->config = *config;
  init_families(out);
  Builder b = {.c = out};
  if (task_gen_context_init(&b.ctx, config->image_seed, err) != 0) return -1;
  out->image_bytes = b.ctx.image->size;
  out->image_customers = b.ctx.image->num_customers;
  int rc = env_world_create(&b.world, err);
  int targets[TASK_USE_COUNT];
  use_case_targets(config, targets);
  for (int u = 0; u < TASK_USE_COUNT && rc == 0; u++) rc = generate_use_case(&b, (TaskUseCase)u, targets[u], err);
  keyset_free(&b.seen);
  env_world_free(b.world);
  task_gen_context_free(&b.ctx);
  if (rc != 0) return -1;
  if (draw_splits(out, err) != 0) return -1;
  for (int g = 0; g < CORPUS_GATE_COUNT; g++)
    if (out->gate_failed[g])
      return fimi_fail(err, "corpus: gate %s failed: %s", corpus_gate_name((CorpusGate)g), out->gate_detail[g]);
  return 0;
}

void corpus_free(Corpus *c) {
  if (!c) return;
  for (int i = 0; i < c->count; i++) task_free(&c->tasks[i].task);
  free(c->tasks);
  memset(c, 0, sizeof *c);
}
