// env/tasks/registry.c: the registry of task families (the FAM_FAMILIES list
// of env/tasks/family_helpers.h, in its order), the generation context and
// the helpers generators use (declared in env/tasks/family.h).
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env/bank/tools.h"
#include "env/episode.h"
#include "env/knowledge.h"
#include "env/tasks/family.h"
#include "env/tasks/family_helpers.h"

#define FAM_ENTRY(name) &name,
static const TaskFamily *const families[] = {FAM_FAMILIES(FAM_ENTRY)};
#undef FAM_ENTRY

int task_family_count(void) { return (int)(sizeof families / sizeof families[0]); }

const TaskFamily *task_family_at(int index) {
  if (index < 0 || index >= task_family_count()) return NULL;
  return families[index];
}

const TaskFamily *task_family_find(const char *name) {
  for (int i = 0; name && i < task_family_count(); i++)
    if (strcmp(task_family_at(i)->name, name) == 0) return task_family_at(i);
  return NULL;
}

// The family's product prefixes (its `variants` list), without channels.
static int product_count(const TaskFamily *f) {
  if (!f->variants || !*f->variants) return 0;
  int n = 1;
  for (const char *p = f->variants; *p; p++) n += *p == ',';
  return n;
}

int task_family_variant_count(const TaskFamily *f) {
  return product_count(f) * (f->flags & TASK_FAMILY_CHANNELS ? 2 : 1);
}

// Variants 0..n-1 are the products as the family lists them (the call
// channel); with TASK_FAMILY_CHANNELS, n..2n-1 are their app-channel twins.
int task_family_variant(const TaskFamily *f, int index, char *out, size_t size) {
  int products = product_count(f);
  if (index < 0 || index >= task_family_variant_count(f)) return -1;
  const char *p = f->variants;
  for (int i = 0; i < index % products; i++) p = strchr(p, ',') + 1;
  size_t len = strcspn(p, ",");
  int n = snprintf(out, size, "%s%.*s/%s", index >= products ? TASK_APP_PREFIX : "", (int)len, p, f->name);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

int task_family_in_training_sample(const TaskFamily *f) {
  return !(f->flags & (TASK_FAMILY_GRADED | TASK_FAMILY_COMMUNICATION));
}

// ---- context ---------------------------------------------------------------

typedef struct GenOwned {
  BankImage image;
  BankEpisode *view;
} GenOwned;

int task_gen_context_init(TaskGenContext *ctx, uint64_t image_seed, FimiError *err) {
  memset(ctx, 0, sizeof *ctx);
  GenOwned *own = fimi_calloc(1, sizeof *own, err);
  if (!own) return -1;
  ctx->image_seed = image_seed;
  ctx->kb = kb_builtin(err);
  if (!ctx->kb || bank_image_build(image_seed, &own->image, err) != 0) {
    free(own);
    return -1;
  }
  ctx->image = &own->image;
  if (bank_episode_open(&own->image, ctx->kb, &own->view, err) != 0 ||
      bank_pool_create(&own->image, ctx->kb, &ctx->pool, err) != 0) {
    ctx->db = NULL;
    bank_episode_close(own->view);
    bank_image_free(&own->image);
    free(own);
    memset(ctx, 0, sizeof *ctx);
    return -1;
  }
  ctx->db = own->view->db;
  // Generators only read: make an accidental write fail loudly.
  sqlite3_exec(ctx->db, "PRAGMA query_only = 1", NULL, NULL, NULL);
  return 0;
}

void task_gen_context_free(TaskGenContext *ctx) {
  if (!ctx || !ctx->image) return;
  GenOwned *own = (GenOwned *)((char *)ctx->image - offsetof(GenOwned, image));
  bank_pool_free(ctx->pool);
  bank_episode_close(own->view);
  bank_image_free(&own->image);
  free(own);
  memset(ctx, 0, sizeof *ctx);
}

// ---- helpers ---------------------------------------------------------------

int64_t task_gen_range(Rng *rng, int64_t lo, int64_t hi) {
  if (hi <= lo) return lo;
  uint64_t span = (uint64_t)(hi - lo) + 1;
  return lo + (int64_t)(rng_next_u64(rng) % span);
}

static int select_rows(const TaskGenContext *ctx, Rng *rng, const char *sql, const char *const *binds, int ncols,
                       char cols[][TASK_GEN_COL_MAX], FimiError *err) {
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(ctx->db, sql, -1, &stmt, NULL) != SQLITE_OK)
    return fimi_fail(err, "task generator SQL does not prepare (%s): %s", sqlite3_errmsg(ctx->db), sql);
  for (int i = 0; binds && binds[i]; i++) sqlite3_bind_text(stmt, i + 1, binds[i], -1, SQLITE_TRANSIENT);
  if (sqlite3_column_count(stmt) < ncols) {
    sqlite3_finalize(stmt);
    return fimi_fail(err, "task generator SQL returns fewer than %d columns: %s", ncols, sql);
  }
  uint64_t seen = 0;
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    seen++;
    // Reservoir sampling keeps row k with probability 1/k; no rng: first row.
    int take = rng ? rng_next_u64(rng) % seen == 0 : seen == 1;
    if (take)
      for (int c = 0; c < ncols; c++) {
        const unsigned char *text = sqlite3_column_text(stmt, c);
        snprintf(cols[c], TASK_GEN_COL_MAX, "%s", text ? (const char *)text : "");
      }
    if (!rng) break;
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fimi_fail(err, "task generator SQL failed: %s", sql);
  if (seen == 0) return fimi_fail(err, "task generator found no row for: %s", sql);
  return 0;
}

int task_gen_pick(const TaskGenContext *ctx, Rng *rng, const char *sql, const char *const *binds, int ncols,
                  char cols[][TASK_GEN_COL_MAX], FimiError *err) {
  return select_rows(ctx, rng, sql, binds, ncols, cols, err);
}

