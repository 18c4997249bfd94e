// cmd/cmd_info.c: `fimi info [PATH]`. Without PATH: build features and CUDA
// devices. With a model directory: config summary, parameter count and the
// tensor table of its safetensors file(s). With a .safetensors file: its
// tensor table.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd/cli.h"
#include "core/fileio.h"
#include "core/json.h"
#include "kernels/device.h"
#include "model/gemma_config.h"
#include "model/safetensors.h"

static void print_build_info(void) {
  printf("fimi %s (commit %s)\n", cli_fimi_version(), cli_git_commit());
  printf("fimi build: CPU backend float32 (BLAS, OpenMP); CUDA backend %s\n",
         cuda_backend_compiled() ? "compiled" : "not compiled");
  cli_print_blas(stdout);
  int count = cuda_device_count();
  if (count <= 0) {
    printf("CUDA devices: none available on this machine\n");
    return;
  }
  for (int i = 0; i < count; i++) {
    DeviceInfo info;
    FimiError err = {0};
    if (cuda_device_info(i, &info, &err) != 0) {
      printf("CUDA device %d: %s\n", i, err.message);
      continue;
    }
    printf("CUDA device %d: %s, %.1f GiB, compute capability %d.%d, %d SMs\n", i, info.name,
           (double)info.total_memory_bytes / (1024.0 * 1024.0 * 1024.0), info.compute_major, info.compute_minor,
           info.multiprocessors);
  }
}

static void format_shape(const SafetensorsTensor *t, char *out, size_t size) {
  size_t used = (size_t)snprintf(out, size, "[");
  for (int d = 0; d < t->ndim && used < size; d++)
    used += (size_t)snprintf(out + used, size - used, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
  if (used < size) snprintf(out + used, size - used, "]");
}

static int print_tensor_table(const char *path, int64_t *total_elements, FimiError *err) {
  SafetensorsFile file;
  if (safetensors_open(&file, path, err) != 0) return -1;
  printf("%s: %d tensors\n", path, file.num_tensors);
  printf("  %-60s %-5s %s\n", "name", "dtype", "shape");
  for (int i = 0; i < file.num_tensors; i++) {
    const SafetensorsTensor *t = &file.tensors[i];
    char shape[128];
    format_shape(t, shape, sizeof shape);
    printf("  %-60s %-5s %s\n", t->name, t->dtype_name, shape);
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    *total_elements += n;
  }
  safetensors_close(&file);
  return 0;
}

// Sharded checkpoints list their files in the index's weight_map.
static int print_sharded_tables(const char *dir, const char *index_path, int64_t *total, FimiError *err) {
  cJSON *index = json_parse_file(index_path, 64u << 20, err);
  if (!index) return -1;
  const cJSON *map = cJSON_GetObjectItemCaseSensitive(index, "weight_map");
  if (!cJSON_IsObject(map)) {
    cJSON_Delete(index);
    return fimi_fail(err, "%s: missing object \"weight_map\"", index_path);
  }
  char printed[64][256];
  int num_printed = 0, rc = 0;
  for (const cJSON *entry = map->child; entry && rc == 0; entry = entry->next) {
    if (!cJSON_IsString(entry)) continue;
    int seen = 0;
    for (int i = 0; i < num_printed; i++) seen |= !strcmp(printed[i], entry->valuestring);
    if (seen || num_printed == 64) continue;
    snprintf(printed[num_printed++], 256, "%s", entry->valuestring);
    char path[4096];
    rc = path_join(path, sizeof path, dir, entry->valuestring, err);
    if (rc == 0) rc = print_tensor_table(path, total, err);
  }
  cJSON_Delete(index);
  return rc;
}

static void print_config_summary(const GemmaConfig *c) {
  int sliding = 0;
  for (int i = 0; i < c->num_hidden_layers; i++) sliding += c->layer_is_sliding[i];
  printf("architecture: %s\n", c->family == GEMMA_FAMILY_GEMMA2   ? "gemma2"
                                : c->family == GEMMA_FAMILY_GEMMA4 ? "gemma4_text"
                                                                   : "gemma3_text");
  printf("layers %d (%d sliding, window %d), hidden %d, intermediate %d, heads %d, kv heads %d, head_dim %d\n",
         c->num_hidden_layers, sliding, c->sliding_window, c->hidden_size, c->intermediate_size,
         c->num_attention_heads, c->num_key_value_heads, c->head_dim);
  printf("vocab %d, rope theta %g (sliding %g, linear scaling %g), query_pre_attn_scalar %g\n", c->vocab_size,
         c->rope_theta, c->rope_local_base_freq, c->rope_scaling_factor, c->query_pre_attn_scalar);
  printf("softcaps: attention %g, final %g (0 = none)\n", c->attn_logit_softcapping, c->final_logit_softcapping);
  if (c->family == GEMMA_FAMILY_GEMMA4)
    printf("gemma 4: per-layer inputs %d, full layers head_dim %d (kv heads %d, keys as values %d), "
           "%d kv-shared layers (double-wide MLP %d), rope on %g of full layers' dims\n",
           c->hidden_size_per_layer_input, c->global_head_dim,
           c->num_global_key_value_heads ? c->num_global_key_value_heads : c->num_key_value_heads, c->attention_k_eq_v,
           c->num_kv_shared_layers, c->use_double_wide_mlp, c->partial_rotary_factor);
  printf("parameters (tied embedding once): %lld\n", (long long)gemma_config_param_count(c));
}

static int info_path(const char *path, FimiError *err) {
  struct stat st;
  if (stat(path, &st) != 0) return fimi_fail(err, "%s: no such file or directory", path);
  int64_t total = 0;
  if (!S_ISDIR(st.st_mode)) {
    if (print_tensor_table(path, &total, err) != 0) return -1;
    printf("elements: %lld\n", (long long)total);
    return 0;
  }
  char config_path[4096], weights_path[4096], index_path[4096];
  if (path_join(config_path, sizeof config_path, path, "config.json", err) != 0) return -1;
  if (path_join(weights_path, sizeof weights_path, path, "model.safetensors", err) != 0) return -1;
  if (path_join(index_path, sizeof index_path, path, "model.safetensors.index.json", err) != 0) return -1;
  GemmaConfig config;
  if (gemma_config_load_json(&config, config_path, err) != 0) return -1;
  print_config_summary(&config);
  int rc = stat(weights_path, &st) == 0 ? print_tensor_table(weights_path, &total, err)
                                         : print_sharded_tables(path, index_path, &total, err);
  if (rc != 0) return -1;
  printf("elements in files: %lld\n", (long long)total);
  return 0;
}

int cmd_info(int argc, char **argv) {
  FimiError err = {0};
  CliOptions opts;
  int rest = cli_parse_common(&opts, argc, argv, &err);
  if (rest < 0) return cli_fail("info", &err);
  if (rest >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    printf("usage: fimi info [PATH]\n  no PATH: build features and CUDA devices\n"
           "  PATH: a model directory (config.json + safetensors) or a .safetensors file\n");
    return 0;
  }
  if (rest >= 2 && argv[1][0] == '-') {
    fprintf(stderr, "fimi info: unknown option %s (see fimi info --help)\n", argv[1]);
    return CLI_EXIT_USAGE;
  }
  if (rest > 2) {
    fprintf(stderr, "fimi info: expected at most one PATH\n");
    return CLI_EXIT_USAGE;
  }
  if (rest == 1) {
    print_build_info();
    return 0;
  }
  return info_path(argv[1], &err) == 0 ? 0 : cli_fail("info", &err);
}
