// tests/test_blas.c: the choice of OpenBLAS kernels (kernels/cpu/blas.h):
// blas_better_kernels on every kind of pick and CPU (a pick below the CPU's
// vector unit is replaced, one at or above it never is), blas_kernels_at_start
// leaving a user's OPENBLAS_CORETYPE alone, and blas_info / blas_describe
// naming the library and the kernels that run. The re-executed process and
// the training step on the replaced kernels: tests/cli_blas.sh.
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/blas.h"
#include "tests/test_util.h"

static int same(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

static void test_better_kernels(void) {
  struct {
    const char *core;
    CpuVectorUnit unit;
    const char *want;
  } cases[] = {
      {"Prescott", CPU_VECTOR_AVX512F, "SkylakeX"},   // an OpenBLAS older than the processor
      {"Prescott", CPU_VECTOR_AVX2_FMA, "Haswell"},
      {"Prescott", CPU_VECTOR_SSE, NULL},             // nothing better to run
      {"Nehalem", CPU_VECTOR_AVX2_FMA, "Haswell"},
      {"Sandybridge", CPU_VECTOR_AVX512F, "SkylakeX"},
      {"Haswell", CPU_VECTOR_AVX512F, "SkylakeX"},    // AVX2 kernels on an AVX-512 CPU
      {"Zen", CPU_VECTOR_AVX512F, "SkylakeX"},
      {"Haswell", CPU_VECTOR_AVX2_FMA, NULL},         // already the CPU's unit
      {"zen", CPU_VECTOR_AVX2_FMA, NULL},             // names compare case-insensitively
      {"SkylakeX", CPU_VECTOR_AVX512F, NULL},
      {"Cooperlake", CPU_VECTOR_AVX512F, NULL},
      {"SAPPHIRERAPIDS", CPU_VECTOR_AVX512F, NULL},
      {"", CPU_VECTOR_AVX512F, NULL},                 // no name: leave it
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *got = blas_better_kernels(cases[i].core, cases[i].unit);
    CHECK(same(got, cases[i].want), "%s on unit %d: got %s, want %s", cases[i].core, cases[i].unit,
          got ? got : "(none)", cases[i].want ? cases[i].want : "(none)");
  }
  CHECK(blas_better_kernels(NULL, CPU_VECTOR_AVX512F) == NULL, "a NULL core name is left alone");
}

static void test_user_setting_wins(void) {
  char detected[48];
  setenv("FIMI_BLAS_ASSUME_CORE", "Prescott", 1);
  unsetenv("FIMI_BLAS_DETECTED");
  unsetenv("OPENBLAS_CORETYPE");
  const char *want = blas_better_kernels("Prescott", cpu_vector_unit());
  const char *got = blas_kernels_at_start(detected, sizeof detected);
  CHECK(same(got, want), "assumed Prescott: got %s", got ? got : "(none)");
  CHECK(!strcmp(detected, "Prescott"), "detected: %s", detected);
  setenv("OPENBLAS_CORETYPE", "Prescott", 1);  // the user's (or the machine's) own choice
  CHECK(blas_kernels_at_start(detected, sizeof detected) == NULL, "OPENBLAS_CORETYPE set: fimi changes nothing");
  unsetenv("OPENBLAS_CORETYPE");
  setenv("FIMI_BLAS_DETECTED", "Prescott", 1);  // fimi already chose: no second restart
  CHECK(blas_kernels_at_start(detected, sizeof detected) == NULL, "after fimi's restart: no loop");
  unsetenv("FIMI_BLAS_DETECTED");
  unsetenv("FIMI_BLAS_ASSUME_CORE");
}

static void test_info(void) {
  BlasInfo info;
  blas_info(&info);
  CHECK(info.library[0] && info.kernels[0] && info.threads >= 1, "library \"%s\" kernels \"%s\" threads %d",
        info.library, info.kernels, info.threads);
  CHECK(info.chosen_by && !strcmp(info.chosen_by, "detected"), "nothing forced in this process: %s",
        info.chosen_by ? info.chosen_by : "(null)");
  char line[320];
  blas_describe(&info, line, sizeof line);
  CHECK(strstr(line, info.library) && strstr(line, info.kernels) && strstr(line, "picked by the library"), "%s",
        line);
  blas_set_threads(1);
  blas_info(&info);
  CHECK(info.threads == 1, "blas_set_threads(1): %d threads", info.threads);
}

int main(void) {
  unsetenv("OPENBLAS_CORETYPE");  // (read at load; only blas_info's view of it matters here)
  unsetenv("FIMI_BLAS_DETECTED");
  test_better_kernels();
  test_user_setting_wins();
  test_info();
  TEST_MAIN_END();
}
