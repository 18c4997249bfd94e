// cmd/cmd_env.c: `fimi env ...`, the simulated bank (Navadhan Bank, a
// fictional bank): `tools` prints the tool catalog; `sample` generates tasks
// from the registered families (docs/tasks.md); `replay` prints a task's gold
// chain and its tool outputs; `play` lets a person play the agent in the
// terminal (or a script through a pipe) and prints the reward. Scripted
// agents over a task file are `fimi eval --agent` (cmd/cmd_eval.c).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "core/hash.h"
#include "data/toolcall.h"
#include "env/agents.h"
#include "env/bank/tools.h"
#include "env/episode.h"
#include "env/tasks/family.h"

static void usage_to(FILE *out) {
  fprintf(out,
          "usage: fimi env tools [--markdown | --json]\n"
          "       fimi env sample --family F|all --n N [--seed S] [--image-seed K] [--out FILE] [--list]\n"
          "       fimi env replay --task-file F --task ID\n"
          "       fimi env play --task-file F --task ID [--seed S]\n"
          "       fimi env transcripts --task-file F --out FILE [--catalog all|area|family] [--seed S] [--family PATTERN]\n"
          "       fimi env corpus build --out DIR [--seed S] | report DIR\n"
          "  tools         list the bank's tools (name, area, read/write, charged, auth)\n"
          "    --markdown  print docs/tools.md;  --json  the tool schemas as a JSON array\n"
          "  sample        generate N tasks per family as JSONL (deterministic in --seed)\n"
          "  replay        print a task's gold chain with each tool's output and the values to communicate\n"
          "  play          be the agent: each input line is one turn (a message, or\n"
          "                <tool_call>{\"name\":..,\"arguments\":{..}}</tool_call>); prints the reward at the end\n"
          "  transcripts   oracle conversations as SFT rows (messages with tool turns); --help for more\n"
          "  corpus        the task corpus with its gated held-out, validation and training splits; --help for more\n");
}

static void usage(void) { usage_to(stderr); }

static void print_table(void) {
  printf("%-32s %-4s %-7s %-4s %s\n", "tool", "rw", "charged", "auth", "area");
  for (int i = 0, n = env_tool_count(); i < n; i++)
    printf("%-32s %-4s %-7s %-4s %s\n", env_tool_name(i), env_tool_writes(i) ? "w" : "r",
           env_tool_charged(i) ? "yes" : "no", env_tool_needs_auth(i) ? "yes" : "no", env_tool_area(i));
  printf("%d tools\n", env_tool_count());
}

static int cmd_env_tools(int argc, char **argv) {
  const char *format = "table";
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--markdown") == 0) format = "markdown";
    else if (strcmp(argv[i], "--json") == 0) format = "json";
    else {
      fprintf(stderr, "fimi env tools: unknown option \"%s\" (see fimi env tools --help)\n", argv[i]);
      return CLI_EXIT_USAGE;
    }
  }
  if (strcmp(format, "table") == 0) {
    print_table();
    return 0;
  }
  char *text = NULL;
  if (strcmp(format, "markdown") == 0) {
    text = env_tool_catalog_markdown();
  } else {
    cJSON *catalog = env_tool_catalog_json();
    text = catalog ? cJSON_Print(catalog) : NULL;
    cJSON_Delete(catalog);
  }
  if (!text) {
    fprintf(stderr, "fimi env tools: out of memory\n");
    return CLI_EXIT_FAILURE;
  }
  fputs(text, stdout);
  if (strcmp(format, "json") == 0) fputc('\n', stdout);
  free(text);
  return 0;
}


// ---- shared option parsing ---------------------------------------------------

typedef struct EnvArgs {
  const char *family, *out, *task_file, *task_id;
  long n, seed, image_seed;
  int list;
} EnvArgs;

