// tests/fuzz/fuzz_corpus_manifest.c: libFuzzer target for the task corpus
// manifest reader (corpus_manifest_parse, env/tasks/corpus_io.c), the
// untrusted file `fimi env corpus report` reads. Any input must either fail
// with a message or give a manifest whose values are in range: split files
// named as the splits are, counts non-negative, families with known use
// cases and kinds, and a population the image seed agrees with.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "env/tasks/corpus.h"

static CorpusManifest manifest;  // large: kept off the stack

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FimiError err = {0};
  if (corpus_manifest_parse((const char *)data, size, "fuzz.json", &manifest, &err) != 0) {
    if (!err.failed || !err.message[0]) abort();
    return 0;
  }
  const CorpusManifest *m = &manifest;
  if (m->customers < 1 || m->customers > BANK_MAX_CUSTOMERS || bank_image_seed_customers(m->image_seed) != m->customers)
    abort();
  if (m->num_families < 0 || m->num_families > CORPUS_MAX_FAMILIES || m->total_target < 0 || m->image_bytes < 0) abort();
  for (int s = 0; s < CORPUS_SPLIT_COUNT; s++)
    if (strcmp(m->files[s].name, corpus_split_file((CorpusSplit)s)) || m->files[s].tasks < 0 || m->files[s].bytes < 0)
      abort();
  for (int g = 0; g < CORPUS_GATE_COUNT; g++)
    if (strcmp(m->gates[g].name, corpus_gate_name((CorpusGate)g)) || m->gates[g].rejected < 0) abort();
  for (int f = 0; f < m->num_families; f++) {
    const CorpusFamily *x = &m->families[f];
    if ((unsigned)x->use_case >= TASK_USE_COUNT || (unsigned)x->kind >= TASK_KIND_COUNT || x->tasks < 0) abort();
    if (memchr(x->name, '\0', sizeof x->name) == NULL) abort();
  }
  return 0;
}
