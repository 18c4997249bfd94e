// core/fileio.h: whole-file reads and atomic writes. Defines
// file_read_all, file_write_atomic, path_join, dir_create.
#ifndef FIMI_CORE_FILEIO_H
#define FIMI_CORE_FILEIO_H

#include <stddef.h>

#include "core/error.h"

// Reads a whole file into a malloc'd buffer with a trailing NUL (not counted
// in *size). Refuses files larger than max_bytes.
char *file_read_all(const char *path, size_t max_bytes, size_t *size, FimiError *err);
// Writes to path.tmp then renames, so a crash never leaves a half file.
int file_write_atomic(const char *path, const void *data, size_t size, FimiError *err);
// out = a + "/" + b; fails if it does not fit.
int path_join(char *out, size_t out_size, const char *a, const char *b, FimiError *err);
// mkdir -p for one level (parent must exist); ok if it already exists.
int dir_create(const char *path, FimiError *err);

#endif
