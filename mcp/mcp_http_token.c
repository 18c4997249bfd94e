// mcp/mcp_http_token.c: reading and checking the HTTP transport's Bearer
// token (see mcp_http_token.h).
#include "mcp/mcp_http_token.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/fileio.h"

static int check_token(const char *token, size_t n, const char *source, FimiError *err) {
  if (n < MCP_TOKEN_MIN_CHARS || n > MCP_TOKEN_MAX_CHARS)
    return fimi_fail(err, "%s: the token must be %d to %d characters (it has %zu)", source, MCP_TOKEN_MIN_CHARS,
                     MCP_TOKEN_MAX_CHARS, n);
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

static int load_file(const char *path, char *out, size_t out_size, FimiError *err) {
  struct stat st;
  if (stat(path, &st) != 0) return fimi_fail(err, "--token-file %s: cannot be read", path);
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return fimi_fail(err, "--token-file %s: readable by others (chmod 600 it)", path);
  size_t size = 0;
  char *text = file_read_all(path, 2 * MCP_TOKEN_MAX_CHARS, &size, err);
  if (!text) return -1;
  int rc = strlen(text) == size ? copy_checked(text, path, out, out_size, err)
                                : fimi_fail(err, "--token-file %s: holds a NUL byte", path);
  free(text);
  return rc;
}

int mcp_http_token_load(const char *path, const char *env_value, char *out, size_t out_size, FimiError *err) {
  if (path) return load_file(path, out, out_size, err);
  if (env_value) return copy_checked(env_value, MCP_TOKEN_ENV, out, out_size, err);
  return fimi_fail(err, "--http needs a token: --token-file FILE or the environment variable %s", MCP_TOKEN_ENV);
}
