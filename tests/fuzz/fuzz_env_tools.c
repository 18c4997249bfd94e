// tests/fuzz/fuzz_env_tools.c: libFuzzer target for the tools of Navadhan Bank
// (env/bank/tools.h), a fictional bank. One input is one episode: a header
// (fresh or pooled copy, logged in or not, confirmation mode, clock) and a
// sequence of tool calls decoded from the bytes. Calls are built from the
// catalog's JSON schemas with values drawn from the input: right and wrong
// types, huge strings, random and invalid UTF-8, extreme and overflowing
// amounts, ids of the customer's own objects and of other customers', missing
// and extra keys; or they come from raw model text through toolcall_parse,
// as the environment runs them. abort() (a libFuzzer crash) when:
// - a result is malformed (not "Error: ..." / not a JSON object, call log
//   out of step, not valid UTF-8 whatever the input);
// - any write touches a row of another customer or of the bank's terms, even
//   one later rolled back (SQLite's pre-update hook sees every row change);
// - a failed call leaves a changed row, or a read-only tool writes;
// - a charge or premium is debited without customer_confirmed=true (and, in
//   conversation mode, without the recorded consent, which it must consume);
// - a result names another customer's id (accounts, cards, loans, deposits,
//   transactions, ...) outside free text the caller wrote itself;
// - after the episode: PRAGMA integrity_check of each changed table is not
//   "ok", a balance is negative or disagrees with the account's last ledger
//   entry; and on one input in 64 (chosen by a hash of the input, so crashes
//   replay) the whole-database integrity_check fails or the order-free digest
//   of every other customer's rows (and of the bank's terms) differs from the
//   image: a check that does not depend on the hook.
// FUZZ_ENV_TRACE=1 prints every call and result (to read a crash's episode).
// Needs an SQLite built with SQLITE_ENABLE_PREUPDATE_HOOK (Debian's is).
// Run it as docs/bank-database.md ("Fuzzing the tools") shows.
#define _POSIX_C_SOURCE 200809L  // strdup
#define SQLITE_ENABLE_PREUPDATE_HOOK
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "data/toolcall.h"
#include "env/bank/db.h"
#include "env/bank/tools.h"
#include "env/knowledge.h"

// The checkers' inner loops carry no coverage or ASan instrumentation: they
// are not under test, and instrumented they would cost most of the time.
#define CHECKER __attribute__((no_sanitize("coverage", "address")))

#define MAX_CALLS 24
#define MAX_PARAMS 12
#define MAX_ENUMS 10
#define MAX_TABLES 40
#define MAX_NEW_IDS 32
#define NO_OWNER (-1)
#define UNKNOWN_OWNER (-2)

// Prints the detail with bytes outside printable ASCII as \xNN.
static void fail(const char *what, const char *detail) {
  fprintf(stderr, "fuzz_env_tools: invariant failed: %s\n  ", what);
  for (const unsigned char *p = (const unsigned char *)(detail ? detail : ""); *p; p++)
    fprintf(stderr, *p >= 0x20 && *p < 0x7F ? "%c" : "\\x%02X", *p);
  fprintf(stderr, "\n");
  abort();
}
static void check(int cond, const char *what, const char *detail) {
  if (!cond) fail(what, detail);
}

CHECKER static uint64_t fnv(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}
#define FNV_START 1469598103934665603ULL

// ---- the input ----------------------------------------------------------------

typedef struct Input {
  const uint8_t *data;
  size_t size, pos;
} Input;

static unsigned byte_of(Input *in) { return in->pos < in->size ? in->data[in->pos++] : 0; }
static unsigned u16_of(Input *in) { return byte_of(in) | byte_of(in) << 8; }
static int bytes_left(const Input *in) { return in->pos < in->size; }
// Up to n bytes as a NUL-terminated string (stops at a NUL byte).
static char *text_of(Input *in, size_t n) {
  size_t avail = in->size - in->pos, take = n < avail ? n : avail;
  char *s = malloc(take + 1);
  if (!s) fail("malloc", NULL);
  memcpy(s, in->data + in->pos, take);
  s[take] = '\0';
  in->pos += take;
  return s;
}

// ---- ids of the image, and who owns them ------------------------------------------

typedef enum {
  ID_CUSTOMER, ID_ACCOUNT, ID_TXN, ID_BENEFICIARY, ID_FD, ID_RD, ID_LOAN, ID_CARD, ID_MANDATE, ID_POLICY,
  ID_REQUEST, ID_DISPUTE, ID_CLAIM, ID_ENROLMENT, ID_FORM, ID_KINDS, ID_NONE = ID_KINDS
} IdKind;

static const char *ID_SQL[ID_KINDS] = {
    "SELECT customer_id, customer_id FROM customers",
    "SELECT account_id, customer_id FROM accounts",
    "SELECT t.txn_id, a.customer_id FROM transactions t JOIN accounts a USING (account_id)",
    "SELECT beneficiary_id, customer_id FROM beneficiaries",
    "SELECT fd_id, customer_id FROM fixed_deposits",
    "SELECT rd_id, customer_id FROM recurring_deposits",
    "SELECT loan_id, customer_id FROM loans",
    "SELECT card_id, customer_id FROM cards",
    "SELECT mandate_id, customer_id FROM mandates",
    "SELECT policy_id, customer_id FROM insurance_policies",
    "SELECT request_id, customer_id FROM service_requests UNION ALL SELECT request_id, customer_id FROM cheque_books",
    "SELECT dispute_id, customer_id FROM disputes",
    "SELECT claim_id, customer_id FROM insurance_claims",
    "SELECT enrolment_id, customer_id FROM scheme_enrolments",
    "SELECT form_id, customer_id FROM tax_forms"};

typedef struct OwnedId {
  char id[BANK_ID_MAX];
  int len, owner;  // owner: index into customers[]
  IdKind kind;
} OwnedId;

typedef struct Customer {
  char id[BANK_ID_MAX], dob[11], mobile[16], aadhaar[8];
} Customer;

typedef struct ChequeRange {
  char account[BANK_ID_MAX];
  int64_t first;
  int count, owner;
} ChequeRange;

// A parameter of a tool, read from env_tool_schema.
typedef enum { P_STRING, P_DATE, P_INTEGER, P_NUMBER, P_BOOLEAN, P_ARRAY } ParamKind;
typedef struct Param {
  char name[40];
  ParamKind kind;
  IdKind id_kind;
  int required, num_enums, has_range, max_len;
  char enums[MAX_ENUMS][32];
  double min, max;
} Param;
typedef struct Tool {
  const char *name;
  int writes, charged, num_params;
  Param params[MAX_PARAMS];
} Tool;

// How the pre-update hook judges a table's rows.
typedef enum { T_CUSTOMER_COLUMN, T_ACCOUNT_COLUMN, T_COUNTERS, T_BANK } TableClass;
typedef struct Table {
  char name[40];
  TableClass cls;
  int owner_column;    // customer_id or account_id column
  int channel_column;  // transactions.channel, else -1
  char *row_sql;       // SELECT * FROM name WHERE rowid = ?
  char *digest_sql;    // SELECT <owner customer id>, * FROM name ...
  char *check_sql;     // PRAGMA integrity_check(name): this table and its indices
} Table;

