// rl/env_mpi.c: episodes on env ranks over MPI (rl/env_mpi.h; docs/grpo.md,
// "Environment ranks"). The train rank's EnvClient packs each batch into one
// request message per partner env rank and waits for one reply message from
// each; env_rank_serve holds the open episodes of all its partner train ranks
// on one EnvWorld and answers every message with one reply.
//
// Wire format (point-to-point on the world communicator, MPI_BYTE, native
// byte order: every rank runs the same binary on the same kind of host):
//   request (tag ENV_TAG_REQUEST, train -> env):
//     u32 magic, u32 op (OPEN, STEP, FINISH, BYE), u32 n, then n times
//     i64 episode, i32 task, i32 syntax (open: ToolCallSyntax), u64 seed, u64 len,
//     len bytes of agent turn
//   reply (tag ENV_TAG_REPLY, env -> train; none for BYE):
//     u32 magic, u32 op (the request's, or ERROR), u32 n, f64 env_seconds, then
//     n times i32 kind, i32 done, i32 end, i32 turns, i32 failed,
//     u32 error_len, error_len bytes, u64 text_len (ENV_NO_TEXT: no text),
//     text_len bytes, then the RewardBreakdown as raw struct bytes (the same
//     binary on both sides, so the same layout and padding).
//   An ERROR reply (a request the env rank could not parse, or one from a rank
//   that is not a partner) has n = 0 and the reason as its one error string.
#include "rl/env_mpi.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/progress.h"
#include "env/episode.h"

#define ENV_TAG_REQUEST 7411
#define ENV_TAG_REPLY 7412
#define ENV_MAGIC 0x464e5631u  // "1VNF"
#define ENV_NO_TEXT UINT64_MAX

enum { OP_OPEN = 1, OP_STEP = 2, OP_FINISH = 3, OP_BYE = 4, OP_ERROR = 5 };

static const char *op_name(uint32_t op) {
  switch (op) {
    case OP_OPEN: return "open";
    case OP_STEP: return "step";
    case OP_FINISH: return "finish";
    case OP_BYE: return "goodbye";
    case OP_ERROR: return "error";
    default: return "unknown";
  }
}

// ---- byte buffers ----------------------------------------------------------

typedef struct Buf {
  unsigned char *data;
  size_t len, cap;
  int oom;  // an allocation failed: the contents are incomplete
} Buf;

static void buf_put(Buf *b, const void *src, size_t n) {
  if (b->oom) return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    unsigned char *bigger = realloc(b->data, cap);
    if (!bigger) {
      b->oom = 1;
      return;
    }
    b->data = bigger;
    b->cap = cap;
  }
  if (n) memcpy(b->data + b->len, src, n);
  b->len += n;
}
static void put_u32(Buf *b, uint32_t v) { buf_put(b, &v, sizeof v); }
static void put_i32(Buf *b, int32_t v) { buf_put(b, &v, sizeof v); }
static void put_u64(Buf *b, uint64_t v) { buf_put(b, &v, sizeof v); }
static void put_i64(Buf *b, int64_t v) { buf_put(b, &v, sizeof v); }
static void put_f64(Buf *b, double v) { buf_put(b, &v, sizeof v); }

// Bounds-checked reads: a short message sets bad and reads zeros.
typedef struct Reader {
  const unsigned char *data;
  size_t len, at;
  int bad;
} Reader;

static const void *take(Reader *r, size_t n) {
  if (r->bad || n > r->len - r->at) {
    r->bad = 1;
    return NULL;
  }
  const void *p = r->data + r->at;
  r->at += n;
  return p;
}
// get_u32 ... get_f64: one fixed-size value, 0 when the message is short.
#define READER_GET(name, type)                \
  static type name(Reader *r) {               \
    type v = 0;                               \
    const void *p = take(r, sizeof v);        \
    if (p) memcpy(&v, p, sizeof v);           \
    return v;                                 \
  }
