// tests/test_env_corpus.c: the big bank (env/bank/db.h: the population in
// the image seed, the default image unchanged byte for byte, a 1,000-customer
// image deterministic, complete and indexed) and the task corpus
// (env/tasks/corpus.h) on a small build: deterministic files, splits
// disjoint by task and by instance (recomputed here from the files), the
// held-out set from the shallow slice only, no graded or communication
// family in the sample, the sample's kind mix against the held-out's, the
// use-case quotas, the oracle at 1.0 on every task of every split, the
// manifest's hashes and its reader's errors.
//
// FIMI_CORPUS_DIR=DIR also runs the oracle on every task of every split of a
// corpus built by `fimi env corpus build` (the full 48k run of docs/corpus.md).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/fileio.h"
#include "env/agents.h"
#include "env/episode.h"
#include "env/tasks/corpus.h"
#include "env/tasks/family.h"
#include "tests/test_util.h"

static uint64_t fnv(const unsigned char *p, int64_t n) {
  uint64_t h = 1469598103934665603ULL;
  for (int64_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

static int64_t sql_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *stmt = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW)
    v = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  return v;
}

static void test_default_image_unchanged(void) {
  // Size and FNV-1a 64 of the seed-1 and seed-42 images as built before the
  // population became part of the seed (tests/data, demo.sh and the GRPO
  // learning test depend on these bytes).
  static const struct {
    uint64_t seed;
    int64_t size;
    uint64_t hash;
  } known[] = {{1, 364544, 0xb70d691c0957be2bULL}, {42, 376832, 0x8f765030f974b4d1ULL}};
  FimiError err = {0};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    BankImage image;
    CHECK(bank_image_build(known[i].seed, &image, &err) == 0, "build %llu: %s", (unsigned long long)known[i].seed,
          err.message);
    CHECK(image.num_customers == 30 && image.size == known[i].size &&
              fnv(image.bytes, image.size) == known[i].hash,
          "seed %llu: %d customers, %lld bytes, hash %016llx", (unsigned long long)known[i].seed, image.num_customers,
          (long long)image.size, (unsigned long long)fnv(image.bytes, image.size));
    // Naming 30 customers explicitly is the same bank.
    BankImage same;
    uint64_t explicit30 = (30ULL << 32) | known[i].seed;
    CHECK(bank_image_build(explicit30, &same, &err) == 0 && same.size == image.size &&
              memcmp(same.bytes, image.bytes, (size_t)image.size) == 0,
          "image seed 30<<32|%llu equals seed %llu", (unsigned long long)known[i].seed,
          (unsigned long long)known[i].seed);
    bank_image_free(&same);
    bank_image_free(&image);
  }
  CHECK(bank_image_seed(7, 30) == 7 && bank_image_seed(7, 0) == 7, "default population keeps the seed");
  uint64_t s = bank_image_seed(7, 1000);
  CHECK(s == ((1000ULL << 32) | 7) && bank_image_seed_customers(s) == 1000 && bank_image_seed_random(s) == 7,
        "population in the seed: %llu", (unsigned long long)s);
  CHECK(bank_image_seed_customers(123456) == 30 && bank_image_seed_random(123456) == 123456, "small seeds: 30");
  BankImage too_big;
  CHECK(bank_image_build(bank_image_seed(1, BANK_MAX_CUSTOMERS + 1), &too_big, &err) != 0 &&
            strstr(err.message, "at most"),
        "over the limit refused: %s", err.message);
  fimi_error_clear(&err);
}

