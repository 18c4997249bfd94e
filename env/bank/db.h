// env/bank/db.h: the database of Navadhan Bank, a FICTIONAL Indian retail
// bank (every customer, account and term in it is synthetic). Defines
// BankImage (a seeded population serialized once), BankEpisode (a private
// in-memory copy of an image plus the episode's session state: the
// authenticated customer, the confirmation hook and the call log), and the
// functions that build, copy, edit and inspect them. See docs/bank-database.md.
//
// Determinism: an image is a pure function of its seed (core/rng.h), and an
// episode reads dates from its `clock` table and ids from its `counters`
// table, never from the wall clock or a fresh random source.
#ifndef FIMI_ENV_BANK_DB_H
#define FIMI_ENV_BANK_DB_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#include "core/error.h"

typedef struct KnowledgeBase KnowledgeBase;
struct BankStmtCache;
typedef struct BankPool BankPool;

extern const char *const bank_schema_sql;
// Indexes by customer of the tables tools filter by customer, created after
// seeding in images above the default size (the default image has none, so
// its bytes stay what they were).
extern const char *const bank_schema_index_sql;

// The bank's "today" in every image unless a task changes it.
#define BANK_DEFAULT_TODAY "2026-01-15"
#define BANK_NAME "Navadhan Bank"
#define BANK_ID_MAX 32

typedef struct BankImage {
  unsigned char *bytes;  // sqlite3_serialize output (malloc'd, owned)
  int64_t size;
  uint64_t seed;      // the image seed it was built from (population size included)
  int num_customers;
} BankImage;

// The population of an image is part of its seed (docs/corpus.md, "The
// bank"): the low 32 bits are the random seed, the bits above them the
// number of customers, 0 meaning the default 30. So every image seed below
// 2^32 names today's 30-customer bank, unchanged, and a task's
// initial.image_seed alone says which bank it runs on; every cache of images
// (the episode world, the generation context) keys on it as before.
#define BANK_DEFAULT_CUSTOMERS 30
#define BANK_MAX_CUSTOMERS 20000
// Image seed of `customers` customers (0 or 30: the default bank) drawn from
// `seed` (low 32 bits used when customers is given).
uint64_t bank_image_seed(uint64_t seed, int customers);
// The population an image seed asks for (may exceed BANK_MAX_CUSTOMERS: the
// build then fails naming the limit), and its random seed.
int64_t bank_image_seed_customers(uint64_t image_seed);
uint64_t bank_image_seed_random(uint64_t image_seed);

// How a charged write checks the customer's consent (docs/bank-database.md):
// ARGUMENT: the tool's `customer_confirmed` argument must be true.
// CONVERSATION: additionally the environment must have set
// `confirmation_given` (the simulated customer's last reply confirmed the
// quoted charge); it is consumed by the next charged write that succeeds.
typedef enum { BANK_CONFIRM_ARGUMENT = 0, BANK_CONFIRM_CONVERSATION = 1 } BankConfirmMode;

typedef struct BankCall {
  char *name;       // tool name as the model wrote it (malloc'd, <= 64 bytes)
  char *arguments;  // arguments as compact JSON (malloc'd), "{}" when absent
  int ok;           // 1 when the tool succeeded, 0 when it returned an error
} BankCall;

// One row an episode wrote: the table (an index into the episode's
// change_tables) and the rowid. Kept by SQLite's update hook.
typedef struct BankChange {
  int table;
  int64_t rowid;
} BankChange;
#define BANK_CHANGE_TABLES 64

typedef struct BankEpisode {
  sqlite3 *db;
  const KnowledgeBase *kb;  // shared, read-only; may be NULL (tool then errors)
  // Authentication: empty until verify_customer succeeds (or the task layer
  // calls bank_episode_authenticate). Every customer tool filters by it.
  char customer_id[BANK_ID_MAX];
  int failed_verifications;  // 3 failures lock verification for the episode
  BankConfirmMode confirm_mode;
  int confirmation_given;    // set by the env layer, consumed by charged writes
  int transferred_to_human;  // set by transfer_to_human_agent
  BankCall *calls;
  int num_calls, cap_calls;
  struct BankStmtCache *stmts;  // prepared statements of this connection (bank_stmt.c)
  BankPool *pool;               // set when the episode came from bank_pool_acquire
  // Every row inserted, updated or deleted since the copy was opened or last
  // released to its pool (tools and fixture SQL alike; rolled-back writes
  // stay listed, which costs a lookup and changes nothing), so the db check
  // can digest what the episode touched instead of the whole bank
  // (env/episode.c). changes_untracked: a write the hook may not see (a
  // fixture DELETE, which SQLite can run as a truncate without calling the
  // hook) or the log could not grow; the check then digests every row.
  BankChange *changes;
  int num_changes, cap_changes;
  char *change_tables[BANK_CHANGE_TABLES];
  int num_change_tables;
  int changes_untracked;
  // bank_episode_today's last answer ("" when unknown), kept only for a
  // private in-memory copy (cache_today): every tool call reads the clock,
  // which only a write to the clock table changes there (the change hook
  // empties it, and so does a pooled copy's rollback). A bank file another
  // process may write is read every time.
  char today[11];
  int cache_today;
} BankEpisode;

// Builds the seeded population (30 customers by default, more when the
// image seed says so, with varied KYC, accounts, deposits, loans, cards,
// mandates, cheques, policies, schemes) and serializes it. Same seed ->
// identical bytes. Images above 30 customers also carry customer indexes
// (bank_schema_index_sql) so per-customer lookups stay cheap.
int bank_image_build(uint64_t seed, BankImage *image, FimiError *err);
void bank_image_free(BankImage *image);