static struct {
  BankImage image;
  KnowledgeBase *kb;
  BankPool *pool;
  Customer customers[64];
  int num_customers;
  OwnedId *ids;
  int num_ids;
  int *by_kind[ID_KINDS], kind_count[ID_KINDS];  // indices into ids
  int *slots;                                    // open-addressing set over ids
  int num_slots, id_lengths[8], num_id_lengths;
  unsigned char id_starts[26][26];  // first two letters of some id
  ChequeRange *cheques;
  int num_cheques;
  Tool *tools;
  int num_tools;
  Table tables[MAX_TABLES];
  int num_tables;
  uint64_t *baseline;  // per-customer digest of the image; [num_customers] = bank terms
  int trace;           // FUZZ_ENV_TRACE=1: print every call and result (to replay a crash)
} G;

static uint64_t hash_text(const char *s, size_t n) { return fnv(FNV_START, s, n); }

CHECKER static const OwnedId *find_id(const char *s, size_t n) {
  uint64_t h = hash_text(s, n);
  for (int probe = 0; probe < G.num_slots; probe++) {
    int slot = G.slots[(h + (uint64_t)probe) % (uint64_t)G.num_slots];
    if (slot < 0) return NULL;
    const OwnedId *id = &G.ids[slot];
    if ((size_t)id->len == n && memcmp(id->id, s, n) == 0) return id;
  }
  return NULL;
}

static int customer_index(const char *id) {
  const OwnedId *o = id ? find_id(id, strlen(id)) : NULL;
  return o && o->kind == ID_CUSTOMER ? o->owner : NO_OWNER;
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
  sqlite3_stmt *stmt = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) fail("prepare", sql);
  return stmt;
}

static void load_customers(BankEpisode *ep) {
  FimiError err = {0};
  for (int n = 0; n < 64; n++) {
    Customer *c = &G.customers[n];
    if (bank_episode_customer_credentials(ep, n, c->id, c->dob, c->mobile, &err) != 0) break;
    G.num_customers = n + 1;
  }
  check(G.num_customers > 2, "the image has customers", err.message);
  sqlite3_stmt *stmt = prepare(ep->db, "SELECT aadhaar_last4 FROM customers ORDER BY customer_id");
  for (int n = 0; n < G.num_customers && sqlite3_step(stmt) == SQLITE_ROW; n++)
    snprintf(G.customers[n].aadhaar, sizeof G.customers[n].aadhaar, "%s", sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
}

static void add_id(const char *id, const char *owner_id, IdKind kind) {
  int owner = -1;
  for (int c = 0; c < G.num_customers; c++)
    if (strcmp(G.customers[c].id, owner_id) == 0) owner = c;
  check(owner >= 0 && strlen(id) < BANK_ID_MAX, "an image id with a known owner", id);
  OwnedId *o = &G.ids[G.num_ids++];
  snprintf(o->id, sizeof o->id, "%s", id);
  o->len = (int)strlen(id);
  o->owner = owner;
  o->kind = kind;
  check(id[0] >= 'A' && id[0] <= 'Z' && id[1] >= 'A' && id[1] <= 'Z', "ids start with two capitals", id);
  G.id_starts[id[0] - 'A'][id[1] - 'A'] = 1;
  int known = 0;
  for (int i = 0; i < G.num_id_lengths; i++) known |= G.id_lengths[i] == o->len;
  if (!known && G.num_id_lengths < 8) G.id_lengths[G.num_id_lengths++] = o->len;
}

static void load_ids(BankEpisode *ep) {
  int cap = 8192;
  G.ids = calloc((size_t)cap, sizeof *G.ids);
  for (int k = 0; k < ID_KINDS; k++) {
    sqlite3_stmt *stmt = prepare(ep->db, ID_SQL[k]);
    G.by_kind[k] = calloc((size_t)cap, sizeof(int));
    while (sqlite3_step(stmt) == SQLITE_ROW) {
      check(G.num_ids < cap, "id table large enough", NULL);
      G.by_kind[k][G.kind_count[k]++] = G.num_ids;
      add_id((const char *)sqlite3_column_text(stmt, 0), (const char *)sqlite3_column_text(stmt, 1), (IdKind)k);
    }
    sqlite3_finalize(stmt);
  }
  G.num_slots = 4 * G.num_ids + 1;
  G.slots = malloc((size_t)G.num_slots * sizeof(int));
  for (int s = 0; s < G.num_slots; s++) G.slots[s] = -1;
  for (int i = 0; i < G.num_ids; i++) {
    check(find_id(G.ids[i].id, (size_t)G.ids[i].len) == NULL, "image ids are unique", G.ids[i].id);
    uint64_t h = hash_text(G.ids[i].id, (size_t)G.ids[i].len);
    while (G.slots[h % (uint64_t)G.num_slots] >= 0) h++;
    G.slots[h % (uint64_t)G.num_slots] = i;
  }
  sqlite3_stmt *stmt = prepare(ep->db, "SELECT c.account_id, min(c.cheque_number), count(*), a.customer_id FROM cheques c"
                                       " JOIN accounts a USING (account_id) GROUP BY c.account_id");
  G.cheques = calloc(256, sizeof *G.cheques);
  while (G.num_cheques < 256 && sqlite3_step(stmt) == SQLITE_ROW) {
    ChequeRange *r = &G.cheques[G.num_cheques++];
    snprintf(r->account, sizeof r->account, "%s", sqlite3_column_text(stmt, 0));
    r->first = sqlite3_column_int64(stmt, 1);
    r->count = sqlite3_column_int(stmt, 2);
    r->owner = customer_index((const char *)sqlite3_column_text(stmt, 3));
  }
  sqlite3_finalize(stmt);
}

// ---- the catalog, from the JSON schemas ----------------------------------------

static IdKind id_kind_of(const char *name) {
  static const struct {
    const char *part;
    IdKind kind;
  } map[] = {{"customer_id", ID_CUSTOMER}, {"account", ID_ACCOUNT},     {"transaction_id", ID_TXN},
             {"beneficiary_id", ID_BENEFICIARY}, {"fd_id", ID_FD},     {"rd_id", ID_RD},
             {"loan_id", ID_LOAN},       {"card_id", ID_CARD},         {"mandate_id", ID_MANDATE},
             {"policy_id", ID_POLICY},   {"request_id", ID_REQUEST},   {"dispute_id", ID_DISPUTE},
             {"claim_id", ID_CLAIM}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strstr(name, map[i].part)) return map[i].kind;
  return ID_NONE;
}

static void load_param(Param *p, const cJSON *prop, const cJSON *required) {
  snprintf(p->name, sizeof p->name, "%s", prop->string);
  const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(prop, "type"));
  const char *format = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(prop, "format"));
  check(type != NULL, "schema property has a type", p->name);
  p->kind = strcmp(type, "integer") == 0 ? P_INTEGER
            : strcmp(type, "number") == 0 ? P_NUMBER
            : strcmp(type, "boolean") == 0 ? P_BOOLEAN
            : strcmp(type, "array") == 0 ? P_ARRAY
            : format && strcmp(format, "date") == 0 ? P_DATE : P_STRING;
  p->id_kind = id_kind_of(p->name);
  const cJSON *item;
  cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(prop, "enum"))
    if (p->num_enums < MAX_ENUMS) snprintf(p->enums[p->num_enums++], sizeof p->enums[0], "%s", item->valuestring);
  const cJSON *min = cJSON_GetObjectItemCaseSensitive(prop, "minimum");
  const cJSON *max = cJSON_GetObjectItemCaseSensitive(prop, "maximum");
  p->has_range = cJSON_IsNumber(min) && cJSON_IsNumber(max);
  p->min = p->has_range ? min->valuedouble : 0;
  p->max = p->has_range ? max->valuedouble : 0;
  const cJSON *max_len = cJSON_GetObjectItemCaseSensitive(prop, "maxLength");
  if (!max_len) max_len = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(prop, "items"), "maxLength");
  p->max_len = cJSON_IsNumber(max_len) ? max_len->valueint : 100;
  cJSON_ArrayForEach(item, required)
    if (cJSON_IsString(item) && strcmp(item->valuestring, p->name) == 0) p->required = 1;
}

