// env/bank/db.c: images and episode copies of the Navadhan Bank database
// (see env/bank/db.h). An image is built once per seed and serialized; an
// episode deserializes a private malloc'd copy into its own :memory:
// connection. Also the image seed's population part (bank_image_seed).
#include "env/bank/db.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/hash.h"
#include "env/bank/money.h"

#define SEED_POPULATION_SHIFT 32
#define SEED_RANDOM_MASK 0xffffffffULL

uint64_t bank_image_seed(uint64_t seed, int customers) {
  if (customers <= 0 || customers == BANK_DEFAULT_CUSTOMERS) return seed & SEED_RANDOM_MASK;
  return ((uint64_t)customers << SEED_POPULATION_SHIFT) | (seed & SEED_RANDOM_MASK);
}

int64_t bank_image_seed_customers(uint64_t image_seed) {
  uint64_t customers = image_seed >> SEED_POPULATION_SHIFT;
  return customers ? (int64_t)customers : BANK_DEFAULT_CUSTOMERS;
}

uint64_t bank_image_seed_random(uint64_t image_seed) {
  return image_seed >> SEED_POPULATION_SHIFT ? image_seed & SEED_RANDOM_MASK : image_seed;
}

// An in-memory connection for one thread at a time. NOMUTEX: an image build
// or an episode is never used by two threads at once (a pool hands a
// connection to one worker), so SQLite's per-call connection mutex is pure
// cost. Memory statistics off, once per process and before SQLite starts:
// they take a global mutex on every allocation; fimi never reads them.
static pthread_once_t sqlite_setup_once = PTHREAD_ONCE_INIT;
static void sqlite_setup(void) { sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }  // MISUSE if started: then kept on

static int open_memory(sqlite3 **db) {
  pthread_once(&sqlite_setup_once, sqlite_setup);
  return sqlite3_open_v2(":memory:", db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
}

static int sql_fail(sqlite3 *db, FimiError *err, const char *what) {
  return fimi_fail(err, "bank database: %s: %s", what, db ? sqlite3_errmsg(db) : "no connection");
}

int bank_image_build(uint64_t seed, BankImage *image, FimiError *err) {
  memset(image, 0, sizeof *image);
  int64_t customers = bank_image_seed_customers(seed);
  if (customers > BANK_MAX_CUSTOMERS)
    return fimi_fail(err, "bank database: image seed %llu asks for %lld customers; at most %d",
                     (unsigned long long)seed, (long long)customers, BANK_MAX_CUSTOMERS);
  sqlite3 *db = NULL;
  if (open_memory(&db) != SQLITE_OK) {
    sql_fail(db, err, "opening an in-memory database");
    sqlite3_close(db);
    return -1;
  }
  char *message = NULL;
  if (sqlite3_exec(db, bank_schema_sql, NULL, NULL, &message) != SQLITE_OK) {
    fimi_fail(err, "bank database: creating the schema: %s", message ? message : "?");
    sqlite3_free(message);
    sqlite3_close(db);
    return -1;
  }
  if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
      bank_seed_population(db, bank_image_seed_random(seed), (int)customers, err) != 0 ||
      (customers > BANK_DEFAULT_CUSTOMERS && sqlite3_exec(db, bank_schema_index_sql, NULL, NULL, NULL) != SQLITE_OK) ||
      sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
    if (!err || !err->failed) sql_fail(db, err, "seeding");
    sqlite3_close(db);
    return -1;
  }
  sqlite3_int64 size = 0;
  unsigned char *bytes = sqlite3_serialize(db, "main", &size, 0);
  sqlite3_close(db);
  if (!bytes || size <= 0) return fimi_fail(err, "bank database: serializing the image failed");
  image->bytes = bytes;
  image->size = size;
  image->seed = seed;
  image->num_customers = (int)customers;
  return 0;
}

void bank_image_free(BankImage *image) {
  if (!image) return;
  sqlite3_free(image->bytes);
  memset(image, 0, sizeof *image);
}

// The update hook: logs (table, rowid) of every written row. A table name
// is kept once per connection; past BANK_CHANGE_TABLES names or when the log
// cannot grow the episode is marked untracked (the check digests all).
static void log_change(void *arg, int op, const char *dbname, const char *table, sqlite3_int64 rowid) {
  (void)op;
  (void)dbname;
  BankEpisode *ep = arg;
  if (strcmp(table, "clock") == 0) ep->today[0] = '\0';
  if (ep->changes_untracked) return;
  int t = 0;
  while (t < ep->num_change_tables && strcmp(ep->change_tables[t], table) != 0) t++;
  if (t == ep->num_change_tables) {
    size_t len = strlen(table) + 1;
    char *name = t < BANK_CHANGE_TABLES ? malloc(len) : NULL;
    if (name) memcpy(name, table, len);
    if (!name) {
      ep->changes_untracked = 1;
      return;
    }
    ep->change_tables[ep->num_change_tables++] = name;
  }
  if (ep->num_changes == ep->cap_changes) {
    int cap = ep->cap_changes ? ep->cap_changes * 2 : 64;
    BankChange *grown = realloc(ep->changes, (size_t)cap * sizeof *grown);
    if (!grown) {
      ep->changes_untracked = 1;
      return;
    }
    ep->changes = grown;
    ep->cap_changes = cap;
  }
  ep->changes[ep->num_changes++] = (BankChange){t, (int64_t)rowid};
}

