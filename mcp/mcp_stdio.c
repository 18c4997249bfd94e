// mcp/mcp_stdio.c: newline-delimited messages over two streams (see
// mcp_stdio.h). Lines are read byte by byte into a buffer of the message
// limit, so a line with NUL bytes keeps its length and an endless line
// costs no more memory than the limit.
#include "mcp/mcp_stdio.h"

#include <stdlib.h>
#include <string.h>

#include "mcp/mcp_jsonrpc.h"

// Reads one line (without its '\n') into buf[0..cap). Returns the line's
// full length (which exceeds cap when it was cut) or -1 at end of input
// with no bytes read.
static long read_line(FILE *in, char *buf, size_t cap) {
  long length = 0;
  int c;
  while ((c = getc_unlocked(in)) != EOF && c != '\n') {
    if ((size_t)length < cap) buf[length] = (char)c;
    length++;
  }
  if (c == EOF && length == 0) return -1;
  return length;
}

static int write_line(FILE *out, const char *text, FimiError *err) {
  if (fputs(text, out) == EOF || fputc('\n', out) == EOF || fflush(out) != 0)
    return fimi_fail(err, "mcp stdio: writing a response failed");
  return 0;
}

int mcp_serve_stdio(McpServer *server, FILE *in, FILE *out, FimiError *err) {
  size_t cap = mcp_server_max_message_bytes(server);
  char *buf = fimi_malloc(cap + 1, err);
  if (!buf) return -1;
  int rc = 0;
  long length;
  while ((length = read_line(in, buf, cap)) >= 0) {
    if (length == 0 || (length == 1 && buf[0] == '\r')) continue;  // blank lines carry nothing
    char *response = NULL;
    if ((size_t)length > cap) {
      char message[96];
      snprintf(message, sizeof message, "Invalid Request: message larger than %zu bytes", cap);
      response = mcp_response_error(NULL, MCP_INVALID_REQUEST, message);
    } else {
      response = mcp_server_handle(server, buf, (size_t)length);
    }
    if (response) {
      rc = write_line(out, response, err);
      free(response);
      if (rc != 0) break;
    }
  }
  free(buf);
  return rc;
}