static void load_catalog(void) {
  G.num_tools = env_tool_count();
  G.tools = calloc((size_t)G.num_tools, sizeof *G.tools);
  for (int i = 0; i < G.num_tools; i++) {
    Tool *t = &G.tools[i];
    t->name = env_tool_name(i);
    t->writes = env_tool_writes(i);
    t->charged = env_tool_charged(i);
    cJSON *schema = env_tool_schema(i);
    const cJSON *parameters = cJSON_GetObjectItemCaseSensitive(schema, "parameters");
    const cJSON *required = cJSON_GetObjectItemCaseSensitive(parameters, "required"), *prop;
    cJSON_ArrayForEach(prop, cJSON_GetObjectItemCaseSensitive(parameters, "properties")) {
      check(t->num_params < MAX_PARAMS, "few parameters", t->name);
      load_param(&t->params[t->num_params++], prop, required);
    }
    cJSON_Delete(schema);
  }
}

// ---- tables: owners, row hashes and the per-customer digest ------------------------

static void load_tables(BankEpisode *ep) {
  sqlite3_stmt *stmt = prepare(ep->db, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name");
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    check(G.num_tables < MAX_TABLES, "few tables", NULL);
    Table *t = &G.tables[G.num_tables++];
    snprintf(t->name, sizeof t->name, "%s", sqlite3_column_text(stmt, 0));
    t->owner_column = t->channel_column = -1;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT * FROM %s LIMIT 0", t->name);
    sqlite3_stmt *cols = prepare(ep->db, sql);
    for (int i = 0; i < sqlite3_column_count(cols); i++) {
      const char *name = sqlite3_column_name(cols, i);
      if (strcmp(name, "customer_id") == 0) t->owner_column = i, t->cls = T_CUSTOMER_COLUMN;
      if (strcmp(name, "channel") == 0) t->channel_column = i;
    }
    sqlite3_finalize(cols);
    if (strcmp(t->name, "transactions") == 0) t->owner_column = 1, t->cls = T_ACCOUNT_COLUMN;
    else if (strcmp(t->name, "cheques") == 0) t->owner_column = 0, t->cls = T_ACCOUNT_COLUMN;
    else if (strcmp(t->name, "counters") == 0) t->cls = T_COUNTERS;
    else if (t->owner_column < 0) t->cls = T_BANK;
    snprintf(sql, sizeof sql, "SELECT * FROM %s WHERE rowid = ?", t->name);
    t->row_sql = strdup(sql);
    if (t->cls == T_CUSTOMER_COLUMN) snprintf(sql, sizeof sql, "SELECT customer_id, * FROM %s", t->name);
    else if (t->cls == T_ACCOUNT_COLUMN)
      snprintf(sql, sizeof sql, "SELECT a.customer_id, t.* FROM %s t LEFT JOIN accounts a ON a.account_id = t.account_id",
               t->name);
    else snprintf(sql, sizeof sql, "SELECT NULL, * FROM %s", t->name);
    t->digest_sql = strdup(sql);
    snprintf(sql, sizeof sql, "PRAGMA integrity_check(%s)", t->name);
    t->check_sql = strdup(sql);
  }
  sqlite3_finalize(stmt);
  check(G.num_tables > 20 && G.num_tables <= 64, "the schema has its tables", NULL);
}

static const Table *table_named(const char *name) {
  for (int i = 0; i < G.num_tables; i++)
    if (strcmp(G.tables[i].name, name) == 0) return &G.tables[i];
  return NULL;
}

CHECKER static uint64_t hash_typed(uint64_t h, int type, int64_t i, double d, const void *bytes, int n) {
  h = fnv(h, &type, sizeof type);
  if (type == SQLITE_INTEGER) h = fnv(h, &i, sizeof i);
  else if (type == SQLITE_FLOAT) h = fnv(h, &d, sizeof d);
  else if (type != SQLITE_NULL) h = fnv(fnv(h, &n, sizeof n), bytes, (size_t)n);
  return h;
}

// Hashes are never 0: 0 stands for "no such row".
static uint64_t nonzero(uint64_t h) { return h ? h : 1; }

// Hash of columns [from, count) of the current row of stmt. Each value is
// read only in its own type, so no conversion touches it.
static uint64_t hash_columns(sqlite3_stmt *stmt, int from) {
  uint64_t h = FNV_START;
  for (int i = from, n = sqlite3_column_count(stmt); i < n; i++) {
    int type = sqlite3_column_type(stmt, i);
    const void *bytes = type == SQLITE_BLOB ? sqlite3_column_blob(stmt, i)
                        : type == SQLITE_TEXT ? (const void *)sqlite3_column_text(stmt, i) : NULL;
    h = hash_typed(h, type, type == SQLITE_INTEGER ? sqlite3_column_int64(stmt, i) : 0,
                   type == SQLITE_FLOAT ? sqlite3_column_double(stmt, i) : 0, bytes,
                   bytes ? sqlite3_column_bytes(stmt, i) : 0);
  }
  return nonzero(h);
}

// The row's hash now (0 when it does not exist).
static uint64_t current_row_hash(BankEpisode *ep, const Table *t, int64_t rowid) {
  sqlite3_stmt *stmt = bank_stmt_get(ep, t->row_sql);
  check(stmt != NULL, "prepare row lookup", t->row_sql);
  sqlite3_bind_int64(stmt, 1, rowid);
  uint64_t h = sqlite3_step(stmt) == SQLITE_ROW ? hash_columns(stmt, 0) : 0;
  bank_stmt_put(ep, stmt);
  return h;
}