int bank_episode_open(const BankImage *image, const KnowledgeBase *kb, BankEpisode **out, FimiError *err) {
  *out = NULL;
  if (!image || !image->bytes || image->size <= 0) return fimi_fail(err, "bank episode: empty image");
  BankEpisode *ep = fimi_calloc(1, sizeof *ep, err);
  if (!ep) return -1;
  ep->kb = kb;
  if (open_memory(&ep->db) != SQLITE_OK) {
    sql_fail(ep->db, err, "opening an episode connection");
    bank_episode_close(ep);
    return -1;
  }
  // FREEONCLOSE hands the copy to SQLite, so it must come from sqlite3_malloc.
  unsigned char *copy = sqlite3_malloc64((sqlite3_uint64)image->size);
  if (!copy) {
    bank_episode_close(ep);
    return fimi_fail(err, "bank episode: out of memory copying %lld bytes", (long long)image->size);
  }
  memcpy(copy, image->bytes, (size_t)image->size);
  int rc = sqlite3_deserialize(ep->db, "main", copy, image->size, image->size,
                               SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE);
  if (rc != SQLITE_OK) {
    sql_fail(ep->db, err, "deserializing the image");
    bank_episode_close(ep);
    return -1;
  }
  sqlite3_update_hook(ep->db, log_change, ep);
  ep->cache_today = 1;
  *out = ep;
  return 0;
}

void bank_episode_close(BankEpisode *ep) {
  if (!ep) return;
  bank_stmt_cache_free(ep);
  sqlite3_close(ep->db);
  for (int i = 0; i < ep->num_calls; i++) {
    free(ep->calls[i].name);
    free(ep->calls[i].arguments);
  }
  free(ep->calls);
  free(ep->changes);
  for (int i = 0; i < ep->num_change_tables; i++) free(ep->change_tables[i]);
  free(ep);
}

// True when the SQL text holds "delete" in any case: SQLite may run a
// DELETE without WHERE as a truncate that skips the update hook.
static int mentions_delete(const char *sql) {
  for (const char *p = sql; *p; p++)
    if (strncasecmp(p, "delete", 6) == 0) return 1;
  return 0;
}

int bank_episode_exec(BankEpisode *ep, const char *sql, FimiError *err) {
  char *message = NULL;
  if (mentions_delete(sql)) ep->changes_untracked = 1;
  if (sqlite3_exec(ep->db, sql, NULL, NULL, &message) != SQLITE_OK) {
    fimi_fail(err, "bank episode: fixture SQL failed: %s", message ? message : "?");
    sqlite3_free(message);
    return -1;
  }
  return 0;
}

// Runs a one-text-parameter query (cached statement) and copies the first
// column of its first row into out. 1 when a row was found, 0 when none, -1
// on error.
static int query_text(BankEpisode *ep, const char *sql, const char *param, char *out, size_t out_size,
                      FimiError *err) {
  sqlite3_stmt *stmt = bank_stmt_get(ep, sql);
  if (!stmt) return sql_fail(ep->db, err, "preparing a query");
  if (param) sqlite3_bind_text(stmt, 1, param, -1, SQLITE_STATIC);
  int rc = sqlite3_step(stmt), found = 0;
  if (rc == SQLITE_ROW) {
    const unsigned char *text = sqlite3_column_text(stmt, 0);
    snprintf(out, out_size, "%s", text ? (const char *)text : "");
    found = 1;
  } else if (rc != SQLITE_DONE) {
    found = sql_fail(ep->db, err, "running a query");
  }
  bank_stmt_put(ep, stmt);
  return found;
}

int bank_episode_authenticate(BankEpisode *ep, const char *customer_id, FimiError *err) {
  char found_id[BANK_ID_MAX];
  int rc = query_text(ep, "SELECT customer_id FROM customers WHERE customer_id = ?", customer_id, found_id,
                      sizeof found_id, err);
  if (rc < 0) return -1;
  if (rc == 0) return fimi_fail(err, "bank episode: no customer %s", customer_id);
  snprintf(ep->customer_id, sizeof ep->customer_id, "%s", found_id);
  return 0;
}

