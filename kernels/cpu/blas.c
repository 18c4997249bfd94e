// kernels/cpu/blas.c: which BLAS and which of its kernels the CPU backend
// runs, and the choice of better kernels at start (see blas.h).
#include "kernels/cpu/blas.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if defined(FIMI_BLAS_BLIS)
#include <blis.h>
#elif defined(FIMI_BLAS_SCIPY_OPENBLAS)
#define openblas_get_corename scipy_openblas_get_corename
#define openblas_get_config scipy_openblas_get_config
#define openblas_get_num_threads scipy_openblas_get_num_threads
#define openblas_set_num_threads scipy_openblas_set_num_threads
#endif

#if !defined(FIMI_BLAS_BLIS)
// "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ..." -> "OpenBLAS 0.3.21".
static void library_from_config(const char *config, char *out, size_t size) {
  while (*config == ' ') config++;
  const char *end = config;
  for (int words = 0; *end && words < 2; words++) {
    while (*end && *end != ' ') end++;
    if (words == 0)
      while (*end == ' ') end++;
  }
  snprintf(out, size, "%.*s", (int)(end - config), config);
}
#endif

static const char *env_nonempty(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

void blas_info(BlasInfo *info) {
  memset(info, 0, sizeof *info);
#if defined(FIMI_BLAS_BLIS)
  snprintf(info->library, sizeof info->library, "BLIS %s", bli_info_get_version_str());
  snprintf(info->kernels, sizeof info->kernels, "%s", bli_arch_string(bli_arch_query_id()));
  snprintf(info->detected, sizeof info->detected, "%s", info->kernels);
  info->chosen_by = env_nonempty("BLIS_ARCH_TYPE") ? "user" : "detected";
  info->threads = (int)bli_thread_get_num_threads();
#else
  library_from_config(openblas_get_config(), info->library, sizeof info->library);
  snprintf(info->kernels, sizeof info->kernels, "%s", openblas_get_corename());
  const char *forced = env_nonempty("OPENBLAS_CORETYPE"), *fimi_saw = env_nonempty("FIMI_BLAS_DETECTED");
  if (fimi_saw && forced && !strcasecmp(forced, info->kernels)) {
    info->chosen_by = "fimi";
    snprintf(info->detected, sizeof info->detected, "%s", fimi_saw);
  } else if (forced && !fimi_saw) {
    info->chosen_by = "user";
  } else {
    // Nothing forced, or fimi's request was not honoured (a build without
    // DYNAMIC_ARCH has one kernel set): the library's own pick runs.
    info->chosen_by = "detected";
    snprintf(info->detected, sizeof info->detected, "%s", info->kernels);
  }
  info->threads = openblas_get_num_threads();
#endif
}

void blas_describe(const BlasInfo *info, char *out, int size) {
  char why[96] = "";
  if (!strcmp(info->chosen_by, "fimi"))
    snprintf(why, sizeof why, "chosen by fimi; the library picked %s", info->detected);
  else if (!strcmp(info->chosen_by, "user"))
    snprintf(why, sizeof why, "set by %s", strncmp(info->library, "BLIS", 4) ? "OPENBLAS_CORETYPE" : "BLIS_ARCH_TYPE");
  else
    snprintf(why, sizeof why, "picked by the library");
  snprintf(out, (size_t)size, "%s, kernels %s (%s), %d thread%s", info->library, info->kernels, why, info->threads,
           info->threads == 1 ? "" : "s");
}

void blas_set_threads(int threads) {
#if defined(FIMI_BLAS_BLIS)
  bli_thread_set_num_threads(threads);
#else
  openblas_set_num_threads(threads);
#endif
}

CpuVectorUnit cpu_vector_unit(void) {
#if defined(__x86_64__) || defined(__i386__)
  // GCC's feature bits count a unit only when the OS saves its registers
  // (XGETBV), so a hypervisor that hides AVX-512 state yields AVX2 here.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return CPU_VECTOR_AVX512F;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return CPU_VECTOR_AVX2_FMA;
#endif
  return CPU_VECTOR_SSE;
}

static int name_in(const char *name, const char *const *list) {
  for (; *list; list++)
    if (!strcasecmp(name, *list)) return 1;
  return 0;
}

const char *blas_better_kernels(const char *core, CpuVectorUnit unit) {
  // OpenBLAS's x86-64 kernel sets by the widest unit they use.
  static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
  static const char *const avx2[] = {"Haswell", "Zen", "Excavator", NULL};
  if (!core || !*core) return NULL;
  int has_avx512 = name_in(core, avx512), has_avx2 = has_avx512 || name_in(core, avx2);
  if (unit == CPU_VECTOR_AVX512F && !has_avx512) return "SkylakeX";
  if (unit == CPU_VECTOR_AVX2_FMA && !has_avx2) return "Haswell";
  return NULL;
}

const char *blas_kernels_at_start(char *detected, int detected_size) {
  detected[0] = '\0';
#if defined(FIMI_BLAS_BLIS)
  return NULL;  // BLIS dispatches by cpuid itself and has no generic fallback to fix
#else
  if (env_nonempty("OPENBLAS_CORETYPE") || env_nonempty("FIMI_BLAS_DETECTED")) return NULL;
  const char *core = env_nonempty("FIMI_BLAS_ASSUME_CORE");
  if (!core) core = openblas_get_corename();
  snprintf(detected, (size_t)detected_size, "%s", core);
  return blas_better_kernels(core, cpu_vector_unit());
#endif
}

void blas_run_on_better_kernels(char **argv, int announce) {
  char detected[48];
  const char *better = blas_kernels_at_start(detected, sizeof detected);
  if (!better) return;
  if (announce)
    fprintf(stderr,
            "fimi: OpenBLAS picked its %s kernels, below this CPU's vector unit; running with "
            "OPENBLAS_CORETYPE=%s (set OPENBLAS_CORETYPE yourself to choose)\n",
            detected, better);
  setenv("OPENBLAS_CORETYPE", better, 1);
  setenv("FIMI_BLAS_DETECTED", detected, 1);
  execv("/proc/self/exe", argv);
  fprintf(stderr, "fimi: could not restart with OPENBLAS_CORETYPE=%s; going on with the %s kernels\n", better,
          detected);
  unsetenv("OPENBLAS_CORETYPE");
  unsetenv("FIMI_BLAS_DETECTED");
}
