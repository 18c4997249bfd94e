// net/http_token.c: reading and checking the Bearer token of fimi's HTTP
// servers (see http_token.h).
#include "net/http_token.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/fileio.h"

static int check_token(const char *token, size_t n, const char *source, FimiError *err) {
  if (n < HTTP_TOKEN_MIN_CHARS || n > HTTP_TOKEN_MAX_CHARS)
    return fimi_fail(err, "%s: the token must be %d to %d characters (it has %zu)", source, HTTP_TOKEN_MIN_CHARS,
                     HTTP_TOKEN_MAX_CHARS, n);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)token[i] < 0x21 || (unsigned char)token[i] > 0x7e)
      return fimi_fail(err, "%s: the token may hold only visible ASCII characters (no spaces)", source);
  return 0;
}

// The text without leading and trailing whitespace, cut at the first line end.
static const char *trim(const char *text, size_t *n) {
  while (*text == ' ' || *text == '\t' || *text == '\r' || *text == '\n') text++;
  size_t length = strcspn(text, "\r\n");
  while (length > 0 && (text[length - 1] == ' ' || text[length - 1] == '\t')) length--;
  *n = length;
  return text;
}

static int copy_checked(const char *text, const char *source, char *out, size_t out_size, FimiError *err) {
  size_t n = 0;
  const char *token = trim(text, &n);
  if (check_token(token, n, source, err) != 0) return -1;
  if (n + 1 > out_size) return fimi_fail(err, "%s: token too long", source);
  memcpy(out, token, n);
  out[n] = '\0';
  return 0;
}

static int load_file(const char *path, const char *flag, char *out, size_t out_size, FimiError *err) {
  struct stat st;
  if (stat(path, &st) != 0) return fimi_fail(err, "%s %s: cannot be read", flag, path);
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return fimi_fail(err, "%s %s: readable by others (chmod 600 it)", flag, path);
  size_t size = 0;
  char *text = file_read_all(path, 2 * HTTP_TOKEN_MAX_CHARS, &size, err);
  if (!text) return -1;
  int rc = strlen(text) == size ? copy_checked(text, path, out, out_size, err)
                                : fimi_fail(err, "%s %s: holds a NUL byte", flag, path);
  free(text);
  return rc;
}

int http_token_load(const char *path, const char *file_flag, const char *env_name, const char *value, char *out,
                    size_t out_size, FimiError *err) {
  if (path) return load_file(path, file_flag, out, out_size, err);
  if (value) return copy_checked(value, env_name, out, out_size, err);
  return fimi_fail(err, "a token is needed: %s FILE or the environment variable %s", file_flag, env_name);
}

int http_secret_equal(const char *given, size_t given_length, const char *expected, size_t expected_length) {
  unsigned char diff = given_length != expected_length;
  for (size_t i = 0; i < expected_length; i++) {
    unsigned char g = i < given_length ? (unsigned char)given[i] : 0;
    diff |= (unsigned char)(g ^ (unsigned char)expected[i]);
  }
  return diff == 0;
}

int http_bearer_matches(const char *value, const char *expected) {
  if (!value) return 0;
  value += strspn(value, " \t");
  if (strncasecmp(value, "Bearer", 6) != 0 || (value[6] != ' ' && value[6] != '\t')) return 0;
  const char *token = value + 6 + strspn(value + 6, " \t");
  size_t n = strlen(token);
  while (n > 0 && (token[n - 1] == ' ' || token[n - 1] == '\t')) n--;
  return http_secret_equal(token, n, expected, strlen(expected));
}
