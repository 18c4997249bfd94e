// rl/env_local.c: the in-process EnvClient (rl/env_client.h): episodes on
// one EnvWorld in this process, kept in a table by the caller's episode id.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/progress.h"
#include "env/episode.h"
#include "rl/env_client.h"

typedef struct LocalEpisode {
  int64_t id;
  EnvEpisode *ep;
} LocalEpisode;

typedef struct LocalClient {
  EnvWorld *world;
  const TaskList *tasks;
  LocalEpisode *open;  // open episodes, unordered
  int num_open, cap_open;
  double *env_seconds;  // the EnvClient's counter
} LocalClient;

void env_reply_clear(EnvReply *reply) {
  free(reply->text);
  memset(reply, 0, sizeof *reply);
}

static char *dup_text(const char *s) {
  size_t n = strlen(s);
  char *copy = malloc(n + 1);
  if (copy) memcpy(copy, s, n + 1);
  return copy;
}

static int find_open(const LocalClient *c, int64_t id) {
  for (int i = 0; i < c->num_open; i++)
    if (c->open[i].id == id) return i;
  return -1;
}

static void close_at(LocalClient *c, int i) {
  env_close(c->open[i].ep);
  c->open[i] = c->open[--c->num_open];
}

// An episode the environment could not run: recorded in the reply, closed.
static void fail_reply(EnvReply *out, const char *what, const FimiError *e) {
  out->failed = 1;
  out->done = 1;
  snprintf(out->error, sizeof out->error, "%.128s: %s", what, e->message);
}

static int local_open(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err) {
  LocalClient *c = ctx;
  for (int i = 0; i < n; i++) {
    memset(&out[i], 0, sizeof out[i]);
    if (find_open(c, req[i].episode) >= 0)
      return fimi_fail(err, "env client: episode %lld is already open", (long long)req[i].episode);
    if (req[i].task < 0 || req[i].task >= c->tasks->count) {
      FimiError e = {0};
      fimi_fail(&e, "task index %d outside the %d tasks", req[i].task, c->tasks->count);
      fail_reply(&out[i], "open", &e);
      continue;
    }
    if (c->num_open == c->cap_open) {
      int cap = c->cap_open ? 2 * c->cap_open : 16;
      LocalEpisode *bigger = realloc(c->open, (size_t)cap * sizeof *bigger);
      if (!bigger) return fimi_fail(err, "env client: out of memory");
      c->open = bigger;
      c->cap_open = cap;
    }
    const Task *task = &c->tasks->tasks[req[i].task];
    const char *first = NULL;
    EnvEpisode *ep = NULL;
    FimiError e = {0};
    double t0 = monotonic_seconds();
    int rc = env_open(c->world, task, req[i].seed, &ep, &first, &e);
    if (rc == 0 && (rc = env_set_tool_syntax(ep, req[i].syntax, &e)) != 0) env_close(ep);
    *c->env_seconds += monotonic_seconds() - t0;
    if (rc != 0) {
      fail_reply(&out[i], task->id, &e);
      continue;
    }
    if (!(out[i].text = dup_text(first))) {
      env_close(ep);
      return fimi_fail(err, "env client: out of memory");
    }
    out[i].kind = ENV_REPLY_CUSTOMER;
    c->open[c->num_open++] = (LocalEpisode){req[i].episode, ep};
  }
  return 0;
}

static int local_step(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err) {
  LocalClient *c = ctx;
  for (int i = 0; i < n; i++) {
    memset(&out[i], 0, sizeof out[i]);
    int at = find_open(c, req[i].episode);
    if (at < 0) return fimi_fail(err, "env client: episode %lld is not open", (long long)req[i].episode);
    EnvObservation obs;
    FimiError e = {0};
    double t0 = monotonic_seconds();
    int rc = env_step(c->open[at].ep, req[i].text, req[i].len, &obs, &e);
    *c->env_seconds += monotonic_seconds() - t0;
    if (rc != 0) {
      fail_reply(&out[i], env_episode_task(c->open[at].ep)->id, &e);
      close_at(c, at);
      continue;
    }
    if (!(out[i].text = dup_text(obs.text ? obs.text : ""))) return fimi_fail(err, "env client: out of memory");
    out[i].kind = obs.kind == ENV_OBS_TOOL ? ENV_REPLY_TOOL : ENV_REPLY_CUSTOMER;
    out[i].done = obs.done;
    out[i].end = obs.end;
    out[i].turns = env_episode_turns_used(c->open[at].ep);
  }
  return 0;
}

static int local_finish(void *ctx, const EnvRequest *req, int n, EnvReply *out, FimiError *err) {
  LocalClient *c = ctx;
  for (int i = 0; i < n; i++) {
    memset(&out[i], 0, sizeof out[i]);
    int at = find_open(c, req[i].episode);
    if (at < 0) return fimi_fail(err, "env client: episode %lld is not open", (long long)req[i].episode);
    FimiError e = {0};
    double t0 = monotonic_seconds();
    int rc = env_score(c->open[at].ep, &out[i].reward, &e);
    *c->env_seconds += monotonic_seconds() - t0;
    out[i].done = 1;
    out[i].turns = env_episode_turns_used(c->open[at].ep);
    if (rc != 0) {
      memset(&out[i].reward, 0, sizeof out[i].reward);
      fail_reply(&out[i], env_episode_task(c->open[at].ep)->id, &e);
    }
    out[i].end = out[i].reward.end;
    close_at(c, at);
  }
  return 0;
}

static void local_free(void *ctx) {
  LocalClient *c = ctx;
  if (!c) return;
  while (c->num_open > 0) close_at(c, c->num_open - 1);
  free(c->open);
  env_world_free(c->world);
  free(c);
}

int env_client_local_create(EnvClient *client, const TaskList *tasks, FimiError *err) {
  memset(client, 0, sizeof *client);
  LocalClient *c = fimi_calloc(1, sizeof *c, err);
  if (!c) return -1;
  if (env_world_create(&c->world, err) != 0) {
    free(c);
    return -1;
  }
  c->tasks = tasks;
  c->env_seconds = &client->env_seconds;
  *client = (EnvClient){local_open, local_step, local_finish, local_free, c, tasks, 0};
  return 0;
}

EnvWorld *env_client_local_world(EnvClient *client) { return ((LocalClient *)client->ctx)->world; }

void env_client_free(EnvClient *client) {
  if (client->free) client->free(client->ctx);
  memset(client, 0, sizeof *client);
}