static void test_big_image(void) {
  FimiError err = {0};
  BankImage a, b;
  uint64_t seed = bank_image_seed(5, 1000);
  CHECK(bank_image_build(seed, &a, &err) == 0, "build: %s", err.message);
  CHECK(bank_image_build(seed, &b, &err) == 0, "build again: %s", err.message);
  CHECK(a.size == b.size && memcmp(a.bytes, b.bytes, (size_t)a.size) == 0, "same seed, same bytes");
  CHECK(a.num_customers == 1000 && a.seed == seed, "%d customers", a.num_customers);
  BankEpisode *ep = NULL;
  CHECK(bank_episode_open(&a, NULL, &ep, &err) == 0, "open: %s", err.message);
  sqlite3 *db = ep->db;
  CHECK(sql_int(db, "SELECT count(*) FROM customers") == 1000, "customers");
  CHECK(sql_int(db, "SELECT count(*) FROM customers c WHERE NOT EXISTS (SELECT 1 FROM accounts a WHERE"
                    " a.customer_id = c.customer_id AND a.account_type = 'savings')") == 0,
        "every customer has a savings account");
  // Varied holdings: every kind is held by some but not all customers.
  static const char *const tables[] = {"fixed_deposits", "recurring_deposits", "loans", "cards", "mandates",
                                       "insurance_policies", "scheme_enrolments", "beneficiaries", "tax_forms",
                                       "service_requests"};
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(DISTINCT customer_id) FROM %s", tables[t]);
    int64_t holders = sql_int(db, sql);
    CHECK(holders > 50 && holders <= 1000, "%s held by %lld customers", tables[t], (long long)holders);
  }
  CHECK(sql_int(db, "SELECT count(DISTINCT loan_type) FROM loans") == 3, "personal, home and gold loans");
  CHECK(sql_int(db, "SELECT count(*) FROM accounts WHERE account_id LIKE 'SB9%'") == 0,
        "no seeded account id meets the SB91 counter");
  CHECK(sql_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name LIKE '%_by_customer'") >= 14,
        "customer indexes");
  // Running balances hold in the big bank too.
  CHECK(sql_int(db, "SELECT count(*) FROM accounts a WHERE a.balance_paise <> (SELECT t.balance_after_paise FROM"
                    " transactions t WHERE t.account_id = a.account_id ORDER BY t.txn_date DESC, t.txn_id DESC"
                    " LIMIT 1)") == 0,
        "balances equal the last ledger entry");
  CHECK(bank_episode_check_integrity(ep, &err) == 0, "integrity: %s", err.message);
  bank_episode_close(ep);
  bank_image_free(&a);
  bank_image_free(&b);
}

// ---- the corpus -------------------------------------------------------------------

typedef struct Loaded {
  TaskList split[CORPUS_SPLIT_COUNT];
} Loaded;

static int load_dir(const char *dir, Loaded *l, FimiError *err) {
  memset(l, 0, sizeof *l);
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, corpus_split_file((CorpusSplit)s));
    if (task_list_load(path, &l->split[s], err) != 0) return -1;
  }
  return 0;
}

static void free_loaded(Loaded *l) {
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++) task_list_free(&l->split[s]);
}

// The customer, read here without the library's helper: the verify step's
// argument, or the authenticated customer.
static const char *customer_of(const Task *t) {
  if (t->authenticated) return t->authenticated;
  for (int i = 0; i < t->num_gold; i++)
    if (!strcmp(t->gold[i].name, "verify_customer"))
      return cJSON_GetObjectItem(t->gold[i].arguments, "customer_id")->valuestring;
  return NULL;
}

// Two customer-less tasks of one family asking the same gold actions (names
// and arguments), whatever their wording: one scenario.
static int same_scenario(const Task *a, const Task *b) {
  if (strcmp(a->family, b->family) || a->num_gold != b->num_gold) return 0;
  for (int i = 0; i < a->num_gold; i++)
    if (strcmp(a->gold[i].name, b->gold[i].name) || !cJSON_Compare(a->gold[i].arguments, b->gold[i].arguments, 1))
      return 0;
  return 1;
}

static void check_disjoint(const Loaded *l) {
  const TaskList *held = &l->split[CORPUS_SPLIT_HELDOUT], *val = &l->split[CORPUS_SPLIT_VALIDATION],
                 *train = &l->split[CORPUS_SPLIT_TRAIN];
  int same_id = 0, same_instance = 0;
  for (int i = 0; i < train->count; i++) {
    const Task *t = &train->tasks[i];
    const char *c = customer_of(t);
    for (int j = 0; j < held->count + val->count; j++) {
      const Task *h = j < held->count ? &held->tasks[j] : &val->tasks[j - held->count];
      same_id += !strcmp(t->id, h->id);
      const char *hc = customer_of(h);
      same_instance += c && hc && !strcmp(c, hc) && !strcmp(t->family, h->family);
      same_instance += !c && !hc && same_scenario(t, h);
    }
  }
  for (int i = 0; i < val->count; i++)
    for (int j = 0; j < held->count; j++) {
      const Task *v = &val->tasks[i], *h = &held->tasks[j];
      same_id += !strcmp(v->id, h->id);
      same_instance += !customer_of(v) && !customer_of(h) && same_scenario(v, h);
    }
  CHECK(same_id == 0, "%d tasks in two splits", same_id);
  CHECK(same_instance == 0,
        "%d training or validation tasks share a held-out (or validation) task's instance: family and customer, "
        "or family and gold chain when there is no customer",
        same_instance);
  // Every split task is a corpus task.
  int missing = 0;
  for (int s = 1; s < CORPUS_SPLIT_COUNT; s++)
    for (int i = 0; i < l->split[s].count; i++) missing += !task_list_find(&l->split[0], l->split[s].tasks[i].id);
  CHECK(missing == 0, "%d split tasks missing from corpus.jsonl", missing);
}