// Per owner, the sum (order-free) of the hashes of the rows they own; bucket
// num_customers holds the bank's terms, num_customers + 1 rows nobody owns.
static void customer_digests(BankEpisode *ep, uint64_t *out) {
  memset(out, 0, (size_t)(G.num_customers + 2) * sizeof *out);
  for (int i = 0; i < G.num_tables; i++) {
    const Table *t = &G.tables[i];
    if (t->cls == T_COUNTERS || strcmp(t->name, "clock") == 0) continue;  // ids advance; the clock is a fixture
    sqlite3_stmt *stmt = bank_stmt_get(ep, t->digest_sql);
    check(stmt != NULL, "prepare", t->digest_sql);
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      const char *owner = (const char *)sqlite3_column_text(stmt, 0);
      int c = t->cls == T_BANK ? G.num_customers : owner ? customer_index(owner) : NO_OWNER;
      uint64_t h = hash_columns(stmt, 1);
      out[c >= 0 ? c : G.num_customers + 1] += h ^ (h >> 29);
    }
    check(rc == SQLITE_DONE, "digest query", t->digest_sql);
    bank_stmt_put(ep, stmt);
  }
}

// Every balance is non-negative and equals the balance after the account's
// last ledger entry (post_entry keeps them together).
static const char *LEDGER_SQL =
    "SELECT account_id FROM accounts a WHERE balance_paise < 0 OR balance_paise != coalesce((SELECT"
    " balance_after_paise FROM transactions t WHERE t.account_id = a.account_id ORDER BY t.rowid DESC LIMIT 1),"
    " balance_paise) LIMIT 1";

static void check_ledger(BankEpisode *ep) {
  sqlite3_stmt *stmt = bank_stmt_get(ep, LEDGER_SQL);
  check(stmt != NULL, "prepare ledger check", LEDGER_SQL);
  if (sqlite3_step(stmt) == SQLITE_ROW) fail("balance negative or not the last ledger entry's balance",
                                             (const char *)sqlite3_column_text(stmt, 0));
  bank_stmt_put(ep, stmt);
}

static void check_table_integrity(BankEpisode *ep, const Table *t) {
  sqlite3_stmt *stmt = bank_stmt_get(ep, t->check_sql);
  check(stmt != NULL, "prepare", t->check_sql);
  const unsigned char *result = sqlite3_step(stmt) == SQLITE_ROW ? sqlite3_column_text(stmt, 0) : NULL;
  if (!result || strcmp((const char *)result, "ok") != 0) fail(t->check_sql, result ? (const char *)result : "no row");
  bank_stmt_put(ep, stmt);
}

// ---- the pre-update hook: every row change of a call ------------------------------

typedef struct Change {
  const Table *table;
  int op;
  int64_t rowid_old, rowid_new;
  uint64_t old_hash;  // 0 for an insert
  char owner_old[BANK_ID_MAX], owner_new[BANK_ID_MAX];  // customer or account id
  int debits_charge;  // a ledger entry on channel 'charge' or 'auto_debit'
} Change;

static struct {
  Change *changes;
  int num, cap, overflow;
  char bad_table[64];
} H;

static void copy_value_text(sqlite3_value *v, char *out) {
  const unsigned char *text = v && sqlite3_value_type(v) == SQLITE_TEXT ? sqlite3_value_text(v) : NULL;
  snprintf(out, BANK_ID_MAX, "%s", text ? (const char *)text : "");
}

static uint64_t preupdate_old_hash(sqlite3 *db) {
  uint64_t h = FNV_START;
  for (int i = 0, n = sqlite3_preupdate_count(db); i < n; i++) {
    sqlite3_value *v = NULL;
    sqlite3_preupdate_old(db, i, &v);
    int type = v ? sqlite3_value_type(v) : SQLITE_NULL;
    const void *bytes = type == SQLITE_BLOB ? sqlite3_value_blob(v)
                        : type == SQLITE_TEXT ? (const void *)sqlite3_value_text(v) : NULL;
    h = hash_typed(h, type, type == SQLITE_INTEGER ? sqlite3_value_int64(v) : 0,
                   type == SQLITE_FLOAT ? sqlite3_value_double(v) : 0, bytes, bytes ? sqlite3_value_bytes(v) : 0);
  }
  return nonzero(h);
}

static void on_preupdate(void *ctx, sqlite3 *db, int op, const char *zdb, const char *ztable, sqlite3_int64 key_old,
                         sqlite3_int64 key_new) {
  (void)ctx;
  (void)zdb;
  const Table *t = table_named(ztable);
  if (!t) {
    snprintf(H.bad_table, sizeof H.bad_table, "%s", ztable);
    return;
  }
  if (H.num == H.cap) {
    int cap = H.cap ? 2 * H.cap : 256;
    Change *grown = realloc(H.changes, (size_t)cap * sizeof *grown);
    if (!grown) {
      H.overflow = 1;
      return;
    }
    H.changes = grown;
    H.cap = cap;
  }
  Change *c = &H.changes[H.num++];
  memset(c, 0, sizeof *c);
  c->table = t;
  c->op = op;
  c->rowid_old = key_old;
  c->rowid_new = key_new;
  sqlite3_value *v = NULL;
  if (op != SQLITE_INSERT) {
    c->old_hash = preupdate_old_hash(db);
    if (t->owner_column >= 0 && sqlite3_preupdate_old(db, t->owner_column, &v) == SQLITE_OK)
      copy_value_text(v, c->owner_old);
  }
  if (op != SQLITE_DELETE && t->owner_column >= 0 && sqlite3_preupdate_new(db, t->owner_column, &v) == SQLITE_OK)
    copy_value_text(v, c->owner_new);
  if (op == SQLITE_INSERT && t->channel_column >= 0 && sqlite3_preupdate_new(db, t->channel_column, &v) == SQLITE_OK) {
    char channel[BANK_ID_MAX];
    copy_value_text(v, channel);
    c->debits_charge = strcmp(channel, "charge") == 0 || strcmp(channel, "auto_debit") == 0;
  }
}

// The customer who owns a row by its customer_id or account_id text.
static int owner_of(BankEpisode *ep, const Table *t, const char *text) {
  if (t->cls == T_CUSTOMER_COLUMN) return customer_index(text);
  const OwnedId *o = find_id(text, strlen(text));
  if (o && o->kind == ID_ACCOUNT) return o->owner;
  char customer[BANK_ID_MAX] = "";
  sqlite3_stmt *stmt = bank_stmt_get(ep, "SELECT customer_id FROM accounts WHERE account_id = ?");
  sqlite3_bind_text(stmt, 1, text, -1, SQLITE_STATIC);
  if (sqlite3_step(stmt) == SQLITE_ROW) snprintf(customer, sizeof customer, "%s", sqlite3_column_text(stmt, 0));
  bank_stmt_put(ep, stmt);
  return customer[0] ? customer_index(customer) : UNKNOWN_OWNER;
}

// ---- one episode ------------------------------------------------------------------

