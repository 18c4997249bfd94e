// core/error.h: the error value library code returns instead of exiting.
// Defines FimiError and fimi_fail(). Convention everywhere in fimi: a function
// that can fail returns int (0 ok, -1 failed) and fills a caller-owned
// FimiError whose message names the file, line or field that was wrong.
// Only cmd/ decides to print and exit.
#ifndef FIMI_CORE_ERROR_H
#define FIMI_CORE_ERROR_H

#include <stddef.h>

// C++ callers (kernels/cuda/*.cu) see C linkage.
#ifdef __cplusplus
extern "C" {
#endif

#define FIMI_ERROR_MESSAGE_MAX 1024

typedef struct FimiError {
  int failed;
  char message[FIMI_ERROR_MESSAGE_MAX];
} FimiError;

// Records a printf-style message in err (if non-NULL) and returns -1, so that
// `return fimi_fail(err, "...")` is the idiom for failing.
int fimi_fail(FimiError *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Prefixes an existing message with context ("reading x.safetensors: ...").
int fimi_fail_wrap(FimiError *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void fimi_error_clear(FimiError *err);

// Allocation that reports failure through err instead of returning silently.
void *fimi_malloc(size_t bytes, FimiError *err);
void *fimi_calloc(size_t count, size_t size, FimiError *err);

#ifdef __cplusplus
}
#endif

#endif