static int parse_env_args(const char *cmd, int argc, char **argv, EnvArgs *a) {
  FimiError err = {0};
  memset(a, 0, sizeof *a);
  a->n = 1;
  a->image_seed = 1;
  for (int i = 0; i < argc; i++) {
    const char *v = NULL;
    long num = 0;
    if (strcmp(argv[i], "--list") == 0) {
      a->list = 1;
      continue;
    }
    const char *flag = argv[i];
    if (strcmp(flag, "--family") && strcmp(flag, "--out") && strcmp(flag, "--task-file") && strcmp(flag, "--task") &&
        strcmp(flag, "--n") && strcmp(flag, "--seed") && strcmp(flag, "--image-seed")) {
      fprintf(stderr, "fimi env %s: unknown option \"%s\" (see fimi env %s --help)\n", cmd, flag, cmd);
      return CLI_EXIT_USAGE;
    }
    if (!(v = cli_flag_value(argc, argv, &i, &err))) return cli_fail("env", &err);
    if (!strcmp(flag, "--family")) a->family = v;
    else if (!strcmp(flag, "--out")) a->out = v;
    else if (!strcmp(flag, "--task-file")) a->task_file = v;
    else if (!strcmp(flag, "--task")) a->task_id = v;
    else {
      long max = !strcmp(flag, "--n") ? 1000000 : 2147483647L;
      if (cli_parse_int(flag, v, !strcmp(flag, "--n") ? 1 : 0, max, &num, &err) != 0) return cli_fail("env", &err);
      if (!strcmp(flag, "--n")) a->n = num;
      else if (!strcmp(flag, "--seed")) a->seed = num;
      else a->image_seed = num;
    }
  }
  return 0;
}

// The seed of task i of a family: a mix of the run seed, the family's name
// and i, so adding a family never changes another family's tasks.
static uint64_t task_seed(uint64_t seed, const char *family, long i) {
  uint64_t h = hash_fnv1a_text(HASH_FNV1A_SHORT_BASIS, family);
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ h ^ ((uint64_t)i * 0xBF58476D1CE4E5B9ULL);
  x ^= x >> 31;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 29);
}

static int cmd_env_sample(int argc, char **argv) {
  EnvArgs a;
  int rc = parse_env_args("sample", argc, argv, &a);
  if (rc) return rc;
  if (a.list) {
    for (int i = 0; i < task_family_count(); i++) {
      const TaskFamily *f = task_family_at(i);
      printf("%-28s %-6s %-15s %s\n", f->name, task_kind_name(f->kind), task_use_case_name(f->use_case), f->summary);
    }
    printf("%d families\n", task_family_count());
    return 0;
  }
  if (!a.family) {
    fprintf(stderr, "fimi env sample: --family is required (a name, or all; --list shows them)\n");
    return CLI_EXIT_USAGE;
  }
  int all = strcmp(a.family, "all") == 0;
  if (!all && !task_family_find(a.family)) {
    fprintf(stderr, "fimi env sample: unknown family \"%s\" (--list shows them)\n", a.family);
    return CLI_EXIT_USAGE;
  }
  FimiError err = {0};
  TaskGenContext ctx;
  if (task_gen_context_init(&ctx, (uint64_t)a.image_seed, &err) != 0) return cli_fail("env sample", &err);
  FILE *out = a.out ? fopen(a.out, "w") : stdout;
  if (!out) {
    task_gen_context_free(&ctx);
    fprintf(stderr, "fimi env sample: cannot write %s\n", a.out);
    return CLI_EXIT_FAILURE;
  }
  rc = 0;
  for (int f = 0; f < task_family_count() && rc == 0; f++) {
    const TaskFamily *family = task_family_at(f);
    if (!all && strcmp(family->name, a.family) != 0) continue;
    for (long i = 0; i < a.n && rc == 0; i++) {
      Task task;
      if (task_generate(&ctx, family, task_seed((uint64_t)a.seed, family->name, i), &task, &err) != 0) {
        rc = cli_fail("env sample", &err);
        break;
      }
      char *line = task_to_json_line(&task, &err);
      task_free(&task);
      if (!line) {
        rc = cli_fail("env sample", &err);
        break;
      }
      fputs(line, out);
      fputc('\n', out);
      free(line);
    }
  }
  if (a.out && fclose(out) != 0 && rc == 0) {
    fprintf(stderr, "fimi env sample: error writing %s\n", a.out);
    rc = CLI_EXIT_FAILURE;
  }
  task_gen_context_free(&ctx);
  return rc;
}