typedef struct Episode {
  BankEpisode *ep;
  int me;            // index of the verified customer, or NO_OWNER
  int pretend;       // the customer whose credentials and own ids the input mostly uses
  char *said;        // every argument text of the episode, for echoes of free text
  size_t said_len, said_cap;
  char new_ids[MAX_NEW_IDS][BANK_ID_MAX];
  int num_new_ids;
  const char *last_account;  // the account the last generated argument named
  int wrote;                 // any row change in the episode
  uint64_t touched;          // bit t: a row of G.tables[t] changed
} Episode;

static void say(Episode *e, const char *text) {
  size_t n = strlen(text);
  if (e->said_len + n + 2 > e->said_cap) {
    size_t cap = (e->said_len + n + 2) * 2;
    char *grown = realloc(e->said, cap);
    if (!grown) fail("realloc", NULL);
    e->said = grown;
    e->said_cap = cap;
  }
  memcpy(e->said + e->said_len, text, n);
  e->said_len += n;
  e->said[e->said_len++] = '\n';
  e->said[e->said_len] = '\0';
}

CHECKER static int utf8_valid(const char *s) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; u[i];) {
    unsigned c = u[i];
    size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (k == 0) return 0;
    unsigned cp = k == 1 ? c : c & (0x7F >> k);
    for (size_t j = 1; j < k; j++) {
      if ((u[i + j] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (u[i + j] & 0x3F);
    }
    static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[k] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += k;
  }
  return 1;
}

// The first id of another customer inside s that `allowed` does not excuse.
typedef int (*IdFilter)(const Episode *e, const OwnedId *id, const void *ctx);
CHECKER static const OwnedId *foreign_id_in(const Episode *e, const char *s, IdFilter allowed, const void *ctx) {
  size_t n = strlen(s);
  for (size_t i = 0; i + 1 < n; i++) {
    unsigned a = (unsigned char)s[i] - 'A', b = (unsigned char)s[i + 1] - 'A';
    if (a >= 26 || b >= 26 || !G.id_starts[a][b]) continue;  // no id starts with these two letters
    for (int k = 0; k < G.num_id_lengths; k++) {
      size_t len = (size_t)G.id_lengths[k];
      if (i + len > n) continue;
      const OwnedId *o = find_id(s + i, len);
      if (o && o->owner != e->me && !(allowed && allowed(e, o, ctx))) return o;
    }
  }
  return NULL;
}

static int in_text(const Episode *e, const OwnedId *id, const void *ctx) {
  (void)e;
  return strstr((const char *)ctx, id->id) != NULL;
}

// Keys whose values are text the agent wrote (an address, a description, a
// payee): another customer's id may appear there if the agent wrote it.
static int free_text_key(const char *key) {
  static const char *keys[] = {"description", "address_line", "city", "name", "nickname", "payee_name", "payee",
                               "email", "mobile", "remarks", "reason"};
  for (size_t i = 0; key && i < sizeof keys / sizeof keys[0]; i++)
    if (strcmp(key, keys[i]) == 0) return 1;
  return 0;
}

static void check_result_strings(const Episode *e, const cJSON *item, const char *key, const char *text) {
  for (; item; item = item->next) {
    const char *k = item->string ? item->string : key;
    if (cJSON_IsString(item)) {
      const OwnedId *o = foreign_id_in(e, item->valuestring, free_text_key(k) ? in_text : NULL, e->said);
      if (o) {
        char detail[512];
        snprintf(detail, sizeof detail, "key \"%s\" holds %s of customer %s (verified: %s): %.300s", k ? k : "",
                 o->id, G.customers[o->owner].id, e->me >= 0 ? G.customers[e->me].id : "none", text);
        fail("a result names another customer's id", detail);
      }
    }
    if (item->child) check_result_strings(e, item->child, k, text);
  }
}

static void remember_new_ids(Episode *e, const cJSON *item) {
  for (; item; item = item->next) {
    if (cJSON_IsString(item) && item->string && strstr(item->string, "id") && e->num_new_ids < MAX_NEW_IDS &&
        strlen(item->valuestring) < BANK_ID_MAX && !find_id(item->valuestring, strlen(item->valuestring)))
      snprintf(e->new_ids[e->num_new_ids++], BANK_ID_MAX, "%s", item->valuestring);
    if (item->child) remember_new_ids(e, item->child);
  }
}

static int64_t change_rowid(const Change *c) { return c->op == SQLITE_INSERT ? c->rowid_new : c->rowid_old; }

// Row changes of one call: whose rows, and (failed calls) undone.
static void check_changes(Episode *e, const char *name, int ok, int tool, const cJSON *args, int consent_before) {
  check(!H.bad_table[0], "a change to a table outside the schema", H.bad_table);
  check(!H.overflow, "change log allocation", NULL);
  if (H.num) e->wrote = 1;
  if (H.num && (tool < 0 || !G.tools[tool].writes)) fail("a read-only or unknown tool changed rows", name);
  int charged = 0;
  for (int i = 0; i < H.num; i++) {
    const Change *c = &H.changes[i];
    e->touched |= 1ULL << (c->table - G.tables);
    char detail[256];
    snprintf(detail, sizeof detail, "%s: %s of %s rowid %lld (owner %s -> %s), verified %s", name,
             c->op == SQLITE_INSERT ? "insert" : c->op == SQLITE_DELETE ? "delete" : "update", c->table->name,
             (long long)change_rowid(c), c->owner_old, c->owner_new,
             e->me >= 0 ? G.customers[e->me].id : "none");
    if (c->table->cls == T_BANK) fail("a tool changed the bank's terms or clock", detail);
    if (c->table->cls == T_COUNTERS) continue;
    if (c->op != SQLITE_INSERT && (e->me < 0 || owner_of(e->ep, c->table, c->owner_old) != e->me))
      fail("a tool changed a row it does not own (even if rolled back)", detail);
    if (c->op != SQLITE_DELETE && (e->me < 0 || owner_of(e->ep, c->table, c->owner_new) != e->me))
      fail("a tool wrote a row for another customer", detail);
    charged |= c->debits_charge;
    if (ok) continue;
    // A failed call rolled back: the first change of each row knows its state before.
    int first = 1;
    for (int j = 0; j < i && first; j++)
      if (H.changes[j].table == c->table && change_rowid(&H.changes[j]) == change_rowid(c)) first = 0;
    if (first && current_row_hash(e->ep, c->table, change_rowid(c)) != (c->op == SQLITE_INSERT ? 0 : c->old_hash))
      fail("a failed call left a changed row", detail);
  }
  if (ok && charged) {
    check(tool >= 0 && G.tools[tool].charged, "only charged tools debit charges", name);
    check(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "customer_confirmed")),
          "a charge debited without customer_confirmed=true", name);
    if (e->ep->confirm_mode == BANK_CONFIRM_CONVERSATION) {
      check(consent_before, "a charge debited without the customer's recorded consent", name);
      check(!e->ep->confirmation_given, "a charge debited without consuming the consent", name);
    }
  }
}