READER_GET(get_u32, uint32_t)
READER_GET(get_i32, int32_t)
READER_GET(get_u64, uint64_t)
READER_GET(get_i64, int64_t)
READER_GET(get_f64, double)
#undef READER_GET

// Receives the next message from `source` (may be MPI_ANY_SOURCE) with `tag`
// into *data (malloc'd); *source_out the sender.
static int recv_message(Communicator *world, int source, int tag, unsigned char **data, size_t *len, int *source_out,
                        FimiError *err) {
  MPI_Status status;
  if (comm_check_mpi(MPI_Probe(source, tag, world->mpi, &status), "MPI_Probe", world, err) != 0) return -1;
  int count = 0;
  if (comm_check_mpi(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count", world, err) != 0) return -1;
  if (count < 0) return fimi_fail(err, "env ranks: message of unknown size from rank %d", status.MPI_SOURCE);
  unsigned char *buf = fimi_malloc(count ? (size_t)count : 1, err);
  if (!buf) return -1;
  if (comm_check_mpi(MPI_Recv(buf, count, MPI_BYTE, status.MPI_SOURCE, tag, world->mpi, MPI_STATUS_IGNORE), "MPI_Recv",
                     world, err) != 0) {
    free(buf);
    return -1;
  }
  *data = buf;
  *len = (size_t)count;
  if (source_out) *source_out = status.MPI_SOURCE;
  return 0;
}

static int check_sendable(const Buf *b, FimiError *err) {
  if (b->oom) return fimi_fail(err, "env ranks: out of memory building a message");
  if (b->len > (size_t)INT_MAX) return fimi_fail(err, "env ranks: message of %zu bytes exceeds MPI's int count", b->len);
  return 0;
}

// ---- the train rank's client -----------------------------------------------

typedef struct MpiClient {
  const TaskList *tasks;
  const DistRoles *roles;
  Communicator *world;
  double *env_seconds;  // the EnvClient's counter
  int num_partners;
  Buf *out;       // [num_partners]: the request message being built
  int **index;    // [num_partners][n]: request index of each entry, in order
  int *count;     // [num_partners]: entries in this batch
  int index_cap;  // capacity of each index row
  MPI_Request *sends;
} MpiClient;

static int route(const MpiClient *c, int64_t episode) {
  int64_t k = episode % c->num_partners;
  return (int)(k < 0 ? k + c->num_partners : k);
}

static int parse_reply_entry(Reader *r, EnvReply *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  out->kind = (EnvReplyKind)get_i32(r);
  out->done = get_i32(r);
  out->end = (TaskEnd)get_i32(r);
  out->turns = get_i32(r);
  out->failed = get_i32(r);
  uint32_t error_len = get_u32(r);
  const void *error = take(r, error_len);
  if (error && error_len >= sizeof out->error) r->bad = 1;
  if (!r->bad) memcpy(out->error, error, error_len);
  uint64_t text_len = get_u64(r);
  if (text_len != ENV_NO_TEXT) {
    const void *text = take(r, (size_t)text_len);
    if (!r->bad) {
      if (!(out->text = fimi_malloc((size_t)text_len + 1, err))) return -1;
      memcpy(out->text, text, (size_t)text_len);
      out->text[text_len] = '\0';
    }
  }
  const void *reward = take(r, sizeof out->reward);
  if (reward) memcpy(&out->reward, reward, sizeof out->reward);
  return 0;
}

static int mpi_call(MpiClient *c, uint32_t op, const EnvRequest *req, int n, EnvReply *out, FimiError *err) {
  if (n < 0) return fimi_fail(err, "env client: negative batch size %d", n);
  for (int i = 0; i < n; i++) memset(&out[i], 0, sizeof out[i]);
  if (n == 0) return 0;
  if (n > c->index_cap) {
    for (int k = 0; k < c->num_partners; k++) {
      int *bigger = realloc(c->index[k], (size_t)n * sizeof *bigger);
      if (!bigger) return fimi_fail(err, "env client: out of memory");
      c->index[k] = bigger;
    }
    c->index_cap = n;
  }
  for (int k = 0; k < c->num_partners; k++) {
    c->count[k] = 0;
    c->out[k].len = 0;
    c->out[k].oom = 0;
  }
  for (int i = 0; i < n; i++) {
    int k = route(c, req[i].episode);
    c->index[k][c->count[k]++] = i;
  }
  // One message per partner that has requests in this batch.
  int num_sends = 0, rc = 0;
  for (int k = 0; k < c->num_partners; k++) {
    if (c->count[k] == 0) continue;
    Buf *b = &c->out[k];
    put_u32(b, ENV_MAGIC);
    put_u32(b, op);
    put_u32(b, (uint32_t)c->count[k]);
    for (int j = 0; j < c->count[k]; j++) {
      const EnvRequest *q = &req[c->index[k][j]];
      size_t len = q->text ? q->len : 0;
      put_i64(b, q->episode);
      put_i32(b, q->task);
      put_i32(b, (int32_t)q->syntax);
      put_u64(b, q->seed);
      put_u64(b, len);
      buf_put(b, q->text, len);
    }
    if (check_sendable(b, err) != 0) {
      rc = -1;
      break;
    }
    if (comm_check_mpi(MPI_Isend(b->data, (int)b->len, MPI_BYTE, c->roles->partners[k], ENV_TAG_REQUEST, c->world->mpi,
                                 &c->sends[num_sends]),
                       "MPI_Isend", c->world, err) != 0) {
      rc = -1;
      break;
    }
    num_sends++;
  }
  // Replies, one per partner messaged, put back in request order.
  for (int k = 0; k < c->num_partners && rc == 0; k++) {
    if (c->count[k] == 0) continue;
    unsigned char *data = NULL;
    size_t len = 0;
    int partner = c->roles->partners[k];
    if (recv_message(c->world, partner, ENV_TAG_REPLY, &data, &len, NULL, err) != 0) {
      rc = -1;
      break;
    }
    Reader r = {data, len, 0, 0};
    uint32_t magic = get_u32(&r), rop = get_u32(&r), rn = get_u32(&r);
    double seconds = get_f64(&r);
    if (!r.bad && magic == ENV_MAGIC && rop == OP_ERROR) {
      EnvReply e;
      if (parse_reply_entry(&r, &e, err) == 0)
        fimi_fail(err, "env rank %d refused the %s request: %s", partner, op_name(op), e.error);
      env_reply_clear(&e);
      free(data);
      rc = -1;
      break;
    }
    if (r.bad || magic != ENV_MAGIC || rop != op || rn != (uint32_t)c->count[k]) {
      fimi_fail(err, "env rank %d: malformed %s reply (%zu bytes, %u entries for %d requests)", partner, op_name(op),
                len, rn, c->count[k]);
      free(data);
      rc = -1;
      break;
    }
    *c->env_seconds += seconds;
    for (int j = 0; j < c->count[k] && rc == 0; j++) {
      EnvReply *o = &out[c->index[k][j]];
      if (parse_reply_entry(&r, o, err) != 0) rc = -1;
      else if (r.bad)
        rc = fimi_fail(err, "env rank %d: truncated %s reply (%zu bytes)", partner, op_name(op), len);
    }
    if (rc == 0 && r.at != r.len)
      rc = fimi_fail(err, "env rank %d: %zu stray bytes after the %s reply", partner, r.len - r.at, op_name(op));
    free(data);
  }
  if (num_sends > 0) {
    FimiError wait_err = {0};
    int wrc = comm_check_mpi(MPI_Waitall(num_sends, c->sends, MPI_STATUSES_IGNORE), "MPI_Waitall", c->world, &wait_err);
    if (wrc != 0 && rc == 0) {
      *err = wait_err;
      rc = -1;
    }
  }
  if (rc != 0)
    for (int i = 0; i < n; i++) env_reply_clear(&out[i]);
  return rc;
}

static int mpi_open(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err) {
  return mpi_call(ctx, OP_OPEN, req, n, out, err);
}
static int mpi_step(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err) {
  return mpi_call(ctx, OP_STEP, req, n, out, err);
}
static int mpi_finish(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err) {
  return mpi_call(ctx, OP_FINISH, req, n, out, err);
}

// Says goodbye to every partner (the env ranks close what is still open).
static void mpi_free(void *ctx) {
  MpiClient *c = ctx;
  if (!c) return;
  for (int k = 0; k < c->num_partners; k++) {
    Buf b = {0};
    put_u32(&b, ENV_MAGIC);
    put_u32(&b, OP_BYE);
    put_u32(&b, 0);
    FimiError err = {0};
    if (check_sendable(&b, &err) != 0 ||
        comm_check_mpi(MPI_Send(b.data, (int)b.len, MPI_BYTE, c->roles->partners[k], ENV_TAG_REQUEST, c->world->mpi),
                       "MPI_Send", c->world, &err) != 0)
      log_warn("env client: goodbye to env rank %d: %s", c->roles->partners[k], err.message);
    free(b.data);
  }
  for (int k = 0; k < c->num_partners; k++) {
    free(c->out[k].data);
    free(c->index[k]);
  }
  free(c->out);
  free(c->index);
  free(c->count);
  free(c->sends);
  free(c);
}

int env_client_mpi_create(EnvClient *client, const TaskList *tasks, const DistRoles *roles, Communicator *world,
                          FimiError *err) {
  memset(client, 0, sizeof *client);
  if (roles->role != ROLE_TRAIN) return fimi_fail(err, "env client: world rank %d is not a train rank", roles->world_rank);
  if (roles->num_partners < 1)
    return fimi_fail(err, "env client: train rank %d has no env rank (set dist.env_ranks or dist.roles)",
                     roles->world_rank);
  MpiClient *c = fimi_calloc(1, sizeof *c, err);
  if (!c) return -1;
  c->tasks = tasks;
  c->roles = roles;
  c->world = world;
  c->env_seconds = &client->env_seconds;
  c->num_partners = roles->num_partners;
  c->out = calloc((size_t)c->num_partners, sizeof *c->out);
  c->index = calloc((size_t)c->num_partners, sizeof *c->index);
  c->count = calloc((size_t)c->num_partners, sizeof *c->count);
  c->sends = calloc((size_t)c->num_partners, sizeof *c->sends);
  if (!c->out || !c->index || !c->count || !c->sends) {
    free(c->out);
    free(c->index);
    free(c->count);
    free(c->sends);
    free(c);
    return fimi_fail(err, "env client: out of memory");
  }
  *client = (EnvClient){mpi_open, mpi_step, mpi_finish, mpi_free, c, tasks, 0};
  return 0;
}

// ---- the env rank's server -------------------------------------------------

typedef struct ServedEpisode {
  int source;  // world rank of the train rank that opened it
  int64_t id;  // its episode id
  EnvEpisode *ep;
} ServedEpisode;

typedef struct Server {
  EnvWorld *world;
  const TaskList *tasks;
  ServedEpisode *open;  // unordered
  int num_open, cap_open;
  EnvServeStats stats;
  double batch_seconds;  // env_seconds of the message being answered
} Server;

static int find_served(const Server *s, int source, int64_t id) {
  for (int i = 0; i < s->num_open; i++)
    if (s->open[i].source == source && s->open[i].id == id) return i;
  return -1;
}

static void close_served(Server *s, int i) {
  env_close(s->open[i].ep);
  s->open[i] = s->open[--s->num_open];
}

static int close_source(Server *s, int source) {
  int closed = 0;
  for (int i = s->num_open - 1; i >= 0; i--)
    if (s->open[i].source == source) {
      close_served(s, i);
      closed++;
    }
  return closed;
}

// The same text as rl/env_local.c's fail_reply, so both clients agree.
static void fail_reply(EnvReply *out, const char *what, const FimiError *e) {
  out->failed = 1;
  out->done = 1;
  snprintf(out->error, sizeof out->error, "%.128s: %s", what, e->message);
}

// A request the client should never send (an episode open twice, or not
// open): a failed reply, the env rank carries on.
static void fail_request(EnvReply *out, const char *what, int64_t id, const char *state) {
  FimiError e = {0};
  fimi_fail(&e, "episode %lld is %s", (long long)id, state);
  fail_reply(out, what, &e);
}

// One request, as rl/env_local.c answers it; out->text points into the
// episode (valid until its next call), copied by put_reply right away.
// Returns -1 only when out of memory.
static int serve_open(Server *s, int source, int64_t id, int task_index, int syntax, uint64_t seed, EnvReply *out,
                      FimiError *err) {
  if (find_served(s, source, id) >= 0) {
    fail_request(out, "open", id, "already open");
    return 0;
  }
  if (task_index < 0 || task_index >= s->tasks->count) {
    FimiError e = {0};
    fimi_fail(&e, "task index %d outside the %d tasks", task_index, s->tasks->count);
    fail_reply(out, "open", &e);
    return 0;
  }
  if (s->num_open == s->cap_open) {
    int cap = s->cap_open ? 2 * s->cap_open : 64;
    ServedEpisode *bigger = realloc(s->open, (size_t)cap * sizeof *bigger);
    if (!bigger) return fimi_fail(err, "env rank: out of memory");
    s->open = bigger;
    s->cap_open = cap;
  }
  const Task *task = &s->tasks->tasks[task_index];
  const char *first = NULL;
  EnvEpisode *ep = NULL;
  FimiError e = {0};
  double t0 = monotonic_seconds();
  int rc = env_open(s->world, task, seed, &ep, &first, &e);
  if (rc == 0 && (rc = env_set_tool_syntax(ep, (ToolCallSyntax)syntax, &e)) != 0) env_close(ep);
  s->batch_seconds += monotonic_seconds() - t0;
  if (rc != 0) {
    fail_reply(out, task->id, &e);
    return 0;
  }
  out->text = (char *)first;
  out->kind = ENV_REPLY_CUSTOMER;
  s->open[s->num_open++] = (ServedEpisode){source, id, ep};
  s->stats.episodes++;
  return 0;
}

static void serve_step(Server *s, int source, int64_t id, const char *text, size_t len, EnvReply *out) {
  int at = find_served(s, source, id);
  if (at < 0) {
    fail_request(out, "step", id, "not open");
    return;
  }
  EnvObservation obs;
  FimiError e = {0};
  double t0 = monotonic_seconds();
  int rc = env_step(s->open[at].ep, text, len, &obs, &e);
  s->batch_seconds += monotonic_seconds() - t0;
  if (rc != 0) {
    fail_reply(out, env_episode_task(s->open[at].ep)->id, &e);
    close_served(s, at);
    return;
  }
  out->text = (char *)(obs.text ? obs.text : "");
  out->kind = obs.kind == ENV_OBS_TOOL ? ENV_REPLY_TOOL : ENV_REPLY_CUSTOMER;
  out->done = obs.done;
  out->end = obs.end;
  out->turns = env_episode_turns_used(s->open[at].ep);
}

// Scores the episode; the caller closes it after copying the reply.
static int serve_finish(Server *s, int source, int64_t id, EnvReply *out) {
  int at = find_served(s, source, id);
  if (at < 0) {
    fail_request(out, "finish", id, "not open");
    return -1;
  }
  FimiError e = {0};
  double t0 = monotonic_seconds();
  int rc = env_score(s->open[at].ep, &out->reward, &e);
  s->batch_seconds += monotonic_seconds() - t0;
  out->done = 1;
  out->turns = env_episode_turns_used(s->open[at].ep);
  if (rc != 0) {
    memset(&out->reward, 0, sizeof out->reward);
    fail_reply(out, env_episode_task(s->open[at].ep)->id, &e);
  }
  out->end = out->reward.end;
  return at;
}

static void put_reply(Buf *b, const EnvReply *r) {
  put_i32(b, (int32_t)r->kind);
  put_i32(b, r->done);
  put_i32(b, (int32_t)r->end);
  put_i32(b, r->turns);
  put_i32(b, r->failed);
  size_t error_len = strnlen(r->error, sizeof r->error - 1);
  put_u32(b, (uint32_t)error_len);
  buf_put(b, r->error, error_len);
  if (r->text) {
    size_t len = strlen(r->text);
    put_u64(b, len);
    buf_put(b, r->text, len);
  } else {
    put_u64(b, ENV_NO_TEXT);
  }
  buf_put(b, &r->reward, sizeof r->reward);
}

static int send_reply(Communicator *world, int dest, Buf *b, FimiError *err) {
  if (check_sendable(b, err) != 0) return -1;
  return comm_check_mpi(MPI_Send(b->data, (int)b->len, MPI_BYTE, dest, ENV_TAG_REPLY, world->mpi), "MPI_Send", world,
                        err);
}

static int send_refusal(Communicator *world, int dest, Buf *b, const char *reason, FimiError *err) {
  log_warn("env rank %d: refusing a message from rank %d: %s", world->rank, dest, reason);
  b->len = 0;
  b->oom = 0;
  put_u32(b, ENV_MAGIC);
  put_u32(b, OP_ERROR);
  put_u32(b, 0);
  put_f64(b, 0.0);
  EnvReply r;
  memset(&r, 0, sizeof r);
  r.failed = 1;
  snprintf(r.error, sizeof r.error, "%s", reason);
  put_reply(b, &r);
  return send_reply(world, dest, b, err);
}

// Answers one request message from `source` into b; 1 in *bye for a goodbye.
// Returns -1 on transport or memory errors only.
static int serve_message(Server *s, Communicator *world, int source, const unsigned char *data, size_t len, Buf *b,
                         int *bye, FimiError *err) {
  Reader r = {data, len, 0, 0};
  uint32_t magic = get_u32(&r), op = get_u32(&r), n = get_u32(&r);
  char reason[160];
  if (r.bad || magic != ENV_MAGIC || op < OP_OPEN || op > OP_BYE) {
    snprintf(reason, sizeof reason, "not an env request (%zu bytes)", len);
    return send_refusal(world, source, b, reason, err);
  }
  if (op == OP_BYE) {
    *bye = 1;
    return 0;
  }
  // Check the whole message before running anything, so a malformed one
  // changes no episode.
  Reader scan = r;
  for (uint32_t i = 0; i < n && !scan.bad; i++) {
    get_i64(&scan);
    get_i32(&scan);
    get_i32(&scan);
    get_u64(&scan);
    take(&scan, (size_t)get_u64(&scan));
  }
  if (scan.bad || scan.at != scan.len) {
    snprintf(reason, sizeof reason, "malformed %s request (%zu bytes for %u entries)", op_name(op), len, n);
    return send_refusal(world, source, b, reason, err);
  }
  b->len = 0;
  b->oom = 0;
  put_u32(b, ENV_MAGIC);
  put_u32(b, op);
  put_u32(b, n);
  size_t seconds_at = b->len;
  put_f64(b, 0.0);
  s->batch_seconds = 0;
  for (uint32_t i = 0; i < n; i++) {
    int64_t id = get_i64(&r);
    int32_t task = get_i32(&r);
    int32_t syntax = get_i32(&r);
    uint64_t seed = get_u64(&r);
    size_t text_len = (size_t)get_u64(&r);
    const char *text = take(&r, text_len);
    EnvReply out;
    memset(&out, 0, sizeof out);
    if (op == OP_OPEN) {
      if (serve_open(s, source, id, task, syntax, seed, &out, err) != 0) return -1;
      put_reply(b, &out);
    } else if (op == OP_STEP) {
      serve_step(s, source, id, text ? text : "", text_len, &out);
      put_reply(b, &out);
    } else {
      int at = serve_finish(s, source, id, &out);
      put_reply(b, &out);
      if (at >= 0) close_served(s, at);
    }
    s->stats.requests++;
    if (out.failed) s->stats.failed++;
  }
  s->stats.env_seconds += s->batch_seconds;
  if (!b->oom) memcpy(b->data + seconds_at, &s->batch_seconds, sizeof s->batch_seconds);
  return send_reply(world, source, b, err);
}

int env_rank_serve(const TaskList *tasks, const DistRoles *roles, Communicator *world, struct OpenAIClient *customer,
                   double temperature, EnvServeStats *stats, FimiError *err) {
  if (stats) memset(stats, 0, sizeof *stats);
  if (roles->role != ROLE_ENV) return fimi_fail(err, "env rank: world rank %d is not an env rank", roles->world_rank);
  Server s;
  memset(&s, 0, sizeof s);
  s.tasks = tasks;
  if (env_world_create(&s.world, err) != 0) return -1;
  env_world_set_customer_model(s.world, customer, temperature);
  int *said_bye = calloc((size_t)(roles->num_partners > 0 ? roles->num_partners : 1), sizeof *said_bye);
  if (!said_bye) {
    env_world_free(s.world);
    return fimi_fail(err, "env rank: out of memory");
  }
  int remaining = roles->num_partners, rc = 0;
  Buf b = {0};
  double t_start = monotonic_seconds();
  while (remaining > 0) {
    unsigned char *data = NULL;
    size_t len = 0;
    int source = -1;
    if (recv_message(world, MPI_ANY_SOURCE, ENV_TAG_REQUEST, &data, &len, &source, err) != 0) {
      rc = -1;
      break;
    }
    int k = 0;
    while (k < roles->num_partners && roles->partners[k] != source) k++;
    uint32_t op = 0;
    if (len >= 2 * sizeof(uint32_t)) memcpy(&op, data + sizeof(uint32_t), sizeof op);
    if ((k == roles->num_partners || said_bye[k]) && op == OP_BYE) {
      log_warn("env rank %d: ignoring a goodbye from rank %d, which it does not serve (or already left)", world->rank,
               source);
    } else if (k == roles->num_partners || said_bye[k]) {
      char reason[160];
      snprintf(reason, sizeof reason, "rank %d is not a train rank this env rank serves%s", source,
               k < roles->num_partners ? " (it already said goodbye)" : "");
      rc = send_refusal(world, source, &b, reason, err);
    } else {
      int bye = 0;
      rc = serve_message(&s, world, source, data, len, &b, &bye, err);
      if (bye) {
        said_bye[k] = 1;
        remaining--;
        int closed = close_source(&s, source);
        if (closed) log_debug("env rank %d: train rank %d left %d episodes open; closed", world->rank, source, closed);
      }
    }
    free(data);
    if (rc != 0) break;
  }
  while (s.num_open > 0) close_served(&s, s.num_open - 1);
  log_debug("env rank %d: %lld requests, %lld episodes, %lld failed, %.3f s in the environment of %.3f s",
            world->rank, (long long)s.stats.requests, (long long)s.stats.episodes, (long long)s.stats.failed,
            s.stats.env_seconds, monotonic_seconds() - t_start);
  free(b.data);
  free(s.open);
  free(said_bye);
  env_world_free(s.world);
  if (stats) *stats = s.stats;
  return rc;
}