static int load_one_task(const char *cmd, const EnvArgs *a, TaskList *list, const Task **task) {
  FimiError err = {0};
  if (!a->task_file || !a->task_id) {
    fprintf(stderr, "fimi env %s: --task-file and --task are required\n", cmd);
    return CLI_EXIT_USAGE;
  }
  if (task_list_load(a->task_file, list, &err) != 0) return cli_fail("env", &err);
  if (!(*task = task_list_find(list, a->task_id))) {
    fprintf(stderr, "fimi env %s: no task \"%s\" in %s\n", cmd, a->task_id, a->task_file);
    task_list_free(list);
    return CLI_EXIT_FAILURE;
  }
  return 0;
}

static int cmd_env_replay(int argc, char **argv) {
  EnvArgs a;
  TaskList list;
  const Task *t = NULL;
  int rc = parse_env_args("replay", argc, argv, &a);
  if (rc || (rc = load_one_task("replay", &a, &list, &t))) return rc;
  FimiError err = {0};
  EnvWorld *world = NULL;
  const BankImage *image = NULL;
  BankPool *pool = NULL;
  BankEpisode *bank = NULL;
  if (env_world_create(&world, &err) || env_world_image(world, t->image_seed, &image, &pool, &err) ||
      bank_pool_acquire(pool, &bank, &err) || env_apply_initial(bank, t, &err)) {
    rc = cli_fail("env replay", &err);
    goto done;
  }
  printf("task %s (%s, %s, %s): %s\n", t->id, t->family, task_kind_name(t->kind), task_use_case_name(t->use_case),
         t->reason);
  cJSON *results = cJSON_CreateArray();
  for (int i = 0; i < t->num_gold && rc == 0; i++) {
    char *call = toolcall_render_call(t->gold[i].name, t->gold[i].arguments, &err);
    printf("[%d] %s%s\n", i, t->gold[i].confirm ? "(after the customer confirms) " : "", call ? call : "?");
    free(call);
    if (env_run_gold_step(bank, t, i, results, &err) != 0) {
      rc = cli_fail("env replay", &err);
      break;
    }
    char *out = cJSON_PrintUnformatted(cJSON_GetArrayItem(results, i));
    printf("    -> %s\n", out ? out : "?");
    free(out);
  }
  for (int i = 0; i < t->num_communicate && rc == 0; i++) {
    char *v = env_resolve_value(results, &t->communicate[i], &err);
    printf("communicate %s = %s\n", t->communicate[i].name, v ? v : "(unresolved)");
    free(v);
  }
  for (int i = 0; i < t->num_confirms && rc == 0; i++) {
    char *v = t->confirms[i].step >= 0 ? env_resolve_value(results, &t->confirms[i], &err) : NULL;
    printf("customer confirms: %s%s%s\n", t->confirms[i].name, v ? " = " : "", v ? v : "");
    free(v);
  }
  cJSON_Delete(results);
done:
  if (bank) bank_pool_release(bank);
  env_world_free(world);
  task_list_free(&list);
  return rc;
}

static void print_reward(const RewardBreakdown *r) {
  cJSON *j = reward_to_json(r);
  char *text = j ? cJSON_PrintUnformatted(j) : NULL;
  printf("reward %s\n", text ? text : "?");
  free(text);
  cJSON_Delete(j);
}

