// core/fileio.c: whole-file reads and atomic writes (see fileio.h).
#include "core/fileio.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *file_read_all(const char *path, size_t max_bytes, size_t *size, FimiError *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fimi_fail(err, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  if (fseek(f, 0, SEEK_END) != 0) {
    fclose(f);
    fimi_fail(err, "%s: cannot seek", path);
    return NULL;
  }
  long length = ftell(f);
  if (length < 0 || (size_t)length > max_bytes) {
    fclose(f);
    fimi_fail(err, "%s: size %ld exceeds the limit of %zu bytes", path, length, max_bytes);
    return NULL;
  }
  rewind(f);
  char *data = malloc((size_t)length + 1);
  if (!data) {
    fclose(f);
    fimi_fail(err, "%s: out of memory reading %ld bytes", path, length);
    return NULL;
  }
  size_t got = fread(data, 1, (size_t)length, f);
  fclose(f);
  if (got != (size_t)length) {
    free(data);
    fimi_fail(err, "%s: short read (%zu of %ld bytes)", path, got, length);
    return NULL;
  }
  data[length] = '\0';
  if (size) *size = (size_t)length;
  return data;
}

int file_write_atomic(const char *path, const void *data, size_t size, FimiError *err) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    return fimi_fail(err, "%s: path too long", path);
  FILE *f = fopen(tmp, "wb");
  if (!f) return fimi_fail(err, "%s: cannot create: %s", tmp, strerror(errno));
  size_t wrote = fwrite(data, 1, size, f);
  int close_rc = fclose(f);
  if (wrote != size || close_rc != 0) {
    remove(tmp);
    return fimi_fail(err, "%s: write failed: %s", tmp, strerror(errno));
  }
  if (rename(tmp, path) != 0) {
    remove(tmp);
    return fimi_fail(err, "%s: rename failed: %s", path, strerror(errno));
  }
  return 0;
}

int path_join(char *out, size_t out_size, const char *a, const char *b, FimiError *err) {
  int n = snprintf(out, out_size, "%s/%s", a, b);
  if (n < 0 || (size_t)n >= out_size) return fimi_fail(err, "path too long: %s/%s", a, b);
  return 0;
}

int dir_create(const char *path, FimiError *err) {
  if (mkdir(path, 0755) == 0 || errno == EEXIST) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
    return fimi_fail(err, "%s: exists and is not a directory", path);
  }
  return fimi_fail(err, "%s: cannot create directory: %s", path, strerror(errno));
}
