// mcp/mcp_http_sessions.c: the session table of the HTTP transport (see
// mcp_http_sessions.h). Sessions live in a fixed array of max_sessions
// slots; each carries a reference count (1 for the table, 1 per request
// holding it) so that ending or expiring a session never frees it under a
// request.
#define _GNU_SOURCE  // getrandom
#include "mcp/mcp_http_sessions.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "core/log.h"
#include "env/bank/db.h"

struct McpSession {
  char id[MCP_SESSION_ID_CHARS + 1];  // "" until published
  BankEpisode *bank;                  // this session's own connection
  McpServer *server;
  pthread_mutex_t lock;               // one request at a time
  double last_used;                   // table lock
  int refs;                           // table lock
  int ended;                          // table lock: out of the table
};

struct McpSessionTable {
  McpSessionConfig config;
  pthread_mutex_t lock;
  McpSession **slots;  // config.max_sessions entries, NULL when free
  int count;           // listed sessions
  int opening;         // opened, not yet published or discarded
};

double mcp_sessions_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int mcp_sessions_create(const McpSessionConfig *config, McpSessionTable **out, FimiError *err) {
  *out = NULL;
  if (!config->db_path || !config->kb) return fimi_fail(err, "mcp sessions: no bank file or knowledge base");
  if (config->max_sessions < 1 || !(config->idle_s > 0))
    return fimi_fail(err, "mcp sessions: max_sessions and idle_s must be positive");
  McpSessionTable *table = fimi_calloc(1, sizeof *table, err);
  if (!table) return -1;
  table->slots = fimi_calloc((size_t)config->max_sessions, sizeof *table->slots, err);
  if (!table->slots) {
    free(table);
    return -1;
  }
  table->config = *config;
  pthread_mutex_init(&table->lock, NULL);
  *out = table;
  return 0;
}

static void session_free(McpSession *s) {
  if (!s) return;
  mcp_server_free(s->server);
  bank_episode_close(s->bank);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

void mcp_sessions_free(McpSessionTable *table) {
  if (!table) return;
  for (int i = 0; i < table->config.max_sessions; i++) session_free(table->slots[i]);
  pthread_mutex_destroy(&table->lock);
  free(table->slots);
  free(table);
}

// Under the table lock: takes the session out of its slot and drops the
// table's reference. Returns the session when nothing else holds it (the
// caller frees it outside the lock), else NULL.
static McpSession *unlist(McpSessionTable *table, int slot) {
  McpSession *s = table->slots[slot];
  table->slots[slot] = NULL;
  table->count--;
  s->ended = 1;
  return --s->refs == 0 ? s : NULL;
}

// Under the table lock. Idle sessions that no request holds are unlisted
// into `freed` (room for max_sessions).
static int expire_locked(McpSessionTable *table, double now, McpSession **freed) {
  int n = 0;
  for (int i = 0; i < table->config.max_sessions; i++) {
    McpSession *s = table->slots[i];
    if (s && s->refs == 1 && now - s->last_used > table->config.idle_s) freed[n++] = unlist(table, i);
  }
  return n;
}

static void log_expired(int n, int left) {
  if (n > 0) log_info("mcp http: %d idle session%s expired (%d open)", n, n == 1 ? "" : "s", left);
}

int mcp_sessions_expire(McpSessionTable *table, double now) {
  McpSession **freed = calloc((size_t)table->config.max_sessions, sizeof *freed);
  if (!freed) return 0;  // the next sweep tries again
  pthread_mutex_lock(&table->lock);
  int n = expire_locked(table, now, freed);
  int left = table->count;
  pthread_mutex_unlock(&table->lock);
  for (int i = 0; i < n; i++) session_free(freed[i]);
  free(freed);
  log_expired(n, left);
  return n;
}

// Under the table lock: a place for one more session, expiring idle ones
// when the table is full.
static int reserve_locked(McpSessionTable *table, double now, McpSession **freed, int *n_freed) {
  *n_freed = 0;
  if (table->count + table->opening >= table->config.max_sessions)
    *n_freed = expire_locked(table, now, freed);
  if (table->count + table->opening >= table->config.max_sessions) return -1;
  table->opening++;
  return 0;
}

static McpSession *session_new(const McpSessionConfig *config, FimiError *err) {
  McpSession *s = fimi_calloc(1, sizeof *s, err);
  if (!s) return NULL;
  pthread_mutex_init(&s->lock, NULL);
  if (bank_episode_open_file(config->db_path, config->kb, config->busy_timeout_ms, &s->bank, err) != 0 ||
      mcp_server_create(s->bank, config->max_message_bytes, &s->server, err) != 0) {
    session_free(s);
    return NULL;
  }
  return s;
}

McpSessionOpen mcp_session_open(McpSessionTable *table, double now, McpSession **out, FimiError *err) {
  *out = NULL;
  McpSession **freed = calloc((size_t)table->config.max_sessions, sizeof *freed);
  if (!freed) return fimi_fail(err, "mcp sessions: out of memory"), MCP_SESSION_FAILED;
  int n_freed = 0;
  pthread_mutex_lock(&table->lock);
  int reserved = reserve_locked(table, now, freed, &n_freed);
  int left = table->count;
  pthread_mutex_unlock(&table->lock);
  for (int i = 0; i < n_freed; i++) session_free(freed[i]);
  free(freed);
  log_expired(n_freed, left);
  if (reserved != 0) return MCP_SESSION_FULL;
  // Opening the file takes a while: outside the table lock.
  *out = session_new(&table->config, err);
  if (*out) return MCP_SESSION_OPENED;
  pthread_mutex_lock(&table->lock);
  table->opening--;
  pthread_mutex_unlock(&table->lock);
  return MCP_SESSION_FAILED;
}

// 256 bits from the kernel's CSPRNG as hex.
static int random_id(char *id, FimiError *err) {
  unsigned char bytes[MCP_SESSION_ID_CHARS / 2];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fimi_fail(err, "mcp sessions: getrandom failed: %s", strerror(errno));
    got += (size_t)n;
  }
  static const char hex[] = "0123456789abcdef";
  for (size_t i = 0; i < sizeof bytes; i++) {
    id[2 * i] = hex[bytes[i] >> 4];
    id[2 * i + 1] = hex[bytes[i] & 15];
  }
  id[MCP_SESSION_ID_CHARS] = '\0';
  return 0;
}

