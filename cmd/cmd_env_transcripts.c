// cmd/cmd_env_transcripts.c: `fimi env transcripts`, oracle conversations for
// SFT warm starts (docs/environment.md, "Oracle transcripts"): plays the
// oracle agent on every task of a task file and writes one JSONL row per
// task, {"task_id","family","catalog","seed","messages":[...]}, ready for
// `fimi data tokenize --kind sft`. The rows render (chat_render_messages) to
// the same ids and loss mask a rollout builds turn by turn (env/transcript.h).
// The output appears only when every task succeeded (written to OUT.tmp,
// then renamed); a failing task is named by its id and its line in the
// task file.
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/fileio.h"
#include "data/chat.h"
#include "data/tokenizer.h"
#include "env/agent_prompt.h"
#include "env/episode.h"
#include "env/tasks/task.h"
#include "env/transcript.h"

static void transcripts_usage(FILE *out) {
  fprintf(out,
          "usage: fimi env transcripts --task-file F --out FILE [--catalog all|area|family] [--seed S]\n"
          "                            [--family PATTERN] [--tokenizer T]\n"
          "  plays the oracle on every task of F and writes one SFT row per task\n"
          "  ({\"messages\": [...]} with tool turns) for `fimi data tokenize --kind sft`\n"
          "    --catalog    tools shown in the system turn (env.catalog; default all)\n"
          "    --seed       episode seed of the first task; task i plays with S + i\n"
          "    --family     only tasks whose family matches PATTERN (shell glob, e.g. 'fd_*')\n"
          "    --tokenizer  also report token counts under this tokenizer.json\n");
}

// One task of the file with the line it came from.
typedef struct LineTask {
  Task task;
  int line;
} LineTask;

static void free_tasks(LineTask *tasks, int n) {
  for (int i = 0; i < n; i++) task_free(&tasks[i].task);
  free(tasks);
}

// Reads a task file keeping each task's line (blank lines skipped).
static int load_tasks(const char *path, LineTask **out, int *count, FimiError *err) {
  size_t size = 0;
  char *text = file_read_all(path, (size_t)1 << 30, &size, err);
  if (!text) return -1;
  LineTask *tasks = NULL;
  int n = 0, cap = 0, line = 0, rc = 0;
  for (size_t pos = 0; pos < size && rc == 0;) {
    line++;
    const char *start = text + pos;
    const char *nl = memchr(start, '\n', size - pos);
    size_t len = nl ? (size_t)(nl - start) : size - pos;
    pos += len + (nl ? 1 : 0);
    size_t k = 0;
    while (k < len && (start[k] == ' ' || start[k] == '\t' || start[k] == '\r')) k++;
    if (k == len) continue;
    if (n == cap) {
      LineTask *bigger = realloc(tasks, sizeof *bigger * (size_t)(cap = cap ? cap * 2 : 64));
      if (!bigger) {
        rc = fimi_fail(err, "out of memory");
        break;
      }
      tasks = bigger;
    }
    cJSON *json = len <= TASK_MAX_LINE && !memchr(start, 0, len) ? cJSON_ParseWithLength(start, len) : NULL;
    if (!json) {
      rc = fimi_fail(err, "%s:%d: not a valid task line (JSON object of at most %d bytes)", path, line, TASK_MAX_LINE);
      break;
    }
    rc = task_from_json(json, &tasks[n].task, err);
    cJSON_Delete(json);
    if (rc != 0) {
      fimi_fail_wrap(err, "%s:%d", path, line);
      break;
    }
    tasks[n++].line = line;
  }
  free(text);
  if (rc == 0 && n == 0) rc = fimi_fail(err, "%s: no tasks", path);
  if (rc != 0) {
    free_tasks(tasks, n);
    return -1;
  }
  *out = tasks;
  *count = n;
  return 0;
}

// Token counts of one row under a tokenizer: the whole conversation, the
// loss-masked tokens and the system turn's content.
typedef struct TokenCounts {
  size_t total, trained, system;
} TokenCounts;