// Runs one call and checks everything about it.
static void run_call(Episode *e, const char *name, const cJSON *args) {
  BankEpisode *ep = e->ep;
  int calls_before = ep->num_calls, consent_before = ep->confirmation_given;
  // What this call said: its name and arguments (ids in them may be echoed).
  char *args_text = args ? cJSON_PrintUnformatted(args) : strdup("");
  check(args_text != NULL, "print arguments", NULL);
  size_t said_len = strlen(args_text) + (name ? strlen(name) : 0) + 2;
  char *call_text = malloc(said_len);
  check(call_text != NULL, "malloc", NULL);
  snprintf(call_text, said_len, "%s %s", name ? name : "", args_text);
  free(args_text);
  say(e, call_text);
  H.num = 0;
  ToolResult result;
  int ok = env_tool_call(ep, name, args, &result);
  int tool = name && strlen(name) <= 64 ? env_tool_index(name) : -1;
  if (G.trace)
    fprintf(stderr, "call %.80s %.300s\n  -> %s %.400s\n", name ? name : "(null)", call_text + (name ? strlen(name) : 0),
            ok ? "ok" : "error", result.text ? result.text : "(null)");
  e->me = customer_index(ep->customer_id);
  check(result.text != NULL, "a result text", name);
  check(ok == result.ok && (ok == 0 || ok == 1), "ok flag", result.text);
  check(ep->num_calls == calls_before + 1, "the call log grows by one", name);
  check(ep->calls[calls_before].ok == ok, "the call log records success", name);
  if (tool >= 0) check(strcmp(ep->calls[calls_before].name, name) == 0, "the call log records the name", name);
  // Results become JSON for the model and MCP clients: UTF-8 whatever came in
  // (invalid text is refused, and quotes of bad names stop before the bad byte).
  if (!utf8_valid(result.text)) fail("a result that is not valid UTF-8", result.text);
  if (!ok) {
    check(strncmp(result.text, "Error: ", 7) == 0, "an error starts with \"Error: \"", result.text);
    const OwnedId *o = foreign_id_in(e, result.text, in_text, call_text);
    if (o) fail("an error names another customer's id the call did not give", result.text);
  } else {
    check(tool >= 0, "only catalog tools succeed", name);
    cJSON *parsed = cJSON_Parse(result.text);
    check(cJSON_IsObject(parsed), "a result is a JSON object", result.text);
    check_result_strings(e, parsed->child, NULL, result.text);
    remember_new_ids(e, parsed->child);
    cJSON_Delete(parsed);
  }
  check_changes(e, name ? name : "(null)", ok, tool, args, consent_before);
  tool_result_free(&result);
  free(call_text);
}

// ---- argument values --------------------------------------------------------------

static const OwnedId *pick_id(Input *in, IdKind kind, int owner) {
  if (kind == ID_NONE || !G.kind_count[kind]) kind = (IdKind)(byte_of(in) % ID_KINDS);
  int n = G.kind_count[kind];
  if (!n) return NULL;
  unsigned start = u16_of(in);
  for (int k = 0; k < n; k++) {
    const OwnedId *o = &G.ids[G.by_kind[kind][(start + (unsigned)k) % (unsigned)n]];
    if (owner < 0 || o->owner == owner) return o;
  }
  return NULL;  // this customer has none of that kind
}

static cJSON *id_value(Episode *e, Input *in, IdKind kind) {
  unsigned how = byte_of(in) % 8;
  const OwnedId *o = NULL;
  if (how < 4) o = pick_id(in, kind, e->pretend);            // own
  else if (how < 6) o = pick_id(in, kind, -1);               // anyone's, mostly others'
  else if (how == 6 && e->num_new_ids) return cJSON_CreateString(e->new_ids[byte_of(in) % e->num_new_ids]);
  else o = pick_id(in, ID_NONE, byte_of(in) & 1 ? e->pretend : -1);  // another kind of id
  if (!o) o = pick_id(in, kind, -1);
  if (o && o->kind == ID_ACCOUNT) e->last_account = o->id;
  return cJSON_CreateString(o ? o->id : "NVC10001");
}

static const double SPECIAL_NUMBERS[] = {0, -0.0, -1, 0.001, 0.005, 0.01, 0.1, 0.999, 1.005, 99.999, 1e9, 1e9 + 0.01,
                                         1000000000.01, 1e15, 1e16, 9007199254740993.0, 9.3e18, 1.8446744073709552e19,
                                         1e300, 1e308, -1e308, 4.9e-324, 2147483647, 2147483648.0, -2147483649.0,
                                         INFINITY, -INFINITY, NAN, 100.1, 1000.10, 50000.004};

static cJSON *number_value(Input *in, const Param *p) {
  static const double amounts[] = {1, 5, 20, 100, 250, 436, 999.99, 1000, 1000.5, 1001, 5000, 10000, 25000, 49999.99,
                                   50000, 100000, 100000.01, 200000, 499999, 500000, 1000000, 2500000, 5000000, 5e7};
  unsigned how = byte_of(in) % 4;
  if (how == 0 && p->has_range) {  // inside or at the edges of the declared range
    double t = byte_of(in) / 255.0, v = p->min + t * (p->max - p->min);
    return cJSON_CreateNumber(p->kind == P_INTEGER ? floor(v) : floor(v * 100) / 100);
  }
  if (how == 1 && p->has_range) return cJSON_CreateNumber(byte_of(in) & 1 ? p->max + 1 : p->min - 1);
  if (how == 2) return cJSON_CreateNumber((int)(u16_of(in) % 2000) * (p->kind == P_INTEGER ? 1 : 0.5));
  return cJSON_CreateNumber(amounts[byte_of(in) % (sizeof amounts / sizeof amounts[0])]);
}

static cJSON *date_value(Episode *e, Input *in) {
  static const char *dates[] = {"2026-01-15", "2026-01-14", "2026-01-12", "2026-01-05", "2025-12-01", "2025-10-17",
                                "2025-06-01", "2026-01-16", "2026-04-01", "2027-01-15", "2024-02-29", "2026-02-29",
                                "1900-01-01", "2199-12-31", "1899-12-31", "2026-1-15", "15-01-2026", ""};
  unsigned how = byte_of(in) % 4;
  if (how == 0 && e->pretend >= 0) return cJSON_CreateString(G.customers[e->pretend].dob);
  if (how == 1) {
    char date[16];
    snprintf(date, sizeof date, "%04u-%02u-%02u", 1890 + u16_of(in) % 320, byte_of(in) % 14, byte_of(in) % 33);
    return cJSON_CreateString(date);
  }
  return cJSON_CreateString(dates[byte_of(in) % (sizeof dates / sizeof dates[0])]);
}