int mcp_session_publish(McpSessionTable *table, McpSession *session, double now, FimiError *err) {
  if (random_id(session->id, err) != 0) {
    mcp_session_discard(table, session);
    return -1;
  }
  pthread_mutex_lock(&table->lock);
  table->opening--;
  int slot = 0;
  while (table->slots[slot]) slot++;  // the reservation guarantees a free one
  table->slots[slot] = session;
  table->count++;
  session->refs = 1;
  session->last_used = now;
  int open = table->count;
  pthread_mutex_unlock(&table->lock);
  log_info("mcp http: session %.8s... opened (%d open)", session->id, open);
  return 0;
}

void mcp_session_discard(McpSessionTable *table, McpSession *session) {
  pthread_mutex_lock(&table->lock);
  table->opening--;
  pthread_mutex_unlock(&table->lock);
  session_free(session);
}

// Equal without an early exit, so the time taken says nothing about how
// much of a guessed id was right.
static int id_equal(const char *a, const char *b) {
  unsigned char diff = 0;
  for (int i = 0; i < MCP_SESSION_ID_CHARS; i++) diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

// Under the table lock: the slot of `id`, or -1. Every slot is compared.
static int find_locked(McpSessionTable *table, const char *id) {
  int found = -1;
  for (int i = 0; i < table->config.max_sessions; i++)
    if (table->slots[i] && id_equal(table->slots[i]->id, id)) found = i;
  return found;
}

static int well_formed(const char *id) { return id && strlen(id) == MCP_SESSION_ID_CHARS; }

McpSession *mcp_session_acquire(McpSessionTable *table, const char *id, double now) {
  if (!well_formed(id)) return NULL;
  pthread_mutex_lock(&table->lock);
  int slot = find_locked(table, id);
  McpSession *s = slot >= 0 ? table->slots[slot] : NULL;
  // An idle session past its time is gone, even before the sweeper saw it.
  if (s && s->refs == 1 && now - s->last_used > table->config.idle_s) s = NULL;
  if (s) s->refs++;
  pthread_mutex_unlock(&table->lock);
  if (!s) return NULL;
  pthread_mutex_lock(&s->lock);
  pthread_mutex_lock(&table->lock);
  int ended = s->ended;
  pthread_mutex_unlock(&table->lock);
  if (ended) {  // ended while this request waited for the one before it
    mcp_session_release(table, s, now);
    return NULL;
  }
  return s;
}

void mcp_session_release(McpSessionTable *table, McpSession *session, double now) {
  pthread_mutex_unlock(&session->lock);
  pthread_mutex_lock(&table->lock);
  session->last_used = now;
  int last = --session->refs == 0;
  pthread_mutex_unlock(&table->lock);
  if (last) session_free(session);
}

int mcp_session_end(McpSessionTable *table, const char *id) {
  if (!well_formed(id)) return -1;
  pthread_mutex_lock(&table->lock);
  int slot = find_locked(table, id);
  McpSession *freed = slot >= 0 ? unlist(table, slot) : NULL;
  int open = table->count;
  pthread_mutex_unlock(&table->lock);
  if (slot < 0) return -1;
  log_info("mcp http: session %.8s... ended by the client (%d open)", id, open);
  session_free(freed);
  return 0;
}

int mcp_sessions_count(McpSessionTable *table) {
  pthread_mutex_lock(&table->lock);
  int n = table->count;
  pthread_mutex_unlock(&table->lock);
  return n;
}

McpServer *mcp_session_server(McpSession *session) { return session->server; }
const char *mcp_session_id(const McpSession *session) { return session->id; }