int bank_episode_today(BankEpisode *ep, char out[11], FimiError *err) {
  if (ep->cache_today && ep->today[0]) {
    memcpy(out, ep->today, sizeof ep->today);
    return 0;
  }
  int rc = query_text(ep, "SELECT today FROM clock WHERE id = 1", NULL, out, 11, err);
  if (rc < 0) return -1;
  int64_t days;
  if (rc == 0 || bank_date_parse(out, &days) != 0) return fimi_fail(err, "bank episode: clock table has no valid date");
  memcpy(ep->today, out, sizeof ep->today);
  return 0;
}

int bank_episode_set_today(BankEpisode *ep, const char *date, FimiError *err) {
  int64_t days;
  if (bank_date_parse(date, &days) != 0) return fimi_fail(err, "bank episode: \"%s\" is not a YYYY-MM-DD date", date);
  char today[11];
  bank_date_format(days, today);
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(ep->db, "UPDATE clock SET today = ? WHERE id = 1", -1, &stmt, NULL) != SQLITE_OK)
    return sql_fail(ep->db, err, "preparing the clock update");
  sqlite3_bind_text(stmt, 1, today, -1, SQLITE_TRANSIENT);
  int rc = sqlite3_step(stmt);
  sqlite3_finalize(stmt);
  return rc == SQLITE_DONE ? 0 : sql_fail(ep->db, err, "updating the clock");
}

int bank_next_id(BankEpisode *ep, const char *counter, char *out, size_t out_size, FimiError *err) {
  const char *sql = "UPDATE counters SET next_value = next_value + 1 WHERE name = ? "
                    "RETURNING prefix, width, next_value - 1";
  sqlite3_stmt *stmt = bank_stmt_get(ep, sql);
  if (!stmt) return sql_fail(ep->db, err, "preparing the counter update");
  sqlite3_bind_text(stmt, 1, counter, -1, SQLITE_STATIC);
  int rc = sqlite3_step(stmt);
  if (rc != SQLITE_ROW) {
    bank_stmt_put(ep, stmt);
    return fimi_fail(err, "bank episode: no id counter \"%s\"", counter);
  }
  const char *prefix = (const char *)sqlite3_column_text(stmt, 0);
  int width = sqlite3_column_int(stmt, 1);
  long long value = sqlite3_column_int64(stmt, 2);
  int n = snprintf(out, out_size, "%s%0*lld", prefix ? prefix : "", width, value);
  // Step to the end so the RETURNING statement completes its write.
  while (rc == SQLITE_ROW) rc = sqlite3_step(stmt);
  bank_stmt_put(ep, stmt);
  if (rc != SQLITE_DONE) return sql_fail(ep->db, err, "updating a counter");
  if (n < 0 || (size_t)n >= out_size) return fimi_fail(err, "bank episode: id of counter %s too long", counter);
  return 0;
}

int bank_episode_serialize(BankEpisode *ep, unsigned char **bytes, int64_t *size, FimiError *err) {
  sqlite3_int64 n = 0;
  unsigned char *data = sqlite3_serialize(ep->db, "main", &n, 0);
  if (!data) return fimi_fail(err, "bank episode: serialize failed");
  *bytes = malloc((size_t)n);
  if (!*bytes) {
    sqlite3_free(data);
    return fimi_fail(err, "bank episode: out of memory");
  }
  memcpy(*bytes, data, (size_t)n);
  sqlite3_free(data);
  *size = n;
  return 0;
}

int bank_episode_digest(BankEpisode *ep, uint64_t *digest, FimiError *err) {
  static const char *tables[] = {"clock", "counters", "customers", "accounts", "transactions", "beneficiaries",
                                 "transfers", "disputes", "fixed_deposits", "recurring_deposits", "loans", "cards",
                                 "mandates", "cheque_books", "cheques", "service_requests", "insurance_policies",
                                 "insurance_claims", "scheme_enrolments", "tds_records", "tax_forms"};
  uint64_t h = HASH_FNV1A_SHORT_BASIS;
  for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++) {
    char sql[96];
    // Every table's primary key is its first column (or first two).
    snprintf(sql, sizeof sql, "SELECT * FROM %s ORDER BY 1, 2", tables[t]);
    sqlite3_stmt *stmt = bank_stmt_get(ep, sql);
    if (!stmt) return sql_fail(ep->db, err, sql);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      for (int i = 0, n = sqlite3_column_count(stmt); i < n; i++) {
        // Type tag + text form, so NULL, 0 and '' differ.
        unsigned char tag = (unsigned char)sqlite3_column_type(stmt, i);
        h = hash_fnv1a(h, &tag, 1);
        const char *text = (const char *)sqlite3_column_text(stmt, i);
        if (text) h = hash_fnv1a_text(h, text);
        h = hash_fnv1a(h, "\x1f", 1);
      }
      h = hash_fnv1a(h, "\x1e", 1);
    }
    bank_stmt_put(ep, stmt);
    if (rc != SQLITE_DONE) return sql_fail(ep->db, err, sql);
  }
  *digest = h;
  return 0;
}