static int by_text(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// No two corpus tasks with the same content (the JSON line without the id).
static void check_distinct(const Loaded *l) {
  const TaskList *all = &l->split[CORPUS_SPLIT_CORPUS];
  char **lines = calloc((size_t)all->count + 1, sizeof *lines);
  FimiError err = {0};
  for (int i = 0; i < all->count; i++) {
    Task *t = &all->tasks[i];
    char *id = t->id;
    t->id = NULL;
    lines[i] = task_to_json_line(t, &err);
    t->id = id;
  }
  qsort(lines, (size_t)all->count, sizeof *lines, by_text);
  int same = 0;
  for (int i = 1; i < all->count; i++) same += lines[i] && lines[i - 1] && !strcmp(lines[i], lines[i - 1]);
  CHECK(same == 0, "%d corpus tasks repeat another's content", same);
  for (int i = 0; i < all->count; i++) free(lines[i]);
  free(lines);
}

static void check_families(const Loaded *l) {
  int bad_heldout = 0, bad_train = 0;
  for (int s = CORPUS_SPLIT_HELDOUT; s <= CORPUS_SPLIT_VALIDATION; s++)
    for (int i = 0; i < l->split[s].count; i++) {
      const TaskFamily *f = task_family_find(l->split[s].tasks[i].family);
      bad_heldout += !f || f->slice != TASK_SLICE_SHALLOW || l->split[s].tasks[i].num_gold > CORPUS_SHALLOW_CHAIN;
    }
  int no_relevant = 0;
  for (int i = 0; i < l->split[CORPUS_SPLIT_TRAIN].count; i++) {
    const Task *t = &l->split[CORPUS_SPLIT_TRAIN].tasks[i];
    const TaskFamily *f = task_family_find(t->family);
    bad_train += !f || !task_family_in_training_sample(f);
    for (int g = 0; g < t->num_gold; g++) {
      int args = 0;
      for (const cJSON *a = t->gold[g].arguments->child; a; a = a->next) args += strcmp(a->string, "customer_confirmed") != 0;
      no_relevant += args > 0 && t->gold[g].num_relevant == 0;
    }
  }
  CHECK(no_relevant == 0, "%d training gold actions without a relevant argument", no_relevant);
  CHECK(bad_heldout == 0, "%d held-out/validation tasks outside the shallow slice", bad_heldout);
  CHECK(bad_train == 0, "%d training tasks of graded or communication families", bad_train);
}

static void check_kind_mix(const Loaded *l) {
  const TaskList *held = &l->split[CORPUS_SPLIT_HELDOUT], *train = &l->split[CORPUS_SPLIT_TRAIN];
  for (int k = 0; k < TASK_KIND_COUNT; k++) {
    int h = 0, t = 0;
    for (int i = 0; i < held->count; i++) h += held->tasks[i].kind == (TaskKind)k;
    for (int i = 0; i < train->count; i++) t += train->tasks[i].kind == (TaskKind)k;
    double gap = fabs((double)h / held->count - (double)t / train->count);
    // Rounding of a small sample: one task of either split.
    CHECK(gap <= CORPUS_KIND_TOLERANCE + 1.0 / train->count, "kind %s: held-out %d/%d, train %d/%d",
          task_kind_name((TaskKind)k), h, held->count, t, train->count);
  }
}

// Oracle at 1.0 (total and strict) with the expected end on every task;
// returns the number of tasks run.
static int check_oracle(const Loaded *l) {
  FimiError err = {0};
  EnvWorld *world = NULL;
  CHECK(env_world_create(&world, &err) == 0, "world: %s", err.message);
  int run = 0, bad = 0;
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++)
    for (int i = 0; i < l->split[s].count; i++) {
      RewardBreakdown r;
      const Task *t = &l->split[s].tasks[i];
      int rc = agent_run_episode(world, t, (uint64_t)i, AGENT_ORACLE, &r, &err);
      run++;
      if (rc != 0 || r.total != 1.0 || r.strict_total != 1.0 || r.end != t->expected_end) {
        if (bad++ < 5)
          fprintf(stderr, "oracle on %s/%s: %s total %.3f\n", corpus_split_name((CorpusSplit)s), t->id,
                  rc ? err.message : "", rc ? 0 : r.total);
        fimi_error_clear(&err);
      }
    }
  CHECK(bad == 0, "oracle below 1.0 on %d of %d tasks", bad, run);
  env_world_free(world);
  return run;
}

