// kernels/cuda/cublaslt_lazy.cu: dlopen of cuBLASLt (see cublaslt_lazy.cuh).
#include <dlfcn.h>

#include "kernels/cuda/cublaslt_lazy.cuh"

CublasLtApi cublaslt;

static int cublaslt_loaded = 0;

// Resolves one symbol into *slot (a function pointer of the matching type).
template <typename F>
static int resolve(void *lib, const char *name, F *slot, FimiError *err) {
  void *sym = dlsym(lib, name);
  if (!sym) return fimi_fail(err, "cuBLASLt: symbol %s not found (%s)", name, dlerror());
  *slot = reinterpret_cast<F>(sym);
  return 0;
}

int cublaslt_load(FimiError *err) {
  if (cublaslt_loaded) return 0;
  void *lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fimi_fail(err, "cannot load cuBLASLt (libcublasLt.so.13): %s", dlerror());
  CublasLtApi api;
  if (resolve(lib, "cublasLtCreate", &api.create, err) || resolve(lib, "cublasLtDestroy", &api.destroy, err) ||
      resolve(lib, "cublasLtMatmulDescCreate", &api.matmul_desc_create, err) ||
      resolve(lib, "cublasLtMatmulDescDestroy", &api.matmul_desc_destroy, err) ||
      resolve(lib, "cublasLtMatmulDescSetAttribute", &api.matmul_desc_set_attribute, err) ||
      resolve(lib, "cublasLtMatrixLayoutCreate", &api.matrix_layout_create, err) ||
      resolve(lib, "cublasLtMatrixLayoutDestroy", &api.matrix_layout_destroy, err) ||
      resolve(lib, "cublasLtMatmulPreferenceCreate", &api.matmul_preference_create, err) ||
      resolve(lib, "cublasLtMatmulPreferenceDestroy", &api.matmul_preference_destroy, err) ||
      resolve(lib, "cublasLtMatmulPreferenceSetAttribute", &api.matmul_preference_set_attribute, err) ||
      resolve(lib, "cublasLtMatmulAlgoGetHeuristic", &api.matmul_algo_get_heuristic, err) ||
      resolve(lib, "cublasLtMatmul", &api.matmul, err)) {
    dlclose(lib);
    return -1;
  }
  cublaslt = api;  // the library stays loaded for the life of the process
  cublaslt_loaded = 1;
  return 0;
}
