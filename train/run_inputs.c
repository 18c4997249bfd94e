// train/run_inputs.c: SHA-256 digests of a run's input files (see
// run_inputs.h); the hash is OpenSSL's (libcrypto, already loaded with
// libcurl), so digests match `sha256sum`.
#include "train/run_inputs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "core/json.h"
#include "core/log.h"

#define CHUNK ((size_t)1 << 20)

static int hash_stream(FILE *f, EVP_MD_CTX *ctx, unsigned char *buf, int64_t *bytes, const volatile int *stop) {
  size_t n;
  while ((n = fread(buf, 1, CHUNK, f)) > 0) {
    if ((stop && *stop) || EVP_DigestUpdate(ctx, buf, n) != 1) return -1;
    *bytes += (int64_t)n;
  }
  return ferror(f) ? -1 : 0;
}

int run_input_sha256(const char *path, char hex[65], int64_t *bytes, const volatile int *stop, FimiError *err) {
  hex[0] = 0;
  *bytes = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return fimi_fail(err, "cannot read %s: %s", path, strerror(errno));
  EVP_MD_CTX *ctx = EVP_MD_CTX_new();
  unsigned char *buf = malloc(CHUNK), digest[32];
  unsigned int len = 0;
  int rc = ctx && buf && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 ? 0 : -1;
  if (rc == 0) rc = hash_stream(f, ctx, buf, bytes, stop);
  if (rc == 0 && (EVP_DigestFinal_ex(ctx, digest, &len) != 1 || len != 32)) rc = -1;
  fclose(f);
  free(buf);
  EVP_MD_CTX_free(ctx);
  if (rc != 0) return fimi_fail(err, "cannot digest %s%s", path, stop && *stop ? " (stopped)" : "");
  for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  return 0;
}

static cJSON *describe(RunInput *in, const volatile int *stop) {
  FimiError err = {0};
  cJSON *o = cJSON_CreateObject();
  if (!o || !cJSON_AddStringToObject(o, "path", in->path)) return o;
  if (run_input_sha256(in->path, in->sha256, &in->bytes, stop, &err) != 0) {
    log_warn("%s: %s", in->name, err.message);
    cJSON_AddStringToObject(o, "error", err.message);
    return o;
  }
  cJSON_AddStringToObject(o, "sha256", in->sha256);
  cJSON_AddNumberToObject(o, "bytes", (double)in->bytes);
  return o;
}

int run_inputs_write(const char *path, RunInput *inputs, int count, const volatile int *stop, FimiError *err) {
  cJSON *root = cJSON_CreateObject();
  if (!root) return fimi_fail(err, "out of memory");
  for (int i = 0; i < count; i++) {
    inputs[i].sha256[0] = 0;
    inputs[i].bytes = 0;
    if (!inputs[i].path || !inputs[i].path[0]) continue;
    cJSON *item = describe(&inputs[i], stop);
    if (item) cJSON_AddItemToObject(root, inputs[i].name, item);
  }
  int rc = json_write_file(path, root, err);
  cJSON_Delete(root);
  return rc;
}
