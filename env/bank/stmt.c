// env/bank/stmt.c: a prepared-statement cache per episode connection.
// Defines bank_stmt_get/bank_stmt_put/bank_stmt_cache_free. Tools run the
// same few hundred SQL texts over and over; preparing one costs more than
// running it, so each connection keeps its statements (keyed by SQL text)
// and only resets them between uses. A statement already in use (a nested
// query with the same text) or a full cache falls back to a one-off
// statement that bank_stmt_put finalizes.
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "env/bank/db.h"

#define CACHE_SLOTS 512  // power of two; at most 3/4 used

typedef struct Slot {
  uint64_t hash;
  char *sql;
  sqlite3_stmt *stmt;
  int busy;
} Slot;

struct BankStmtCache {
  Slot slots[CACHE_SLOTS];
  int used;
};

static uint64_t hash_text(const char *s) { return hash_fnv1a_text(HASH_FNV1A_SHORT_BASIS, s); }

static Slot *find(struct BankStmtCache *cache, const char *sql, uint64_t hash, int *empty) {
  for (uint64_t i = 0; i < CACHE_SLOTS; i++) {
    Slot *slot = &cache->slots[(hash + i) & (CACHE_SLOTS - 1)];
    if (!slot->sql) {
      *empty = 1;
      return slot;
    }
    if (slot->hash == hash && strcmp(slot->sql, sql) == 0) {
      *empty = 0;
      return slot;
    }
  }
  return NULL;
}

sqlite3_stmt *bank_stmt_get(BankEpisode *ep, const char *sql) {
  sqlite3_stmt *stmt = NULL;
  if (!ep->stmts) ep->stmts = calloc(1, sizeof *ep->stmts);
  struct BankStmtCache *cache = ep->stmts;
  uint64_t hash = hash_text(sql);
  int empty = 0;
  Slot *slot = cache ? find(cache, sql, hash, &empty) : NULL;
  if (slot && !empty && !slot->busy) {
    slot->busy = 1;
    return slot->stmt;
  }
  int cacheable = slot && empty && cache->used < CACHE_SLOTS * 3 / 4;
  if (sqlite3_prepare_v3(ep->db, sql, -1, cacheable ? SQLITE_PREPARE_PERSISTENT : 0, &stmt, NULL) != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return NULL;
  }
  if (cacheable && (slot->sql = strdup(sql)) != NULL) {
    slot->hash = hash;
    slot->stmt = stmt;
    slot->busy = 1;
    cache->used++;
  }
  return stmt;
}

void bank_stmt_put(BankEpisode *ep, sqlite3_stmt *stmt) {
  if (!stmt) return;
  const char *sql = sqlite3_sql(stmt);
  int empty = 0;
  Slot *slot = ep->stmts && sql ? find(ep->stmts, sql, hash_text(sql), &empty) : NULL;
  if (slot && !empty && slot->stmt == stmt) {
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    slot->busy = 0;
    return;
  }
  sqlite3_finalize(stmt);
}

void bank_stmt_cache_free(BankEpisode *ep) {
  if (!ep->stmts) return;
  for (int i = 0; i < CACHE_SLOTS; i++) {
    sqlite3_finalize(ep->stmts->slots[i].stmt);
    free(ep->stmts->slots[i].sql);
  }
  free(ep->stmts);
  ep->stmts = NULL;
}
