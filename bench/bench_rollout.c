// bench/bench_rollout.c: rollout throughput of the GRPO rollout engine
// (rl/rollout.h) with the CPU policy on real bank episodes (in-process env
// client), and fimi's side of the comparison with Hugging Face generate
// (bench/rollout_vs_hf.sh).
//
// Setup (the same for every mode): tasks from every registered family
// generated in-process, a BPE tokenizer trained in-process on their system
// turns (catalog family) with the preset's vocabulary size as its target, and
// a random model of the preset (tiny or small-10m) whose vocabulary is the
// tokenizer's.
//
// Modes:
//   (default) the rollout table: for each rollout.slots in --slots and each
//     configuration (prefix sharing on/off, row_invariant on/off), one
//     rollout_run over the same jobs (--tasks tasks x --group rollouts,
//     env seeds per task); prints generated tokens/s (sampled tokens over
//     the whole run), episodes/s, prefill and decode tokens, and the share
//     of rollout time inside the environment (RolloutTimes.env / total).
//   --export DIR: writes DIR/config.json + DIR/model.safetensors (F32, the
//     same random weights) and DIR/prompts.txt: one line per task, the ids
//     of the rendered prompt (<bos>, system turn, first customer turn,
//     generation prompt) exactly as the rollout engine builds it.
//   --generate DIR: loads DIR's model and prompts and times plain batched
//     generation of --new tokens for each of --batch prompts (no stop
//     token), temperature 1 (--greedy: argmax). Two ways: "prefill" = the
//     rollout policy's path (each prompt through gemma_prefill in chunks of
//     --chunk tokens, then batched gemma_decode_step, row_invariant per
//     --row-invariant), and "generate" = gemma_generate (prompt fed one
//     position per decode step). Prints one JSON line.
//
// Usage: bench_rollout [--preset tiny|small-10m] [--slots 1,16,64] [--tasks 16] [--group 4]
//            [--turn-tokens 32] [--episode-tokens 96] [--chunk 64] [--configs all|base]
//        bench_rollout --preset P --export DIR [--tasks N]
//        bench_rollout --generate DIR --batch B --new N [--rounds R] [--chunk 64] [--row-invariant 0|1]
//            [--greedy] [--way prefill|generate|both]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "data/bpe_train.h"
#include "data/chat.h"
#include "data/tokenizer.h"
#include "env/agent_prompt.h"
#include "env/tasks/task.h"
#include "env/tasks/family.h"
#include "kernels/cpu/blas.h"
#include "model/decode.h"
#include "model/gemma.h"
#include "model/weights.h"
#include "rl/env_client.h"
#include "rl/rollout.h"

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const char *what, const FimiError *err) {
  fprintf(stderr, "bench_rollout: %s: %s\n", what, err ? err->message : "");
  exit(1);
}

typedef struct Setup {
  TaskList tasks;
  Tokenizer *tok;
  GemmaModel model;
} Setup;

// `count` tasks round-robin over the registered families (task i is of
// family i % families), so the first k tasks span k families.
static void make_tasks(TaskList *list, int count) {
  FimiError err = {0};
  TaskGenContext ctx;
  if (task_gen_context_init(&ctx, 1, &err) != 0) die("task context", &err);
  int families = task_family_count();
  list->tasks = calloc((size_t)count, sizeof(Task));
  list->count = 0;
  if (!list->tasks) die("out of memory", NULL);
  for (int i = 0; i < count; i++) {
    if (task_generate(&ctx, task_family_at(i % families), (uint64_t)(100 + i / families), &list->tasks[i], &err) != 0)
      die("task", &err);
    list->count++;
  }
  task_gen_context_free(&ctx);
}

