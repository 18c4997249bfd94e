// env/bank/pool.c: a pool of episode connections over one image (see
// bank_db.h). Each connection is deserialized once, so its schema stays
// parsed and its prepared statements stay cached; an episode is one
// transaction on it, rolled back at release. Not thread-safe: one pool per
// thread or rank.
#include <stdlib.h>
#include <string.h>

#include "env/bank/db.h"

struct BankPool {
  const BankImage *image;
  const KnowledgeBase *kb;
  BankEpisode **idle;
  int num_idle, cap_idle;
  BankEpisode *view;  // bank_pool_view's unwritten copy
  void *user;
  void (*user_free)(void *);
};

int bank_pool_create(const BankImage *image, const KnowledgeBase *kb, BankPool **out, FimiError *err) {
  *out = NULL;
  if (!image || !image->bytes) return fimi_fail(err, "bank pool: empty image");
  BankPool *pool = fimi_calloc(1, sizeof *pool, err);
  if (!pool) return -1;
  pool->image = image;
  pool->kb = kb;
  *out = pool;
  return 0;
}

// Forget everything the previous episode left in the session state.
static void reset_session(BankEpisode *ep) {
  ep->customer_id[0] = '\0';
  ep->failed_verifications = 0;
  ep->confirm_mode = BANK_CONFIRM_ARGUMENT;
  ep->confirmation_given = 0;
  ep->transferred_to_human = 0;
  for (int i = 0; i < ep->num_calls; i++) {
    free(ep->calls[i].name);
    free(ep->calls[i].arguments);
  }
  ep->num_calls = 0;
  ep->num_changes = 0;  // the rollback undid them
  ep->changes_untracked = 0;
  ep->today[0] = '\0';  // so did it any clock change (no hook sees a rollback)
}

int bank_pool_acquire(BankPool *pool, BankEpisode **out, FimiError *err) {
  BankEpisode *ep = NULL;
  *out = NULL;
  if (pool->num_idle > 0) {
    ep = pool->idle[--pool->num_idle];
  } else if (bank_episode_open(pool->image, pool->kb, &ep, err) != 0) {
    return -1;
  }
  ep->pool = pool;
  if (sqlite3_exec(ep->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
    fimi_fail(err, "bank pool: BEGIN failed: %s", sqlite3_errmsg(ep->db));
    bank_episode_close(ep);
    return -1;
  }
  *out = ep;
  return 0;
}

void bank_pool_release(BankEpisode *ep) {
  if (!ep) return;
  BankPool *pool = ep->pool;
  // autocommit on means the episode's transaction ended early (fixture SQL
  // with COMMIT): its writes are permanent, so the copy is no longer the
  // image and must not be reused.
  int intact = pool && !sqlite3_get_autocommit(ep->db) &&
               sqlite3_exec(ep->db, "ROLLBACK", NULL, NULL, NULL) == SQLITE_OK;
  if (intact && pool->num_idle == pool->cap_idle) {
    int cap = pool->cap_idle ? pool->cap_idle * 2 : 8;
    BankEpisode **grown = realloc(pool->idle, (size_t)cap * sizeof *grown);
    if (grown) pool->idle = grown, pool->cap_idle = cap;
  }
  if (!intact || pool->num_idle == pool->cap_idle) {
    bank_episode_close(ep);
    return;
  }
  reset_session(ep);
  pool->idle[pool->num_idle++] = ep;
}

BankEpisode *bank_pool_view(BankPool *pool, FimiError *err) {
  if (!pool->view) {
    if (bank_episode_open(pool->image, pool->kb, &pool->view, err) != 0) return NULL;
    sqlite3_exec(pool->view->db, "PRAGMA query_only = 1", NULL, NULL, NULL);
  }
  return pool->view;
}

void *bank_pool_user(BankPool *pool) { return pool->user; }

void bank_pool_set_user(BankPool *pool, void *user, void (*free_fn)(void *)) {
  if (pool->user && pool->user_free) pool->user_free(pool->user);
  pool->user = user;
  pool->user_free = free_fn;
}

void bank_pool_free(BankPool *pool) {
  if (!pool) return;
  if (pool->user && pool->user_free) pool->user_free(pool->user);
  bank_episode_close(pool->view);
  for (int i = 0; i < pool->num_idle; i++) bank_episode_close(pool->idle[i]);
  free(pool->idle);
  free(pool);
}