// A private copy of the image: a fresh :memory: connection over a malloc'd
// copy of the bytes. Copies never share writes. kb may be NULL.
int bank_episode_open(const BankImage *image, const KnowledgeBase *kb, BankEpisode **out, FimiError *err);
void bank_episode_close(BankEpisode *ep);

// The fast path for many episodes on one image (one pool per thread): a pool
// keeps deserialized connections with their parsed schema and prepared
// statements. acquire starts a transaction on an idle connection (or a new
// copy); release rolls it back and clears the session state, so the next
// episode sees the image again. Episodes from one pool never share writes
// while both are out (each has its own connection). Fixture SQL on a pooled
// episode must not contain BEGIN/COMMIT: a connection whose transaction was
// ended early is discarded at release instead of reused.
int bank_pool_create(const BankImage *image, const KnowledgeBase *kb, BankPool **out, FimiError *err);
int bank_pool_acquire(BankPool *pool, BankEpisode **out, FimiError *err);
void bank_pool_release(BankEpisode *ep);
void bank_pool_free(BankPool *pool);
// A copy of the pool's image that nothing writes (opened on first use,
// query_only), for comparing an episode's rows with the image's.
BankEpisode *bank_pool_view(BankPool *pool, FimiError *err);
// One pointer of per-pool state for a layer above (the db check's baseline),
// freed with free_fn by bank_pool_free.
void *bank_pool_user(BankPool *pool);
void bank_pool_set_user(BankPool *pool, void *user, void (*free_fn)(void *));

// Prepared statements of an episode connection, cached by SQL text
// (bank_stmt.c). get returns a reset statement (NULL when it does not
// prepare); put resets it for the next use (or finalizes a one-off).
sqlite3_stmt *bank_stmt_get(BankEpisode *ep, const char *sql);
void bank_stmt_put(BankEpisode *ep, sqlite3_stmt *stmt);
void bank_stmt_cache_free(BankEpisode *ep);

// The bank as a file (bank_file.c), for servers shared by many sessions and
// processes. create writes the image to a new file in WAL mode (fails when
// the path exists; of two concurrent creators one wins). open_file opens an
// existing bank file (never creates one) with its own connection and a busy
// timeout; session state starts empty as in bank_episode_open. Writers on
// one file are serialized by SQLite's locks.
int bank_file_create(const BankImage *image, const char *path, FimiError *err);
int bank_episode_open_file(const char *path, const KnowledgeBase *kb, int busy_timeout_ms, BankEpisode **out,
                           FimiError *err);
// Frees the call log (a long-lived session keeps no history it never reads).
void bank_episode_clear_calls(BankEpisode *ep);

// Fixture edits for the task layer: trusted SQL (from task files, never from
// the model) run on the episode copy, e.g. an UPDATE that makes a KYC lapse.
int bank_episode_exec(BankEpisode *ep, const char *sql, FimiError *err);
// Marks the customer as authenticated (tasks that start logged in). Fails if
// the customer does not exist.
int bank_episode_authenticate(BankEpisode *ep, const char *customer_id, FimiError *err);
// The episode's date (clock table), "YYYY-MM-DD".
int bank_episode_today(BankEpisode *ep, char out[11], FimiError *err);
int bank_episode_set_today(BankEpisode *ep, const char *date, FimiError *err);
// Next id of a counter ("txn", "fd", ...): prefix + zero-padded number.
int bank_next_id(BankEpisode *ep, const char *counter, char *out, size_t out_size, FimiError *err);
// Serialized bytes of the episode database (malloc'd; caller frees).
int bank_episode_serialize(BankEpisode *ep, unsigned char **bytes, int64_t *size, FimiError *err);
// A digest (FNV-1a over every row, in primary-key order) of the tables tools
// can change: equal digests mean equal states, whatever the page layout
// (fresh and pooled copies lay pages out differently). For the reward's
// database check and tests.
int bank_episode_digest(BankEpisode *ep, uint64_t *digest, FimiError *err);
// Runs PRAGMA integrity_check; 0 when "ok".
int bank_episode_check_integrity(BankEpisode *ep, FimiError *err);
// Demo credentials of a seeded customer (the n-th, 0-based, in id order), for
// tests, benchmarks and tasks: customer id, date of birth, mobile.
int bank_episode_customer_credentials(BankEpisode *ep, int n, char id[BANK_ID_MAX], char dob[11], char mobile[16],
                                      FimiError *err);

// Prepares, binds and steps one statement to completion. `types` has one
// letter per parameter: 's' text (const char *, NULL binds NULL), 'i' int,
// 'l' int64_t. Used by the seeder and the tools (never with SQL built from
// untrusted text: values always go through bindings).
int bank_sql_run(sqlite3 *db, FimiError *err, const char *sql, const char *types, ...);

// bank_sql_run with the prepared statement kept in `cache`, keyed by the
// SQL text's address (string literals), for code that runs the same few
// statements thousands of times (the seeder). Free with bank_sql_cache_free.
#define BANK_SQL_CACHE_MAX 64
typedef struct BankSqlCache {
  const char *sql[BANK_SQL_CACHE_MAX];
  sqlite3_stmt *stmt[BANK_SQL_CACHE_MAX];
  int count;
} BankSqlCache;
int bank_sql_run_cached(BankSqlCache *cache, sqlite3 *db, FimiError *err, const char *sql, const char *types, ...);
void bank_sql_cache_free(BankSqlCache *cache);

// Seeds a freshly created schema (env/bank/seed.c). Up to 30 customers use
// the original id layout (one serial shared by every kind of id in the last
// 5 digits); larger populations number each kind of id on its own, which
// holds BANK_MAX_CUSTOMERS customers.
int bank_seed_population(sqlite3 *db, uint64_t seed, int num_customers, FimiError *err);

#endif