int task_gen_first(const TaskGenContext *ctx, const char *sql, const char *const *binds, int ncols,
                   char cols[][TASK_GEN_COL_MAX], FimiError *err) {
  return select_rows(ctx, NULL, sql, binds, ncols, cols, err);
}

int task_gen_replay(const TaskGenContext *ctx, const Task *task, cJSON **results, FimiError *err) {
  *results = NULL;
  BankEpisode *bank = NULL;
  if (bank_pool_acquire(ctx->pool, &bank, err) != 0) return -1;
  cJSON *arr = cJSON_CreateArray();
  int rc = arr ? 0 : fimi_fail(err, "out of memory");
  if (rc == 0) rc = env_apply_initial(bank, task, err);
  if (rc == 0) rc = env_run_gold(bank, task, task->num_gold, arr, err);
  bank_pool_release(bank);
  if (rc != 0) {
    cJSON_Delete(arr);
    return -1;
  }
  *results = arr;
  return 0;
}

int task_gen_add_verify(const TaskGenContext *ctx, Task *task, const char *customer_id, FimiError *err) {
  char row[2][TASK_GEN_COL_MAX];
  const char *binds[] = {customer_id, NULL};
  if (task_gen_first(ctx, "SELECT date_of_birth, mobile FROM customers WHERE customer_id = ?", binds, 2, row, err) != 0)
    return -1;
  if (task_add_field(task, "customer_id", customer_id, err) || task_add_field(task, "date_of_birth", row[0], err) ||
      task_add_field(task, "registered_mobile", row[1], err))
    return -1;
  cJSON *args = cJSON_CreateObject();
  cJSON_AddStringToObject(args, "customer_id", customer_id);
  cJSON_AddStringToObject(args, "date_of_birth", row[0]);
  cJSON_AddStringToObject(args, "registered_mobile", row[1]);
  return task_add_gold_json(task, "verify_customer", args, "customer_id", 0, err);
}

// Moves a call-channel task to the logged-in app: the customer of the
// verify_customer step becomes initial.authenticated, the step goes (later
// steps' value references shift down), and the variant gains the app
// prefix. The customer keeps their fields (they may still be asked).
static int move_to_app(Task *t, FimiError *err) {
  const TaskAction *v = t->num_gold ? &t->gold[0] : NULL;
  const cJSON *id = v ? cJSON_GetObjectItemCaseSensitive(v->arguments, "customer_id") : NULL;
  if (!v || strcmp(v->name, "verify_customer") != 0 || !cJSON_IsString(id) || !t->variant)
    return fimi_fail(err, "app channel: the gold chain must start with verify_customer and the task name a variant");
  for (int i = 0; i < t->num_assertions; i++)
    for (int k = 0; k < t->assertions[i].num_args; k++)
      if (strcmp(t->assertions[i].args[k], "verify_customer") == 0)
        return fimi_fail(err, "app channel: assertion %d names verify_customer", i);
  char *variant = NULL;
  if (task_set(&t->authenticated, err, "%s", id->valuestring) != 0 || task_remove_gold(t, 0, err) != 0 ||
      task_set(&variant, err, "%s%s", TASK_APP_PREFIX, t->variant) != 0)
    return fimi_fail_wrap(err, "app channel");
  free(t->variant);
  t->variant = variant;
  return 0;
}

// A family that lists one product records it for the generator; a family
// with several records the one it picked (fam_variant).
static int single_product(const TaskFamily *family, Task *t, FimiError *err) {
  if (t->variant || product_count(family) != 1) return 0;
  return fam_variant(t, err, family->variants);
}

// The seed's channel: the app for about half the seeds of a channel family.
static int app_channel(const TaskFamily *family, uint64_t seed) {
  if (!(family->flags & TASK_FAMILY_CHANNELS)) return 0;
  Rng rng;
  fam_rng(&rng, family->name, seed ^ 0x6368616e6e656cULL);  // "channel": a stream apart from the family's
  return rng_next_u64(&rng) >> 63;
}

int task_generate(const TaskGenContext *ctx, const TaskFamily *family, uint64_t seed, Task *out, FimiError *err) {
  task_init(out);
  out->kind = family->kind;
  out->use_case = family->use_case;
  out->image_seed = ctx->image_seed;
  if (task_set(&out->family, err, "%s", family->name) != 0) return -1;
  if (family->generate(ctx, seed, out, err) != 0 || single_product(family, out, err) != 0 ||
      (app_channel(family, seed) && move_to_app(out, err) != 0)) {
    fimi_fail_wrap(err, "family %s, seed %llu", family->name, (unsigned long long)seed);
    task_free(out);
    return -1;
  }
  if (!out->id && task_set(&out->id, err, "%s-%llu", family->name, (unsigned long long)seed) != 0) {
    task_free(out);
    return -1;
  }
  cJSON *results = NULL;
  if (task_validate(out, err) != 0 || task_gen_replay(ctx, out, &results, err) != 0) {
    fimi_fail_wrap(err, "task %s", out->id);
    task_free(out);
    return -1;
  }
  // Every referenced value must resolve now, not in the middle of an episode.
  for (int i = 0; i < out->num_communicate + out->num_confirms; i++) {
    const TaskValueRef *ref = i < out->num_communicate ? &out->communicate[i] : &out->confirms[i - out->num_communicate];
    if (ref->step < 0) continue;
    char *v = env_resolve_value(results, ref, err);
    if (!v) {
      fimi_fail_wrap(err, "task %s", out->id);
      cJSON_Delete(results);
      task_free(out);
      return -1;
    }
    free(v);
  }
  cJSON_Delete(results);
  return 0;
}