// Reads one line of any length from f (malloc'd, without the newline);
// NULL at end of input.
static char *read_line(FILE *f) {
  size_t cap = 256, len = 0;
  char *buf = malloc(cap);
  int c;
  if (!buf) return NULL;
  while ((c = fgetc(f)) != EOF && c != '\n') {
    if (len + 1 >= cap) {
      char *bigger = realloc(buf, cap *= 2);
      if (!bigger) {
        free(buf);
        return NULL;
      }
      buf = bigger;
    }
    buf[len++] = (char)c;
  }
  if (c == EOF && len == 0) {
    free(buf);
    return NULL;
  }
  buf[len] = 0;
  return buf;
}

static int cmd_env_play(int argc, char **argv) {
  EnvArgs a;
  TaskList list;
  const Task *t = NULL;
  int rc = parse_env_args("play", argc, argv, &a);
  if (rc || (rc = load_one_task("play", &a, &list, &t))) return rc;
  FimiError err = {0};
  EnvWorld *world = NULL;
  EnvEpisode *ep = NULL;
  const char *first = NULL;
  if (env_world_create(&world, &err) || env_open(world, t, (uint64_t)a.seed, &ep, &first, &err)) {
    rc = cli_fail("env play", &err);
    goto done;
  }
  printf("task %s: %d turns; type a message, or <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>\n", t->id,
         t->max_turns);
  printf("customer> %s\n", first);
  fflush(stdout);
  EnvObservation obs = {0};
  char *line = NULL;
  while (!obs.done && (line = read_line(stdin)) != NULL) {
    if (env_step(ep, line, strlen(line), &obs, &err) != 0) {
      free(line);
      rc = cli_fail("env play", &err);
      goto done;
    }
    free(line);
    printf("%s> %s\n", obs.kind == ENV_OBS_TOOL ? "tool" : "customer", obs.text);
    fflush(stdout);
  }
  if (!obs.done) printf("(input ended before the episode did)\n");
  printf("end %s after %d turns\n", task_end_name(obs.end), env_episode_turns_used(ep));
  RewardBreakdown r;
  if (env_score(ep, &r, &err) != 0) {
    rc = cli_fail("env play", &err);
    goto done;
  }
  print_reward(&r);
done:
  env_close(ep);
  env_world_free(world);
  task_list_free(&list);
  return rc;
}

// `fimi env corpus build|report` (cmd/cmd_env_corpus.c).
int cmd_env_corpus(int argc, char **argv);

int cmd_env(int argc, char **argv) {
  // argv[0] is "env".
  if (argc < 2) {
    usage();
    return CLI_EXIT_USAGE;
  }
  // fimi env --help, and --help of the subcommands whose usage is usage_to's.
  static const char *const shared_usage[] = {"tools", "sample", "replay", "play", NULL};
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      (cli_is_one_of(argv[1], shared_usage) && cli_wants_help(argc, argv, 2))) {
    usage_to(stdout);
    return 0;
  }
  if (strcmp(argv[1], "tools") == 0) return cmd_env_tools(argc - 2, argv + 2);
  if (strcmp(argv[1], "sample") == 0) return cmd_env_sample(argc - 2, argv + 2);
  if (strcmp(argv[1], "replay") == 0) return cmd_env_replay(argc - 2, argv + 2);
  if (strcmp(argv[1], "play") == 0) return cmd_env_play(argc - 2, argv + 2);
  if (strcmp(argv[1], "eval") == 0) {
    fprintf(stderr, "fimi env eval is now fimi eval --agent NAME --tasks F (docs/evaluation.md)\n");
    return CLI_EXIT_USAGE;
  }
  if (strcmp(argv[1], "transcripts") == 0) return cmd_env_transcripts(argc - 2, argv + 2);
  if (strcmp(argv[1], "corpus") == 0) return cmd_env_corpus(argc - 1, argv + 1);
  fprintf(stderr, "fimi env: unknown subcommand \"%s\" (see fimi env --help)\n", argv[1]);
  usage();
  return CLI_EXIT_USAGE;
}
