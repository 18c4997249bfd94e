// core/hash.c: FNV-1a and splitmix64's finalizer (see hash.h), written from
// their published definitions.
#include "core/hash.h"

#define FNV1A_PRIME 1099511628211ULL

uint64_t hash_fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = data;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * FNV1A_PRIME;
  return h;
}

uint64_t hash_fnv1a_text(uint64_t h, const char *text) {
  for (const unsigned char *p = (const unsigned char *)text; *p; p++) h = (h ^ *p) * FNV1A_PRIME;
  return h;
}

uint64_t hash_mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
