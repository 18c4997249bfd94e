// cmd/train_grpo.c: `fimi train` with train.objective = grpo (see
// train_grpo.h): config, tasks, tokenizer, environment, objective.
// Validation episodes always run in this process (a few tasks, greedy); the
// training episodes run on env ranks when the layout has them.
#include "cmd/train_grpo.h"

#include <stdio.h>
#include <string.h>

#include "cmd/cli.h"
#include "cmd/endpoint.h"
#include "core/fileio.h"
#include "core/log.h"
#include "env/episode.h"
#include "model/weights.h"
#include "rl/env_mpi.h"

int grpo_setup_read(const Config *c, uint64_t seed, GrpoSetup *out, FimiError *err) {
  memset(out, 0, sizeof *out);
  out->config = c;
  GrpoConfig *g = &out->grpo;
  grpo_config_default(g);
  g->seed = seed;
  const char *reward, *agg;
  double temperature = 1, top_p = 1;
  if (cli_get_int(c, "grpo", "tasks_per_step", &g->tasks_per_step, err) ||
      cli_get_int(c, "grpo", "group_size", &g->group_size, err) ||
      !(reward = config_get_string(c, "grpo", "reward", err)) ||
      config_get_bool(c, "grpo", "scale_by_std", &g->scale_by_std, err) ||
      config_get_float(c, "grpo", "adv_eps", &g->adv_eps, err) ||
      config_get_float(c, "grpo", "pass_threshold", &g->pass_threshold, err) ||
      cli_get_int(c, "grpo", "updates_per_batch", &g->updates_per_batch, err) ||
      cli_get_int(c, "grpo", "max_draws", &g->max_draws, err) ||
      config_get_float(c, "grpo", "clip_low", &g->loss.clip_low, err) ||
      config_get_float(c, "grpo", "clip_high", &g->loss.clip_high, err) ||
      config_get_float(c, "grpo", "kl_coef", &g->loss.kl_coef, err) ||
      !(agg = config_get_string(c, "grpo", "loss_aggregation", err)) ||
      config_get_float(c, "grpo", "temperature", &temperature, err) ||
      config_get_float(c, "grpo", "top_p", &top_p, err) ||
      cli_get_int(c, "grpo", "val_tasks", &g->val_tasks, err) ||
      config_get_bool(c, "grpo", "val_greedy", &g->val_greedy, err) ||
      cli_get_int(c, "grpo", "log_rollouts", &g->log_rollouts, err) ||
      !(out->tasks_path = config_get_string(c, "env", "tasks", err)) ||
      !(out->val_path = config_get_string(c, "env", "val_tasks", err)) ||
      cli_rollout_settings(c, &g->rollout, &out->row_invariant, &out->prefill_chunk, err))
    return -1;
  g->rollout.sampler = (SamplerConfig){(float)temperature, (float)top_p};
  if (grpo_reward_kind_parse(reward, &g->reward, err) != 0 ||
      grpo_aggregation_parse(agg, &g->loss.aggregation, err) != 0)
    return -1;
  if (!out->tasks_path[0]) return fimi_fail(err, "env.tasks must name a task file (fimi env sample) for grpo");
  return grpo_config_validate(g, err);
}

void grpo_setup_print(const GrpoSetup *s, const GemmaConfig *model, const char *why, int64_t micro_batch,
                      int64_t grad_accum) {
  const GrpoConfig *g = &s->grpo;
  const RolloutConfig *r = &g->rollout;
  printf("  grpo: %d tasks x %d rollouts a step (micro_batch %lld x grad_accum %lld), reward %s, loss %s, clip "
         "%g/%g, kl %g, %d update%s per batch\n",
         g->tasks_per_step, g->group_size, (long long)micro_batch, (long long)grad_accum,
         g->reward == GRPO_REWARD_STRICT ? "strict" : "set", grpo_aggregation_name(g->loss.aggregation),
         g->loss.clip_low, g->loss.clip_high, g->loss.kl_coef, g->updates_per_batch, g->updates_per_batch > 1 ? "s" : "");
  printf("  rollouts: %d slots, context %d, %d tokens a turn, %d an episode, temperature %g, top_p %g, catalog %s, "
         "prefix sharing %s\n",
         r->slots, r->context, r->max_turn_tokens, r->max_episode_tokens, r->sampler.temperature, r->sampler.top_p,
         env_catalog_mode_name(r->catalog), r->share_prefix ? "on" : "off");
  printf("  tasks %s, validation %s\n", s->tasks_path, s->val_path[0] ? s->val_path : "none");
  if (!model) {
    printf("  rollout memory: not estimated (%s)\n", why);
    return;
  }
  GemmaConfig cfg = *model;
  // The rollout copy of the weights (the gathered full model under ZeRO-3)
  // and the KV cache of every slot plus the shared prompt.
  // Gemma 4 layers differ in kv width, and kv-shared layers keep no cache.
  double kv_width = 0;
  for (int l = 0; l < cfg.num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(&cfg, l, &shape);
    if (shape.kv_source == l) kv_width += (double)shape.kv_heads * shape.head_dim;
  }
  double kv = 2.0 * (r->slots + 1) * (double)r->context * kv_width * 4;
  double params = (double)gemma_config_param_count(&cfg);
  // Every train rank ends a step holding all B x G rollouts (its own and
  // the others', exchanged): ids, mask and log-probs, 9 bytes a token.
  double held = (double)g->tasks_per_step * g->group_size * r->context * 9;
  printf("  rollout memory per train rank (CPU, fp32): weights %.1f MiB (the gathered full model; %.1f MiB in "
         "bf16), KV cache %.1f MiB (%d slots + 1 shared prompt x %d tokens)\n",
         params * 4 / 1048576.0, params * 2 / 1048576.0, kv / 1048576.0, r->slots, r->context);
  printf("  rollout split: with several train ranks each plays its share (whole groups), then they exchange "
         "them: every rank holds all %d, at most %.1f MiB (%d tokens each; twice that during the exchange)\n",
         g->tasks_per_step * g->group_size, held / 1048576.0, r->context);
}