static void setup_init(Setup *s, const char *preset, int n_tasks) {
  FimiError err = {0};
  memset(s, 0, sizeof *s);
  GemmaConfig cfg;
  if (gemma_config_preset(&cfg, preset, &err) != 0) die("preset", &err);
  make_tasks(&s->tasks, n_tasks);
  // The tokenizer's training text: the system turns of these tasks and of
  // one task of every family, plus a line of agent text.
  TaskList extra;
  make_tasks(&extra, task_family_count());
  int n = s->tasks.count + extra.count + 1;
  const char **texts = calloc((size_t)n, sizeof *texts);
  size_t *lens = calloc((size_t)n, sizeof *lens);
  const char **names = calloc((size_t)n, sizeof *names);
  if (!texts || !lens || !names) die("out of memory", NULL);
  for (int i = 0; i < n - 1; i++) {
    const Task *t = i < s->tasks.count ? &s->tasks.tasks[i] : &extra.tasks[i - s->tasks.count];
    texts[i] = env_agent_system_text(t, ENV_CATALOG_FAMILY, &err);
    if (!texts[i]) die("system text", &err);
    lens[i] = strlen(texts[i]);
    names[i] = "system";
  }
  texts[n - 1] = "Please share your customer id and date of birth. Thank you, your request is done.";
  lens[n - 1] = strlen(texts[n - 1]);
  names[n - 1] = "agent";
  BpeTrainOptions opt;
  bpe_train_default_options(&opt);
  opt.vocab_size = cfg.vocab_size;
  char *json = NULL;
  if (bpe_train_texts(texts, lens, names, n, &opt, &json, NULL, &err) != 0) die("bpe train", &err);
  if (tokenizer_load_json(json, strlen(json), "bench tokenizer.json", &s->tok, &err) != 0) die("tokenizer", &err);
  for (int i = 0; i < n - 1; i++) free((char *)texts[i]);
  free(texts);
  free(lens);
  free(names);
  free(json);
  task_list_free(&extra);
  cfg.vocab_size = tokenizer_vocab_size(s->tok);
  if (gemma_model_create(&s->model, &cfg, &err) != 0) die("model", &err);
  gemma_model_init_random(&s->model, 1234);
}

static void setup_free(Setup *s) {
  task_list_free(&s->tasks);
  tokenizer_free(s->tok);
  gemma_model_free(&s->model);
}

// ---- the rollout table ------------------------------------------------------------

typedef struct Result {
  double seconds;
  RolloutTimes times;
  long sampled;
  int episodes;
  int ends[ROLLOUT_END_COUNT];
  double mean_prompt, mean_len;
} Result;

static Result run_rollouts(Setup *s, const RolloutConfig *c, const RolloutJob *jobs, int n, int chunk, int row_inv) {
  FimiError err = {0};
  RolloutPolicy policy;
  if (rollout_policy_cpu_create(&policy, &s->model, c->slots + (c->share_prefix ? 1 : 0), c->context, chunk, row_inv,
                                &err) != 0)
    die("policy", &err);
  EnvClient env;
  if (env_client_local_create(&env, &s->tasks, &err) != 0) die("env client", &err);
  Rollout *out = calloc((size_t)n, sizeof *out);
  if (!out) die("out of memory", NULL);
  Result r = {0};
  double t0 = now_seconds();
  if (rollout_run(c, &policy, &env, s->tok, jobs, n, 7, out, &r.times, &err) != 0) die("rollout_run", &err);
  r.seconds = now_seconds() - t0;
  r.episodes = n;
  for (int j = 0; j < n; j++) {
    r.sampled += out[j].sampled;
    r.ends[out[j].end]++;
    r.mean_prompt += out[j].prompt_len / (double)n;
    r.mean_len += out[j].len / (double)n;
    if (out[j].end == ROLLOUT_END_FAILED) fprintf(stderr, "bench_rollout: episode %d failed: %s\n", j, out[j].error);
    rollout_free(&out[j]);
  }
  free(out);
  env_client_free(&env);
  rollout_policy_cpu_free(&policy);
  return r;
}

static int parse_list(const char *text, int *out, int max) {
  int n = 0;
  for (const char *p = text; *p && n < max;) {
    out[n++] = atoi(p);
    const char *comma = strchr(p, ',');
    if (!comma) break;
    p = comma + 1;
  }
  return n;
}