static int count_tokens(ChatBuilder *chat, const cJSON *messages, const char *what, TokenCounts *c, FimiError *err) {
  chat_reset(chat);
  if (chat_render_messages(chat, messages, NULL, what, err) != 0) return -1;
  c->total = chat->ids.len;
  c->trained = 0;
  for (size_t i = 0; i < chat->ids.len; i++) c->trained += chat->mask[i];
  const char *system = cJSON_GetObjectItemCaseSensitive(messages->child, "content")->valuestring;
  TokenIds ids = {0};
  if (tokenizer_encode(chat->tok, system, strlen(system), TOKENIZER_NO_SPECIAL_MATCH, &ids, err) != 0) return -1;
  c->system = ids.len;
  token_ids_free(&ids);
  return 0;
}

int cmd_env_transcripts(int argc, char **argv) {
  const char *task_file = NULL, *out_path = NULL, *catalog = "all", *family = NULL, *tokenizer_path = NULL;
  long seed = 0;
  FimiError err = {0};
  for (int i = 0; i < argc; i++) {
    const char *flag = argv[i];
    if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
      transcripts_usage(stdout);
      return 0;
    }
    if (strcmp(flag, "--task-file") && strcmp(flag, "--out") && strcmp(flag, "--catalog") && strcmp(flag, "--seed") &&
        strcmp(flag, "--family") && strcmp(flag, "--tokenizer")) {
      fprintf(stderr, "fimi env transcripts: unknown option \"%s\" (see fimi env transcripts --help)\n", flag);
      return CLI_EXIT_USAGE;
    }
    const char *v = cli_flag_value(argc, argv, &i, &err);
    if (!v) return cli_fail("env transcripts", &err);
    if (!strcmp(flag, "--task-file")) task_file = v;
    else if (!strcmp(flag, "--out")) out_path = v;
    else if (!strcmp(flag, "--catalog")) catalog = v;
    else if (!strcmp(flag, "--family")) family = v;
    else if (!strcmp(flag, "--tokenizer")) tokenizer_path = v;
    else if (cli_parse_int(flag, v, 0, 2147483647L, &seed, &err) != 0) return cli_fail("env transcripts", &err);
  }
  if (!task_file || !out_path) {
    fprintf(stderr, "fimi env transcripts: --task-file and --out are required (see fimi env transcripts --help)\n");
    return CLI_EXIT_USAGE;
  }
  EnvCatalogMode mode;
  if (env_catalog_mode_parse(catalog, &mode, &err) != 0) {
    fimi_fail_wrap(&err, "--catalog");
    cli_fail("env transcripts", &err);
    return CLI_EXIT_USAGE;
  }

  LineTask *tasks = NULL;
  int count = 0;
  if (load_tasks(task_file, &tasks, &count, &err) != 0) return cli_fail("env transcripts", &err);
  Tokenizer *tok = NULL;
  ChatBuilder chat;
  int have_chat = 0;
  EnvWorld *world = NULL;
  FILE *f = NULL;
  char tmp[4096];
  int rc = 0;
  if (tokenizer_path && (tokenizer_load_file(tokenizer_path, &tok, &err) != 0 || chat_init(&chat, tok, &err) != 0)) {
    rc = cli_fail("env transcripts", &err);
    goto done;
  }
  have_chat = tok != NULL;
  if (env_world_create(&world, &err) != 0) {
    rc = cli_fail("env transcripts", &err);
    goto done;
  }
  if (snprintf(tmp, sizeof tmp, "%s.tmp", out_path) >= (int)sizeof tmp) {
    fprintf(stderr, "fimi env transcripts: %s: path too long\n", out_path);
    rc = CLI_EXIT_FAILURE;
    goto done;
  }
  if (!(f = fopen(tmp, "wb"))) {
    fprintf(stderr, "fimi env transcripts: cannot create %s\n", tmp);
    rc = CLI_EXIT_FAILURE;
    goto done;
  }

  long rows = 0, messages = 0, turns = 0, calls = 0, skipped = 0;
  size_t system_chars = 0, system_min = (size_t)-1, system_max = 0;
  TokenCounts sum = {0};
  for (int i = 0; i < count && rc == 0; i++) {
    const Task *t = &tasks[i].task;
    if (family && fnmatch(family, t->family, 0) != 0) {
      skipped++;
      continue;
    }
    uint64_t episode_seed = (uint64_t)seed + (uint64_t)i;
    cJSON *conv = NULL, *row = NULL;
    EnvTranscriptStats st;
    char what[512];
    snprintf(what, sizeof what, "%s:%d: task %s", task_file, tasks[i].line, t->id);
    if (env_transcript_oracle(world, t, episode_seed, mode, &conv, &st, &err) != 0) {
      // Episode errors often name the task already ("task ID: gold[0] ...").
      if (strncmp(err.message, "task ", 5) == 0 && strstr(err.message, t->id) == err.message + 5)
        fimi_fail_wrap(&err, "%s:%d", task_file, tasks[i].line);
      else
        fimi_fail_wrap(&err, "%s", what);
      rc = cli_fail("env transcripts", &err);
      break;
    }
    TokenCounts c = {0};
    if (have_chat && count_tokens(&chat, conv, what, &c, &err) != 0) {
      cJSON_Delete(conv);
      rc = cli_fail("env transcripts", &err);
      break;
    }
    row = cJSON_CreateObject();
    char *line = NULL;
    if (row && cJSON_AddStringToObject(row, "task_id", t->id) && cJSON_AddStringToObject(row, "family", t->family) &&
        cJSON_AddStringToObject(row, "catalog", env_catalog_mode_name(mode)) &&
        cJSON_AddNumberToObject(row, "seed", (double)episode_seed)) {
      cJSON_AddItemToObject(row, "messages", conv);
      conv = NULL;
      line = cJSON_PrintUnformatted(row);
    }
    cJSON_Delete(conv);
    cJSON_Delete(row);
    if (!line || fputs(line, f) == EOF || fputc('\n', f) == EOF) {
      free(line);
      fprintf(stderr, "fimi env transcripts: %s: cannot write %s\n", what, tmp);
      rc = CLI_EXIT_FAILURE;
      break;
    }
    free(line);
    rows++;
    messages += st.messages;
    turns += st.agent_turns;
    calls += st.tool_calls + st.verbatim_calls;
    system_chars += st.system_chars;
    if (st.system_chars < system_min) system_min = st.system_chars;
    if (st.system_chars > system_max) system_max = st.system_chars;
    sum.total += c.total;
    sum.trained += c.trained;
    sum.system += c.system;
  }
  if (rc == 0 && rows == 0) {
    fprintf(stderr, "fimi env transcripts: no task of %s matches --family %s\n", task_file, family);
    rc = CLI_EXIT_FAILURE;
  }
  int close_rc = fclose(f);
  f = NULL;
  if (rc == 0 && close_rc != 0) {
    fprintf(stderr, "fimi env transcripts: error writing %s\n", tmp);
    rc = CLI_EXIT_FAILURE;
  }
  if (rc == 0 && rename(tmp, out_path) != 0) {
    fprintf(stderr, "fimi env transcripts: cannot rename %s to %s\n", tmp, out_path);
    rc = CLI_EXIT_FAILURE;
  }
  if (rc != 0) {
    remove(tmp);
    goto done;
  }
  printf("wrote %ld transcripts (%ld messages, %ld agent turns, %ld tool calls) to %s; catalog %s", rows, messages,
         turns, calls, out_path, env_catalog_mode_name(mode));
  if (skipped) printf("; %ld tasks of other families skipped", skipped);
  printf("\nsystem prompt: mean %.0f characters (min %zu, max %zu)\n", (double)system_chars / (double)rows,
         system_min, system_max);
  if (have_chat)
    printf("tokens per transcript (%s): mean %.1f, trained (mask 1) %.1f; system prompt content %.1f\n",
           tokenizer_path, (double)sum.total / (double)rows, (double)sum.trained / (double)rows,
           (double)sum.system / (double)rows);
done:
  if (f) {
    fclose(f);
    remove(tmp);
  }
  env_world_free(world);
  if (have_chat) chat_free(&chat);
  tokenizer_free(tok);
  free_tasks(tasks, count);
  return rc;
}