// A plausible value for string parameters that are not ids.
static cJSON *plain_string(Episode *e, Input *in, const Param *p) {
  const Customer *me = e->pretend >= 0 ? &G.customers[e->pretend] : &G.customers[0];
  const Customer *other = &G.customers[byte_of(in) % G.num_customers];
  unsigned pick = byte_of(in);
  const char *n = p->name;
  if (strstr(n, "mobile")) return cJSON_CreateString(pick & 1 ? me->mobile : other->mobile);
  if (strstr(n, "last4")) return cJSON_CreateString(pick & 1 ? me->aadhaar : other->aadhaar);
  if (strstr(n, "pincode")) return cJSON_CreateString(pick & 1 ? "400001" : "012345");
  if (strstr(n, "email")) return cJSON_CreateString(pick & 1 ? "asha.rao@example.in" : "no-at-sign");
  if (strstr(n, "ifsc")) return cJSON_CreateString(pick & 1 ? "SBIN0004567" : "sbin0004567");
  if (strstr(n, "financial_year")) {
    static const char *years[] = {"2025-26", "2024-25", "2026-27", "2025-27", "20x5-26"};
    return cJSON_CreateString(years[pick % 5]);
  }
  if (strcmp(n, "account_number") == 0) {
    char digits[24];
    snprintf(digits, sizeof digits, "%0*u", 9 + (int)(pick % 10), u16_of(in) * 7919u);
    return cJSON_CreateString(digits);
  }
  char *s = text_of(in, byte_of(in) % 24);
  cJSON *v = cJSON_CreateString(s[0] ? s : "x");
  free(s);
  return v;
}

static cJSON *string_value(Episode *e, Input *in, const Param *p) {
  if (p->num_enums && byte_of(in) % 8) {
    const char *v = p->enums[byte_of(in) % (unsigned)p->num_enums];
    if (byte_of(in) % 16) return cJSON_CreateString(v);
    char upper[40];
    snprintf(upper, sizeof upper, "%s ", v);
    upper[0] = (char)(upper[0] & ~0x20);
    return cJSON_CreateString(upper);
  }
  if (p->id_kind != ID_NONE) return id_value(e, in, p->id_kind);
  return plain_string(e, in, p);
}

static cJSON *cheque_number_value(Episode *e, Input *in) {
  const ChequeRange *r = NULL;
  for (int i = 0; e->last_account && i < G.num_cheques && !r; i++)
    if (strcmp(G.cheques[i].account, e->last_account) == 0) r = &G.cheques[i];
  if (!r || byte_of(in) % 4 == 0) r = &G.cheques[u16_of(in) % (unsigned)G.num_cheques];
  return cJSON_CreateNumber((double)(r->first + (int64_t)(byte_of(in) % (unsigned)(r->count + 60)) - 1));
}

static cJSON *array_value(Episode *e, Input *in, const Param *p) {
  cJSON *list = cJSON_CreateArray();
  unsigned n = byte_of(in) % 8;
  if (n == 7) n = 21;  // one too many
  for (unsigned i = 0; i < n; i++)
    cJSON_AddItemToArray(list, byte_of(in) % 16 ? id_value(e, in, p->id_kind) : cJSON_CreateNumber(i));
  return list;
}

// Longer than any limit: 64 KB of a letter, or of a broken 3-byte sequence.
static cJSON *huge_string(Input *in) {
  static const size_t sizes[] = {101, 301, 1025, 65537};
  size_t n = sizes[byte_of(in) % 4];
  char *s = malloc(n + 1);
  if (!s) fail("malloc", NULL);
  unsigned fill = byte_of(in);
  memset(s, fill >= 0x80 ? 0xE0 + (fill & 0xF) : 'A' + fill % 26, n);
  if (fill >= 0x80) s[n / 2] = (char)0xA4;
  s[n] = '\0';
  cJSON *v = cJSON_CreateString(s);
  free(s);
  return v;
}

static cJSON *wrong_type(Input *in) {
  switch (byte_of(in) % 7) {
    case 0: return cJSON_CreateNull();
    case 1: return cJSON_CreateBool(1);
    case 2: return cJSON_CreateString("12");
    case 3: return cJSON_CreateNumber(12);
    case 4: return cJSON_CreateArray();
    case 5: return cJSON_CreateObject();
    default: {
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "value", "SB0000000001");
      return o;
    }
  }
}

static cJSON *value_for(Episode *e, Input *in, const Param *p) {
  unsigned how = byte_of(in) % 16;
  if (how < 10) {
    if (strcmp(p->name, "cheque_number") == 0 && how < 6) return cheque_number_value(e, in);
    switch (p->kind) {
      case P_STRING: return string_value(e, in, p);
      case P_DATE: return date_value(e, in);
      case P_INTEGER: case P_NUMBER: return number_value(in, p);
      case P_BOOLEAN: return cJSON_CreateBool(byte_of(in) & 1);
      case P_ARRAY: return array_value(e, in, p);
    }
  }
  switch (how) {
    case 10: return wrong_type(in);
    case 11: return huge_string(in);
    case 12: {  // raw bytes: random or invalid UTF-8
      char *s = text_of(in, 1 + byte_of(in) % 48);
      cJSON *v = cJSON_CreateString(s);
      free(s);
      return v;
    }
    case 13: return cJSON_CreateNumber(SPECIAL_NUMBERS[byte_of(in) % (sizeof SPECIAL_NUMBERS / sizeof SPECIAL_NUMBERS[0])]);
    case 14: {  // any double, NaN payloads and denormals included
      double d = 0;
      unsigned char raw[8];
      for (int i = 0; i < 8; i++) raw[i] = (unsigned char)byte_of(in);
      memcpy(&d, raw, sizeof d);
      return cJSON_CreateNumber(d);
    }
    default: return id_value(e, in, p->id_kind);  // an id where it may not belong
  }
}

// The arguments object of a catalog tool (sometimes not an object at all).
static cJSON *arguments_for(Episode *e, Input *in, const Tool *t) {
  unsigned shape = byte_of(in);
  if (shape % 32 == 31) {
    static const char *odd[] = {"null", "[]", "\"x\"", "7", "[{\"account_id\": \"x\"}]", "true"};
    return cJSON_Parse(odd[(shape >> 5) % 6]);
  }
  cJSON *args = cJSON_CreateObject();
  e->last_account = NULL;
  for (int i = 0; i < t->num_params; i++) {
    const Param *p = &t->params[i];
    unsigned presence = byte_of(in) % 16;
    if (p->required ? presence == 0 : presence < 6) continue;
    cJSON_AddItemToObject(args, p->name, value_for(e, in, p));
    if (presence == 15) cJSON_AddItemToObject(args, p->name, value_for(e, in, p));  // the same key twice
  }
  if (shape % 32 == 30) {
    char *key = text_of(in, 1 + byte_of(in) % 16);
    cJSON_AddItemToObject(args, key[0] ? key : "pin", cJSON_CreateString("1234"));
    free(key);
  }
  return args;
}

// ---- calls ----------------------------------------------------------------------

static void call_catalog_tool(Episode *e, Input *in) {
  const Tool *t = &G.tools[byte_of(in) % (unsigned)G.num_tools];
  cJSON *args = arguments_for(e, in, t);
  run_call(e, t->name, byte_of(in) % 64 ? args : NULL);
  cJSON_Delete(args);
}

