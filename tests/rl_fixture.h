// tests/rl_fixture.h: what the GRPO tests share: a few bank tasks generated
// in-process (one family per use case), a BPE tokenizer trained on their
// system turns and some customer-service text, and a tiny random Gemma 3
// model sized to it (header-only; static functions).
#ifndef FIMI_TESTS_RL_FIXTURE_H
#define FIMI_TESTS_RL_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bpe_train.h"
#include "data/tokenizer.h"
#include "env/agent_prompt.h"
#include "env/tasks/task.h"
#include "env/tasks/family.h"
#include "model/gemma.h"

typedef struct RlFixture {
  TaskList tasks;
  Tokenizer *tok;
  GemmaModel model;
} RlFixture;

// `per_family` tasks of each family in `families` (NULL-terminated names).
static int rl_fixture_tasks(TaskList *list, const char *const *families, int per_family, FimiError *err) {
  int n = 0;
  while (families[n]) n++;
  memset(list, 0, sizeof *list);
  list->tasks = calloc((size_t)(n * per_family), sizeof(Task));
  if (!list->tasks) return fimi_fail(err, "out of memory");
  TaskGenContext ctx;
  if (task_gen_context_init(&ctx, 1, err) != 0) return -1;
  int rc = 0;
  for (int f = 0; rc == 0 && f < n; f++) {
    const TaskFamily *family = task_family_find(families[f]);
    if (!family) rc = fimi_fail(err, "no family %s", families[f]);
    for (int k = 0; rc == 0 && k < per_family; k++) {
      rc = task_generate(&ctx, family, (uint64_t)(100 + k), &list->tasks[list->count], err);
      if (rc == 0) list->count++;
    }
  }
  task_gen_context_free(&ctx);
  return rc;
}

// A tokenizer trained on the tasks' system turns under `catalog` plus a line
// of agent text, and a tiny model with that vocabulary.
static int rl_fixture_init(RlFixture *fx, const char *const *families, int per_family, EnvCatalogMode catalog,
                           int vocab, uint64_t model_seed, FimiError *err) {
  memset(fx, 0, sizeof *fx);
  if (rl_fixture_tasks(&fx->tasks, families, per_family, err) != 0) return -1;
  int n = fx->tasks.count + 1;
  const char **texts = calloc((size_t)n, sizeof *texts);
  size_t *lens = calloc((size_t)n, sizeof *lens);
  const char **names = calloc((size_t)n, sizeof *names);
  int rc = texts && lens && names ? 0 : fimi_fail(err, "out of memory");
  for (int i = 0; rc == 0 && i < fx->tasks.count; i++) {
    texts[i] = env_agent_system_text(&fx->tasks.tasks[i], catalog, err);
    if (!texts[i]) rc = -1;
    else lens[i] = strlen(texts[i]), names[i] = "system";
  }
  texts[n - 1] = "Please share your customer id and date of birth. Thank you, your request is done.";
  lens[n - 1] = strlen(texts[n - 1]);
  names[n - 1] = "agent";
  char *json = NULL;
  if (rc == 0) {
    BpeTrainOptions opt;
    bpe_train_default_options(&opt);
    opt.vocab_size = vocab;
    rc = bpe_train_texts(texts, lens, names, n, &opt, &json, NULL, err);
  }
  if (rc == 0) rc = tokenizer_load_json(json, strlen(json), "rl-fixture tokenizer.json", &fx->tok, err);
  for (int i = 0; texts && i < n - 1; i++) free((char *)texts[i]);
  free(texts);
  free(lens);
  free(names);
  free(json);
  GemmaConfig cfg;
  if (rc == 0) rc = gemma_config_preset(&cfg, "tiny", err);
  if (rc == 0) {
    cfg.vocab_size = tokenizer_vocab_size(fx->tok);
    rc = gemma_model_create(&fx->model, &cfg, err);
  }
  if (rc == 0) gemma_model_init_random(&fx->model, model_seed);
  return rc;
}

static void rl_fixture_free(RlFixture *fx) {
  task_list_free(&fx->tasks);
  tokenizer_free(fx->tok);
  gemma_model_free(&fx->model);
}

#endif