// ---- the run ----------------------------------------------------------------------------------

static int uses_env_ranks(const DistRoles *roles) { return roles && roles->layout.num_env > 0; }

int grpo_run_init(GrpoRun *run, const GrpoSetup *setup, GemmaModel *model, const char *init_dir,
                  const char *tokenizer_path, const DistRoles *roles, Communicator *world, TrainObjective *obj,
                  TrainLoopConfig *loop, FimiError *err) {
  memset(run, 0, sizeof *run);
  run->setup = *setup;
  if (!tokenizer_path || !tokenizer_path[0])
    return fimi_fail(err, "grpo needs the tokenizer: %s has no tokenizer.json", init_dir);
  if (task_list_load(setup->tasks_path, &run->tasks, err) != 0) return fimi_fail_wrap(err, "env.tasks");
  if (setup->val_path[0]) {
    if (task_list_load(setup->val_path, &run->val, err) != 0) return fimi_fail_wrap(err, "env.val_tasks");
    run->have_val = 1;
  }
  if (tokenizer_load_file(tokenizer_path, &run->tok, err) != 0) return -1;
  if (tokenizer_vocab_size(run->tok) > model->config.vocab_size)
    return fimi_fail(err, "%s has %d tokens but the model only %d", tokenizer_path, tokenizer_vocab_size(run->tok),
                     model->config.vocab_size);
  double temperature = 0;
  if (endpoint_customer_client(setup->config, &run->customer, &temperature, err) != 0) return -1;
  int rc = uses_env_ranks(roles) ? env_client_mpi_create(&run->env, &run->tasks, roles, world, err)
                                 : env_client_local_create(&run->env, &run->tasks, err);
  if (rc != 0) return -1;
  run->have_env = 1;
  // The customer of in-process episodes (env ranks set their own).
  if (!uses_env_ranks(roles)) env_world_set_customer_model(env_client_local_world(&run->env), run->customer, temperature);
  if (run->have_val) {
    if (env_client_local_create(&run->val_env, &run->val, err) != 0) return -1;
    run->have_val_env = 1;
    env_world_set_customer_model(env_client_local_world(&run->val_env), run->customer, temperature);
  }
  if (setup->grpo.loss.kl_coef > 0) {
    if (gemma_load_pretrained(&run->reference, init_dir, err) != 0) return fimi_fail_wrap(err, "grpo reference model");
    run->have_reference = 1;
  }
  GrpoModelAccess access;
  run->cpu = (GrpoCpuAccess){setup->prefill_chunk, setup->row_invariant};
  grpo_access_cpu(&access, &run->cpu);
  return grpo_objective_init(&run->objective, &setup->grpo, &model->config, &run->tasks,
                             run->have_val ? &run->val : NULL, &run->env, run->have_val_env ? &run->val_env : NULL,
                             run->tok, run->have_reference ? &run->reference : NULL, &access, obj, loop, err);
}

void grpo_run_free(GrpoRun *run) {
  grpo_objective_free(&run->objective);
  if (run->have_env) env_client_free(&run->env);
  if (run->have_val_env) env_client_free(&run->val_env);
  if (run->have_reference) gemma_model_free(&run->reference);
  openai_client_free(run->customer);
  tokenizer_free(run->tok);
  task_list_free(&run->tasks);
  if (run->have_val) task_list_free(&run->val);
  memset(run, 0, sizeof *run);
}

void grpo_run_print_summary(const GrpoRun *run) {
  const GrpoStepStats *st = &run->objective.last;
  printf("fimi train: grpo last step reward %.3f (strict %.3f, set %.3f), %.0f tokens an episode, zero-variance "
         "groups %d of %d",
         st->reward_mean, st->strict_total, st->total, st->gen_tokens, st->groups.zero_variance, st->groups.groups);
  if (run->have_val) printf(", validation best %.4f", run->objective.best_val);
  printf("\n");
}

int grpo_serve_env(const GrpoSetup *setup, const DistRoles *roles, Communicator *world, FimiError *err) {
  TaskList tasks;
  if (task_list_load(setup->tasks_path, &tasks, err) != 0) return fimi_fail_wrap(err, "env.tasks");
  EnvServeStats st = {0};
  OpenAIClient *customer = NULL;
  double temperature = 0;
  int rc = endpoint_customer_client(setup->config, &customer, &temperature, err);
  if (rc == 0) rc = env_rank_serve(&tasks, roles, world, customer, temperature, &st, err);
  openai_client_free(customer);
  if (rc == 0)
    log_info("env rank %d: %lld episodes, %lld requests, %lld failed, %.2f s in the environment", roles->role_index,
             (long long)st.episodes, (long long)st.requests, (long long)st.failed, st.env_seconds);
  task_list_free(&tasks);
  return rc;
}
