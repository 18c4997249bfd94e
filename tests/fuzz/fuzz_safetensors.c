// tests/fuzz/fuzz_safetensors.c: libFuzzer target for the safetensors reader.
// Feeds the input to safetensors_parse as a whole file. A file that passes
// must be safe to use: every float tensor is read back, and every byte a
// tensor claims must lie inside the input. A rejected file must carry a
// message naming the rule.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/safetensors.h"

#define MAX_READ_ELEMENTS (1u << 22)

static void check_accepted(const SafetensorsFile *f, const uint8_t *data, size_t size) {
  const unsigned char *end = data + size;
  for (int i = 0; i < f->num_tensors; i++) {
    const SafetensorsTensor *t = &f->tensors[i];
    if (t->begin > t->end || t->end > f->data_size || f->data + f->data_size != end) abort();
    if (i > 0 && t->begin != f->tensors[i - 1].end) abort();
    if (t->dtype == SAFETENSORS_OTHER) continue;
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    if (n > MAX_READ_ELEMENTS) continue;
    float *out = malloc((n ? n : 1) * sizeof(float));
    FimiError err = {0};
    if (safetensors_read_f32(f, t, out, n, &err) != 0) abort();
    free(out);
    if (safetensors_find(f, t->name) == NULL) abort();
  }
  if (f->num_tensors > 0 && f->tensors[f->num_tensors - 1].end != f->data_size) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  SafetensorsFile f;
  FimiError err = {0};
  if (safetensors_parse(&f, data, size, "fuzz.safetensors", &err) == 0) {
    check_accepted(&f, data, size);
    safetensors_close(&f);
  } else if (!err.failed || !strstr(err.message, "fuzz.safetensors") || !strchr(err.message, '(')) {
    fprintf(stderr, "rejection without a named rule: %s\n", err.message);
    abort();
  }
  return 0;
}