static void small_config(CorpusConfig *c) {
  corpus_config_default(c);
  c->image_seed = bank_image_seed(3, 250);
  c->seed = 3;
  c->total = 320;
  c->heldout = 30;
  c->validation = 6;
  c->train = 100;
}

static char *read_text(const char *dir, const char *name, size_t *size) {
  char path[1024];
  FimiError err = {0};
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return file_read_all(path, (size_t)1 << 30, size, &err);
}

static void test_manifest_errors(const char *dir) {
  size_t n = 0;
  char *text = read_text(dir, "manifest.json", &n);
  CHECK(text != NULL, "manifest readable");
  if (!text) return;
  CorpusManifest *m = calloc(1, sizeof *m);
  FimiError err = {0};
  CHECK(corpus_manifest_parse(text, n, "manifest.json", m, &err) == 0, "parse: %s", err.message);
  CHECK(m->num_families == task_family_count() && m->customers == 250, "%d families, %d customers", m->num_families,
        m->customers);
  static const struct {
    const char *from, *to, *expect;
  } cases[] = {
      {"\"fimi-task-corpus-1\"", "\"fimi-task-corpus-9\"", "format"},
      {"\"customers\":", "\"customer\":", "customers"},
      {"\"tasks\":", "\"tasks\": \"x\", \"t\":", "tasks"},
      {"\"fnv1a64\":\t\"", "\"fnv1a64\":\t\"zz", "fnv1a64"},
      {"\"use_case\":\t\"", "\"use_case\":\t\"x", "use_case"},
      {"\"name\":\t\"replay\"", "\"name\":\t\"replays\"", "gates[0]"},
      {"\"exhausted\":", "\"rejected\": {\"nope\": 1}, \"exhausted\":", "unknown gate"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *at = strstr(text, cases[i].from);
    CHECK(at != NULL, "case %zu: '%s' in the manifest", i, cases[i].from);
    if (!at) continue;
    size_t head = (size_t)(at - text), from = strlen(cases[i].from), to = strlen(cases[i].to);
    char *bad = malloc(n + to + 1);
    memcpy(bad, text, head);
    memcpy(bad + head, cases[i].to, to);
    memcpy(bad + head + to, at + from, n - head - from);
    fimi_error_clear(&err);
    int rc = corpus_manifest_parse(bad, n - from + to, "manifest.json", m, &err);
    CHECK(rc != 0 && strstr(err.message, "manifest.json") && strstr(err.message, cases[i].expect),
          "case %zu refused naming '%s': %s", i, cases[i].expect, err.message);
    free(bad);
  }
  // Truncated text never parses.
  fimi_error_clear(&err);
  CHECK(corpus_manifest_parse(text, n / 2, "manifest.json", m, &err) != 0, "truncated manifest refused");
  free(text);
  free(m);
}

static void test_tampered(const char *dir) {
  FimiError err = {0};
  CorpusManifest *m = calloc(1, sizeof *m);
  CHECK(corpus_manifest_load(dir, m, &err) == 0, "load: %s", err.message);
  char path[1024];
  snprintf(path, sizeof path, "%s/train.jsonl", dir);
  FILE *f = fopen(path, "a");
  CHECK(f != NULL, "append to train.jsonl");
  if (f) {
    fputs("\n", f);
    fclose(f);
  }
  fimi_error_clear(&err);
  CHECK(corpus_manifest_load(dir, m, &err) != 0 && strstr(err.message, "train.jsonl") &&
            strstr(err.message, "changed"),
        "a changed split file is named: %s", err.message);
  free(m);
}

static void test_corpus(void) {
  char dir_a[] = "/tmp/fimi_corpus_a_XXXXXX", dir_b[] = "/tmp/fimi_corpus_b_XXXXXX";
  CHECK(mkdtemp(dir_a) && mkdtemp(dir_b), "temp dirs");
  CorpusConfig config;
  small_config(&config);
  Corpus a, b;
  FimiError err = {0};
  CHECK(corpus_build(&config, &a, &err) == 0, "build: %s", err.message);
  CHECK(a.count == config.total, "%d tasks of %d", a.count, config.total);
  // Use-case quotas (largest remainder of the paper's shares).
  int uc[TASK_USE_COUNT] = {0};
  for (int i = 0; i < a.count; i++) uc[a.tasks[i].task.use_case]++;
  for (int u = 0; u < TASK_USE_COUNT; u++)
    CHECK(fabs(uc[u] - config.use_case_share[u] * config.total) < 1.0, "%s: %d tasks",
          task_use_case_name((TaskUseCase)u), uc[u]);
  int split_n[CORPUS_SPLIT_COUNT] = {0};
  for (int i = 0; i < a.count; i++) split_n[a.tasks[i].split]++;
  CHECK(split_n[CORPUS_SPLIT_HELDOUT] == config.heldout && split_n[CORPUS_SPLIT_VALIDATION] == config.validation &&
            split_n[CORPUS_SPLIT_TRAIN] == config.train,
        "splits %d/%d/%d", split_n[1], split_n[2], split_n[3]);
  for (int g = 0; g < CORPUS_GATE_COUNT; g++)
    CHECK(!a.gate_failed[g], "gate %s: %s", corpus_gate_name((CorpusGate)g), a.gate_detail[g]);
  CHECK(corpus_write(&a, dir_a, &err) == 0, "write: %s", err.message);
  // Same config, same bytes.
  CHECK(corpus_build(&config, &b, &err) == 0 && corpus_write(&b, dir_b, &err) == 0, "again: %s", err.message);
  for (int s = 0; s < CORPUS_SPLIT_COUNT + 1; s++) {
    const char *name = s < CORPUS_SPLIT_COUNT ? corpus_split_file((CorpusSplit)s) : "manifest.json";
    size_t na = 0, nb = 0;
    char *ta = read_text(dir_a, name, &na), *tb = read_text(dir_b, name, &nb);
    CHECK(ta && tb && na == nb && memcmp(ta, tb, na) == 0, "%s identical across builds", name);
    free(ta);
    free(tb);
  }
  corpus_free(&a);
  corpus_free(&b);
  Loaded l;
  CHECK(load_dir(dir_a, &l, &err) == 0, "load: %s", err.message);
  check_disjoint(&l);
  check_distinct(&l);
  check_families(&l);
  check_kind_mix(&l);
  int run = check_oracle(&l);
  CHECK(run == config.total + config.heldout + config.validation + config.train, "%d oracle episodes", run);
  free_loaded(&l);
  test_manifest_errors(dir_a);
  test_tampered(dir_a);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s %s", dir_a, dir_b);
  CHECK(system(cmd) == 0, "clean up");
}

// The full corpus, when one is given: the oracle on every task of every split.
static void test_given_corpus(const char *dir) {
  FimiError err = {0};
  CorpusManifest *m = calloc(1, sizeof *m);
  CHECK(corpus_manifest_load(dir, m, &err) == 0, "manifest of %s: %s", dir, err.message);
  free(m);
  Loaded l;
  CHECK(load_dir(dir, &l, &err) == 0, "load %s: %s", dir, err.message);
  check_disjoint(&l);
  check_distinct(&l);
  check_families(&l);
  int run = check_oracle(&l);
  printf("oracle on every task of every split of %s: %d episodes\n", dir, run);
  free_loaded(&l);
}

int main(void) {
  test_default_image_unchanged();
  test_big_image();
  test_corpus();
  const char *dir = getenv("FIMI_CORPUS_DIR");
  if (dir && *dir) test_given_corpus(dir);
  TEST_MAIN_END();
}
