// net/http_body.c: collecting a request body up to a limit (see http_body.h).
#include "net/http_body.h"

#include <stdlib.h>
#include <string.h>

int http_body_append(HttpBody *b, const char *data, size_t n, size_t limit) {
  if (b->too_large || b->length + n > limit) {
    b->too_large = 1;
    b->dropped += n;
    return b->dropped > HTTP_BODY_DISCARD_FACTOR * limit ? -1 : 0;
  }
  if (b->length + n + 1 > b->capacity) {
    size_t capacity = b->capacity ? b->capacity : 4096;
    while (capacity < b->length + n + 1) capacity *= 2;
    char *grown = realloc(b->data, capacity);
    if (!grown) return -1;
    b->data = grown;
    b->capacity = capacity;
  }
  memcpy(b->data + b->length, data, n);
  b->length += n;
  b->data[b->length] = '\0';
  return 0;
}

void http_body_free(HttpBody *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}