int bank_episode_check_integrity(BankEpisode *ep, FimiError *err) {
  char result[256];
  int rc = query_text(ep, "PRAGMA integrity_check", NULL, result, sizeof result, err);
  if (rc < 0) return -1;
  if (rc == 0 || strcmp(result, "ok") != 0) return fimi_fail(err, "bank episode: integrity check: %s", result);
  return 0;
}

int bank_episode_customer_credentials(BankEpisode *ep, int n, char id[BANK_ID_MAX], char dob[11], char mobile[16],
                                      FimiError *err) {
  sqlite3_stmt *stmt = NULL;
  const char *sql = "SELECT customer_id, date_of_birth, mobile FROM customers ORDER BY customer_id LIMIT 1 OFFSET ?";
  if (sqlite3_prepare_v2(ep->db, sql, -1, &stmt, NULL) != SQLITE_OK) return sql_fail(ep->db, err, "preparing");
  sqlite3_bind_int(stmt, 1, n);
  int rc = sqlite3_step(stmt);
  if (rc == SQLITE_ROW) {
    snprintf(id, BANK_ID_MAX, "%s", (const char *)sqlite3_column_text(stmt, 0));
    snprintf(dob, 11, "%s", (const char *)sqlite3_column_text(stmt, 1));
    snprintf(mobile, 16, "%s", (const char *)sqlite3_column_text(stmt, 2));
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_ROW) return fimi_fail(err, "bank episode: no customer number %d", n);
  return 0;
}

static int bind_values(sqlite3_stmt *stmt, const char *types, va_list ap) {
  for (int i = 0; types[i]; i++) {
    int rc;
    if (types[i] == 's') {
      const char *text = va_arg(ap, const char *);
      rc = text ? sqlite3_bind_text(stmt, i + 1, text, -1, SQLITE_TRANSIENT) : sqlite3_bind_null(stmt, i + 1);
    } else if (types[i] == 'i') {
      rc = sqlite3_bind_int(stmt, i + 1, va_arg(ap, int));
    } else if (types[i] == 'l') {
      rc = sqlite3_bind_int64(stmt, i + 1, (sqlite3_int64)va_arg(ap, int64_t));
    } else {
      return SQLITE_MISUSE;
    }
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

// Binds `types` values, steps to completion and resets for the next run.
static int run_prepared(sqlite3 *db, sqlite3_stmt *stmt, FimiError *err, const char *sql, const char *types,
                        va_list ap) {
  int placeholders = sqlite3_bind_parameter_count(stmt);
  if (placeholders != (int)strlen(types))
    return fimi_fail(err, "bank database: %zu values for %d placeholders in: %s", strlen(types), placeholders, sql);
  int rc = bind_values(stmt, types, ap);
  if (rc == SQLITE_OK) {
    do rc = sqlite3_step(stmt);
    while (rc == SQLITE_ROW);
  }
  int failed = rc != SQLITE_DONE ? sql_fail(db, err, sql) : 0;
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  return failed;
}

int bank_sql_run_cached(BankSqlCache *cache, sqlite3 *db, FimiError *err, const char *sql, const char *types, ...) {
  sqlite3_stmt *stmt = NULL;
  for (int i = 0; i < cache->count && !stmt; i++)
    if (cache->sql[i] == sql) stmt = cache->stmt[i];
  if (!stmt) {
    if (cache->count == BANK_SQL_CACHE_MAX) return fimi_fail(err, "bank database: statement cache full");
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, NULL) != SQLITE_OK)
      return sql_fail(db, err, sql);
    cache->sql[cache->count] = sql;
    cache->stmt[cache->count++] = stmt;
  }
  va_list ap;
  va_start(ap, types);
  int rc = run_prepared(db, stmt, err, sql, types, ap);
  va_end(ap);
  return rc;
}

void bank_sql_cache_free(BankSqlCache *cache) {
  for (int i = 0; i < cache->count; i++) sqlite3_finalize(cache->stmt[i]);
  memset(cache, 0, sizeof *cache);
}

int bank_sql_run(sqlite3 *db, FimiError *err, const char *sql, const char *types, ...) {
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) return sql_fail(db, err, sql);
  va_list ap;
  va_start(ap, types);
  int rc = run_prepared(db, stmt, err, sql, types, ap);
  va_end(ap);
  sqlite3_finalize(stmt);
  return rc;
}