static void call_verify(Episode *e, Input *in) {
  unsigned pick = byte_of(in), how = byte_of(in) % 8;
  const Customer *c = &G.customers[e->pretend >= 0 && pick % 4 ? e->pretend : pick % (unsigned)G.num_customers];
  const Customer *other = &G.customers[(pick / 4) % (unsigned)G.num_customers];
  cJSON *args = cJSON_CreateObject();
  cJSON_AddStringToObject(args, "customer_id", how == 7 ? "NVC99999" : c->id);
  cJSON_AddStringToObject(args, "date_of_birth", how == 4 || how == 6 ? other->dob : c->dob);
  cJSON_AddStringToObject(args, "registered_mobile", how == 5 || how == 6 ? other->mobile : c->mobile);
  run_call(e, "verify_customer", args);
  cJSON_Delete(args);
}

static void call_unknown_name(Episode *e, Input *in) {
  char *name = text_of(in, byte_of(in) % 80);
  const Tool *t = &G.tools[byte_of(in) % (unsigned)G.num_tools];
  cJSON *args = arguments_for(e, in, t);
  run_call(e, byte_of(in) % 32 ? name : NULL, args);
  cJSON_Delete(args);
  free(name);
}

// Model text -> toolcall_parse -> the call, as the environment runs a turn.
static void call_from_text(Episode *e, const char *text, size_t len) {
  ToolCallParse parse;
  if (toolcall_parse(text, len, &parse) == TOOLCALL_TOOL_CALL) run_call(e, parse.name, parse.arguments);
  toolcall_parse_free(&parse);
}

static void call_raw_text(Episode *e, Input *in) {
  size_t n = u16_of(in) % 2048, avail = in->size - in->pos;
  if (n > avail) n = avail;
  call_from_text(e, (const char *)in->data + in->pos, n);
  in->pos += n;
}

static void call_rendered(Episode *e, Input *in) {
  const Tool *t = &G.tools[byte_of(in) % (unsigned)G.num_tools];
  cJSON *args = arguments_for(e, in, t);
  if (!cJSON_IsObject(args)) {
    cJSON_Delete(args);
    args = cJSON_CreateObject();
  }
  FimiError err = {0};
  char *call = toolcall_render_call(t->name, args, &err);
  cJSON_Delete(args);
  if (!call) return;  // invalid UTF-8 inside: the renderer refuses it
  size_t n = strlen(call);
  unsigned edit = byte_of(in);
  if (edit % 4 == 0 && n) call[u16_of(in) % n] = (char)byte_of(in);  // one byte of damage
  call_from_text(e, call, n);
  free(call);
}

// ---- the episode ------------------------------------------------------------------

static const char *CLOCKS[] = {NULL, NULL, NULL, NULL, "2026-03-31", "2026-04-01", "2027-02-28", "2031-01-15"};

static BankEpisode *open_episode(unsigned flags) {
  FimiError err = {0};
  BankEpisode *ep = NULL;
  // A fresh copy (1 input in 8) costs a 364 KB copy and a schema parse; the
  // pool reuses a connection (and must behave the same).
  int pooled = (flags & 7) != 0;
  int rc = pooled ? bank_pool_acquire(G.pool, &ep, &err) : bank_episode_open(&G.image, G.kb, &ep, &err);
  check(rc == 0, "open an episode", err.message);
  const char *today = CLOCKS[(flags >> 3) & 7];
  if (today) check(bank_episode_set_today(ep, today, &err) == 0, "set the clock", err.message);
  if (flags & 0x40) ep->confirm_mode = BANK_CONFIRM_CONVERSATION;
  return ep;
}

static void close_episode(Episode *e, const uint8_t *data, size_t size) {
  FimiError err = {0};
  sqlite3_preupdate_hook(e->ep->db, NULL, NULL);
  // The full checks on one input in 64, chosen by the input so it replays
  // (each costs ~30 calls); every input checks the b-trees of the tables whose
  // rows changed (pages change only when rows do).
  int full = hash_text((const char *)data, size) % 64 == 0;
  if (full) check(bank_episode_check_integrity(e->ep, &err) == 0, "PRAGMA integrity_check", err.message);
  for (int t = 0; t < G.num_tables && !full; t++)
    if (e->touched >> t & 1) check_table_integrity(e->ep, &G.tables[t]);
  if (e->wrote || full) check_ledger(e->ep);
  if (full) {
    uint64_t now[66];
    customer_digests(e->ep, now);
    for (int c = 0; c <= G.num_customers + 1; c++)
      if (c != e->me && now[c] != G.baseline[c])
        fail("rows of another customer (or the bank's terms) differ from the image",
             c < G.num_customers ? G.customers[c].id : c == G.num_customers ? "bank terms" : "rows without owner");
  }
  if (e->ep->pool) bank_pool_release(e->ep);
  else bank_episode_close(e->ep);
  free(e->said);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Input in = {data, size, 0};
  unsigned flags = byte_of(&in), who = byte_of(&in);
  Episode e = {0};
  e.ep = open_episode(flags);
  e.me = NO_OWNER;
  e.pretend = (int)(who % (unsigned)G.num_customers);
  if (flags & 0x80) {
    FimiError err = {0};
    check(bank_episode_authenticate(e.ep, G.customers[e.pretend].id, &err) == 0, "authenticate", err.message);
    e.me = e.pretend;
  }
  H.num = 0;
  sqlite3_preupdate_hook(e.ep->db, on_preupdate, NULL);
  for (int calls = 0; calls < MAX_CALLS && bytes_left(&in); calls++) {
    unsigned op = byte_of(&in);
    if (op & 0x80) e.ep->confirmation_given = (op >> 6) & 1;  // the env layer's consent hook
    switch (op % 16) {
      case 10: call_verify(&e, &in); break;
      case 11: call_unknown_name(&e, &in); break;
      case 12: call_raw_text(&e, &in); break;
      case 13: case 14: call_rendered(&e, &in); break;
      case 15:
        e.ep->confirm_mode = e.ep->confirm_mode == BANK_CONFIRM_ARGUMENT ? BANK_CONFIRM_CONVERSATION : BANK_CONFIRM_ARGUMENT;
        break;
      default: call_catalog_tool(&e, &in); break;
    }
  }
  close_episode(&e, data, size);
  return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  FimiError err = {0};
  G.trace = getenv("FUZZ_ENV_TRACE") != NULL;
  check(bank_image_build(1, &G.image, &err) == 0, "build the image", err.message);
  check(kb_load_builtin(&G.kb, &err) == 0, "load the knowledge base", err.message);
  check(bank_pool_create(&G.image, G.kb, &G.pool, &err) == 0, "create the pool", err.message);
  BankEpisode *ref = NULL;
  check(bank_episode_open(&G.image, G.kb, &ref, &err) == 0, "open the reference copy", err.message);
  load_customers(ref);
  check(G.num_customers <= 64, "at most 64 customers", NULL);
  load_ids(ref);
  load_tables(ref);
  load_catalog();
  G.baseline = calloc((size_t)G.num_customers + 2, sizeof *G.baseline);
  customer_digests(ref, G.baseline);
  check_ledger(ref);  // the invariant holds on the image itself
  bank_episode_close(ref);
  fprintf(stderr, "fuzz_env_tools: %d customers, %d ids, %d tools, %d tables\n", G.num_customers, G.num_ids,
          G.num_tools, G.num_tables);
  return 0;
}