static void rollout_table(const char *preset, const int *slots, int n_slots, int n_tasks, int group, int turn_tokens,
                          int episode_tokens, int chunk, int all_configs) {
  Setup s;
  setup_init(&s, preset, n_tasks);
  int n = n_tasks * group;
  RolloutJob *jobs = calloc((size_t)n, sizeof *jobs);
  for (int t = 0; t < n_tasks; t++)
    for (int g = 0; g < group; g++) jobs[t * group + g] = (RolloutJob){t, t, 1000 + (uint64_t)t};
  const GemmaConfig *cfg = &s.model.config;
  printf("preset %s: vocab %d (tokenizer trained in-process), hidden %d, %d layers, %lld parameters; "
         "%d tasks x %d rollouts = %d episodes, max %d tokens a turn, %d an episode, prefill chunk %d\n",
         preset, cfg->vocab_size, cfg->hidden_size, cfg->num_hidden_layers, (long long)gemma_model_param_count(&s.model),
         n_tasks, group, n, turn_tokens, episode_tokens, chunk);
  // Warm-up: one short run (pools, page faults, OpenMP threads).
  {
    RolloutConfig c;
    rollout_config_default(&c);
    c.slots = 4;
    c.max_turn_tokens = 8;
    c.max_episode_tokens = 16;
    c.context = cfg->max_position_embeddings;
    run_rollouts(&s, &c, jobs, group < n ? group : n, chunk, 1);
  }
  printf("| preset | slots | share_prefix | row_invariant | tok/s | episodes/s | seconds | sampled | prefill tok "
         "(shared) | decode s | prefill s | env s | env share | mean prompt | ends |\n"
         "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  static const int configs[4][2] = {{1, 1}, {0, 1}, {1, 0}, {0, 0}};  // share_prefix, row_invariant
  int n_configs = all_configs ? 4 : 1;
  for (int si = 0; si < n_slots; si++) {
    for (int k = 0; k < n_configs; k++) {
      RolloutConfig c;
      rollout_config_default(&c);
      c.slots = slots[si];
      c.max_turn_tokens = turn_tokens;
      c.max_episode_tokens = episode_tokens;
      c.context = cfg->max_position_embeddings;
      c.share_prefix = configs[k][0];
      Result r = run_rollouts(&s, &c, jobs, n, chunk, configs[k][1]);
      const RolloutTimes *t = &r.times;
      double total = t->prefill + t->decode + t->env + t->other;
      char ends[256] = "";
      for (int e = 0; e < ROLLOUT_END_COUNT; e++)
        if (r.ends[e])
          snprintf(ends + strlen(ends), sizeof ends - strlen(ends), "%s%s %d", ends[0] ? ", " : "",
                   rollout_end_name((RolloutEnd)e), r.ends[e]);
      printf("| %s | %d | %s | %s | %.0f | %.2f | %.2f | %ld | %lld (%lld) | %.2f | %.2f | %.3f | %.1f%% | %.0f | %s |\n",
             preset, c.slots, c.share_prefix ? "on" : "off", configs[k][1] ? "on" : "off", r.sampled / r.seconds,
             r.episodes / r.seconds, r.seconds, r.sampled, (long long)t->prefill_tokens,
             (long long)t->shared_prefill_tokens, t->decode, t->prefill, t->env, 100.0 * t->env / total, r.mean_prompt,
             ends);
      fflush(stdout);
    }
  }
  free(jobs);
  setup_free(&s);
}

// ---- export and generate ----------------------------------------------------------

static void export_dir(const char *preset, const char *dir, int n_tasks) {
  Setup s;
  setup_init(&s, preset, n_tasks);
  FimiError err = {0};
  mkdir(dir, 0755);
  if (gemma_save_pretrained(&s.model, dir, SAFETENSORS_F32, 0, &err) != 0) die("save", &err);
  char path[4096];
  snprintf(path, sizeof path, "%s/prompts.txt", dir);
  FILE *f = fopen(path, "w");
  if (!f) die("cannot write prompts.txt", NULL);
  EnvClient env;
  if (env_client_local_create(&env, &s.tasks, &err) != 0) die("env client", &err);
  ChatBuilder b;
  if (chat_init(&b, s.tok, &err) != 0) die("chat", &err);
  for (int t = 0; t < s.tasks.count; t++) {
    EnvRequest req = {.episode = t, .task = t, .seed = 1000 + (uint64_t)t};
    EnvReply rep = {0};
    if (env.open(env.ctx, &req, 1, &rep, &err) != 0 || rep.failed) die("env open", &err);
    char *system = env_agent_system_text(&s.tasks.tasks[t], ENV_CATALOG_FAMILY, &err);
    chat_reset(&b);
    if (!system || chat_begin(&b, &err) != 0 || chat_append_turn(&b, CHAT_SYSTEM, system, strlen(system), &err) != 0 ||
        chat_append_turn(&b, CHAT_USER, rep.text, strlen(rep.text), &err) != 0 ||
        chat_append_generation_prompt(&b, &err) != 0)
      die("prompt", &err);
    for (size_t i = 0; i < b.ids.len; i++) fprintf(f, "%s%d", i ? " " : "", (int)b.ids.data[i]);
    fputc('\n', f);
    free(system);
    EnvReply fin = {0};
    if (env.finish(env.ctx, &req, 1, &fin, &err) != 0) die("env finish", &err);
    env_reply_clear(&fin);
    env_reply_clear(&rep);
  }
  chat_free(&b);
  env_client_free(&env);
  fclose(f);
  printf("wrote %s/config.json, model.safetensors, prompts.txt (%d prompts, vocab %d)\n", dir, s.tasks.count,
         s.model.config.vocab_size);
  setup_free(&s);
}

// Reads prompts.txt: up to max lines of ids.
static int read_prompts(const char *dir, int **prompts, int *lengths, int max) {
  char path[4096];
  snprintf(path, sizeof path, "%s/prompts.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) die("cannot read prompts.txt", NULL);
  int n = 0, c = 0;
  while (n < max) {
    int cap = 1024, len = 0, *ids = malloc(sizeof(int) * cap), v;
    while (fscanf(f, "%d", &v) == 1) {
      if (len == cap) ids = realloc(ids, sizeof(int) * (cap *= 2));
      ids[len++] = v;
      while ((c = fgetc(f)) == ' ') {}
      if (c == '\n' || c == EOF) break;
      ungetc(c, f);
    }
    if (len == 0) {
      free(ids);
      break;
    }
    prompts[n] = ids;
    lengths[n++] = len;
    if (c == EOF) break;
  }
  fclose(f);
  return n;
}

typedef struct Timing {
  double prefill, decode;
} Timing;

// The rollout policy's path: chunked prefill of each prompt, then batched
// decode steps; sampling on the host like the engine (one stream a row).
static Timing run_prefill_way(GemmaModel *m, const int *const *prompts, const int *lengths, int B, int max_new,
                              int chunk, int row_inv, const SamplerConfig *sampler, long *checksum) {
  FimiError err = {0};
  int V = m->config.vocab_size, cap = 0;
  for (int b = 0; b < B; b++) cap = lengths[b] > cap ? lengths[b] : cap;
  GemmaKVCache cache;
  if (gemma_kv_cache_create_rows(&cache, &m->config, B, cap + max_new, chunk, &err) != 0) die("cache", &err);
  cache.row_invariant = row_inv;
  float *logits = malloc(sizeof(float) * (size_t)B * V);
  int *tokens = malloc(sizeof(int) * B);
  Rng *rngs = malloc(sizeof(Rng) * B);
  for (int b = 0; b < B; b++) rng_seed(&rngs[b], 7 ^ ((uint64_t)(b + 1) * 0x9E3779B97F4A7C15ULL));
  Timing t = {0};
  double t0 = now_seconds();
  for (int b = 0; b < B; b++)
    if (gemma_prefill(m, &cache, b, prompts[b], lengths[b], logits + (size_t)b * V, &err) != 0) die("prefill", &err);
  t.prefill = now_seconds() - t0;
  t0 = now_seconds();
  for (int step = 0; step < max_new; step++) {
    for (int b = 0; b < B; b++) {
      tokens[b] = sample_token(logits + (size_t)b * V, V, sampler, &rngs[b]);
      *checksum += tokens[b];
    }
    if (step + 1 < max_new && gemma_decode_step(m, &cache, tokens, NULL, logits, &err) != 0) die("decode", &err);
  }
  t.decode = now_seconds() - t0;
  free(logits);
  free(tokens);
  free(rngs);
  gemma_kv_cache_free(&cache);
  return t;
}

static void generate_mode(const char *dir, int B, int max_new, int rounds, int chunk, int row_inv, int greedy,
                          const char *way) {
  FimiError err = {0};
  GemmaModel m;
  if (gemma_load_pretrained(&m, dir, &err) != 0) die("load", &err);
  int *all[1024], lens_all[1024];
  int avail = read_prompts(dir, all, lens_all, 1024);
  if (avail < 1) die("no prompts", NULL);
  const int **prompts = malloc(sizeof(int *) * B);
  int *lengths = malloc(sizeof(int) * B);
  long prompt_tokens = 0;
  for (int b = 0; b < B; b++) {
    prompts[b] = all[b % avail];
    lengths[b] = lens_all[b % avail];
    prompt_tokens += lengths[b];
  }
  SamplerConfig sampler = {greedy ? 0.0f : 1.0f, 1.0f};
  int do_prefill = strcmp(way, "generate") != 0, do_generate = strcmp(way, "prefill") != 0;
  long checksum = 0;
  // Warm-up at batch 1 with a few tokens.
  run_prefill_way(&m, prompts, lengths, 1, 4, chunk, row_inv, &sampler, &checksum);
  double best_p = 1e30, sum_p = 0, best_pp = 0, best_pd = 0, best_g = 1e30, sum_g = 0;
  int *out = malloc(sizeof(int) * (size_t)B * max_new), *out_len = malloc(sizeof(int) * B);
  for (int r = 0; r < rounds; r++) {
    if (do_prefill) {
      Timing t = run_prefill_way(&m, prompts, lengths, B, max_new, chunk, row_inv, &sampler, &checksum);
      double s = t.prefill + t.decode;
      sum_p += s;
      if (s < best_p) best_p = s, best_pp = t.prefill, best_pd = t.decode;
    }
    if (do_generate) {
      GenerateOptions opt = {.max_new = max_new, .sampler = sampler, .seed = 7};
      double t0 = now_seconds();
      if (gemma_generate(&m, prompts, lengths, B, &opt, out, out_len, &err) != 0) die("generate", &err);
      double s = now_seconds() - t0;
      sum_g += s;
      if (s < best_g) best_g = s;
    }
  }
  double gen = (double)B * max_new;
  printf("{\"impl\": \"fimi\", \"batch\": %d, \"new\": %d, \"prompt_tokens\": %ld, \"rounds\": %d, \"row_invariant\": %d, "
         "\"chunk\": %d, \"greedy\": %d",
         B, max_new, prompt_tokens, rounds, row_inv, chunk, greedy);
  if (do_prefill)
    printf(", \"tokens_per_s\": %.1f, \"best_tokens_per_s\": %.1f, \"best_s\": %.4f, \"best_prefill_s\": %.4f, "
           "\"best_decode_s\": %.4f, \"decode_tokens_per_s\": %.1f",
           gen * rounds / sum_p, gen / best_p, best_p, best_pp, best_pd, gen / best_pd);
  if (do_generate)
    printf(", \"generate_tokens_per_s\": %.1f, \"generate_best_tokens_per_s\": %.1f, \"generate_best_s\": %.4f",
           gen * rounds / sum_g, gen / best_g, best_g);
  printf(", \"checksum\": %ld}\n", checksum);
  free(out);
  free(out_len);
  free(prompts);
  free(lengths);
  for (int i = 0; i < avail; i++) free(all[i]);
  gemma_model_free(&m);
}

int main(int argc, char **argv) {
  blas_run_on_better_kernels(argv, 1);  // the kernels fimi itself would run (kernels/cpu/blas.h)
  const char *preset = NULL, *export = NULL, *gen_dir = NULL, *way = "both", *configs = "all";
  int slots[16] = {1, 16, 64}, n_slots = 3, n_tasks = 16, group = 4, turn_tokens = 32, episode_tokens = 96;
  int chunk = 64, batch = 1, max_new = 32, rounds = 3, row_inv = 0, greedy = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int flag = strcmp(a, "--greedy") == 0;
    if (!flag && !v) {
      fprintf(stderr, "bench_rollout: %s needs a value\n", a);
      return 2;
    }
    if (flag) greedy = 1;
    else if (!strcmp(a, "--preset")) preset = v;
    else if (!strcmp(a, "--slots")) n_slots = parse_list(v, slots, 16);
    else if (!strcmp(a, "--tasks")) n_tasks = atoi(v);
    else if (!strcmp(a, "--group")) group = atoi(v);
    else if (!strcmp(a, "--turn-tokens")) turn_tokens = atoi(v);
    else if (!strcmp(a, "--episode-tokens")) episode_tokens = atoi(v);
    else if (!strcmp(a, "--chunk")) chunk = atoi(v);
    else if (!strcmp(a, "--configs")) configs = v;
    else if (!strcmp(a, "--export")) export = v;
    else if (!strcmp(a, "--generate")) gen_dir = v;
    else if (!strcmp(a, "--batch")) batch = atoi(v);
    else if (!strcmp(a, "--new")) max_new = atoi(v);
    else if (!strcmp(a, "--rounds")) rounds = atoi(v);
    else if (!strcmp(a, "--row-invariant")) row_inv = atoi(v);
    else if (!strcmp(a, "--way")) way = v;
    else {
      fprintf(stderr, "bench_rollout: unknown option %s\n", a);
      return 2;
    }
    if (!flag) i++;
  }
  if (n_tasks < 1 || group < 1 || chunk < 1 || batch < 1 || max_new < 1 || rounds < 1) {
    fprintf(stderr, "bench_rollout: counts must be >= 1\n");
    return 2;
  }
  if (gen_dir) {
    generate_mode(gen_dir, batch, max_new, rounds, chunk, row_inv, greedy, way);
  } else if (export) {
    export_dir(preset ? preset : "tiny", export, n_tasks);
  } else if (preset) {
    rollout_table(preset, slots, n_slots, n_tasks, group, turn_tokens, episode_tokens, chunk, strcmp(configs, "all") == 0);
  } else {
    rollout_table("tiny", slots, n_slots, n_tasks, group, turn_tokens, episode_tokens, chunk, strcmp(configs, "all") == 0);
    rollout_table("small-10m", slots, n_slots, n_tasks, group, turn_tokens, episode_tokens, chunk,
                  strcmp(configs, "all") == 0);
  }
  return 0;
}
