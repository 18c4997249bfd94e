// cmd/cmd_score.c: `fimi score --model DIR --ids 2,45,17`: prints the
// per-token log-probs log p(ids[t] | ids[<t]) for t >= 1 as JSON, computed by
// the fused LM-head op. Used by the Hugging Face parity test. With --device
// cuda the forward runs on GPU 0 (model/gemma_cuda.h: bf16 weights and
// activations, fp32 accumulation), so its log-probs differ from the CPU's by
// bf16 rounding (~1e-2 absolute; tests/gpu/test_gpu_model.c).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/cli.h"
#include "kernels/device.h"
#include "model/gemma.h"
#include "model/gemma_cuda.h"
#include "model/weights.h"

// logprobs (count) of one sequence on GPU 0: upload, one forward.
static int forward_cuda(GemmaModel *model, const int *ids, const int *targets, int count, float *logprobs,
                        FimiError *err) {
#ifdef FIMI_HAVE_CUDA
  CudaContext *ctx = NULL;
  GemmaCudaModel gpu;
  if (cuda_context_create(&ctx, 0, err) != 0) return -1;
  int rc = gemma_cuda_create(&gpu, &model->config, ctx, err);
  if (rc == 0) {
    rc = gemma_cuda_upload_weights(&gpu, model, err);
    if (rc == 0) rc = gemma_cuda_forward(&gpu, ids, targets, 1, count, logprobs, err);
    gemma_cuda_free(&gpu);
  }
  cuda_context_destroy(ctx);
  return rc;
#else
  (void)model, (void)ids, (void)targets, (void)count, (void)logprobs;
  return fimi_fail(err, "this fimi was built without the CUDA backend");
#endif
}

static int score_ids(GemmaModel *model, Device device, const int *ids, int count, FimiError *err) {
  if (count < 2) return fimi_fail(err, "--ids: need at least 2 tokens to score");
  int *targets = malloc(sizeof(int) * (size_t)count);
  float *logprobs = malloc(sizeof(float) * (size_t)count);
  if (!targets || !logprobs) {
    free(targets);
    free(logprobs);
    return fimi_fail(err, "out of memory");
  }
  for (int t = 0; t < count; t++) targets[t] = t + 1 < count ? ids[t + 1] : -1;
  int rc = device == DEVICE_CUDA ? forward_cuda(model, ids, targets, count, logprobs, err)
                                 : gemma_forward(model, ids, targets, 1, count, logprobs, err);
  if (rc == 0) {
    printf("{\"logprobs\": [");
    for (int t = 0; t + 1 < count; t++) printf("%s%.9g", t ? ", " : "", logprobs[t]);
    printf("]}\n");
  }
  free(targets);
  free(logprobs);
  return rc;
}

int cmd_score(int argc, char **argv) {
  FimiError err = {0};
  CliOptions opts;
  int rest = cli_parse_common(&opts, argc, argv, &err);
  if (rest < 0) return cli_fail("score", &err);
  const char *model_dir = NULL, *ids_text = NULL;
  for (int i = 1; i < rest; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: fimi score --model DIR --ids ID,ID,... [--device cpu|cuda]\n"
             "  prints {\"logprobs\": [...]}: log p(ids[t] | ids[<t]) for t = 1..n-1\n"
             "  --device cuda: on GPU 0 in bf16 (differs from the fp32 CPU result by ~1e-2)\n");
      return 0;
    }
    if (strcmp(argv[i], "--model") && strcmp(argv[i], "--ids")) {
      fimi_fail(&err, "unknown option %s (see fimi score --help)", argv[i]);
      return cli_fail("score", &err);
    }
    const char *flag = argv[i], *value = cli_flag_value(rest, argv, &i, &err);
    if (!value) return cli_fail("score", &err);
    if (!strcmp(flag, "--model")) model_dir = value;
    else if (!strcmp(flag, "--ids")) ids_text = value;
    else {
      fimi_fail(&err, "unknown option %s (see fimi score --help)", flag);
      return cli_fail("score", &err);
    }
  }
  if (!model_dir || !ids_text) {
    fimi_fail(&err, "--model DIR and --ids are required");
    return cli_fail("score", &err);
  }
  if (device_require(opts.device, &err) != 0) return cli_fail("score", &err);
  GemmaModel model;
  if (gemma_load_pretrained(&model, model_dir, &err) != 0) return cli_fail("score", &err);
  int *ids = NULL, count = 0;
  int rc = parse_token_ids(ids_text, model.config.vocab_size, &ids, &count, &err);
  if (rc == 0) rc = score_ids(&model, opts.device, ids, count, &err);
  free(ids);
  gemma_model_free(&model);
  return rc == 0 ? 0 : cli_fail("score", &err);
}
