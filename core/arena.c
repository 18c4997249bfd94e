// core/arena.c: bump allocator (see arena.h).
#include "core/arena.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 64

int arena_init(Arena *arena, size_t capacity, FimiError *err) {
  memset(arena, 0, sizeof *arena);
  size_t rounded = (capacity + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
  if (rounded == 0) rounded = ARENA_ALIGN;
  arena->base = aligned_alloc(ARENA_ALIGN, rounded);
  if (!arena->base) return fimi_fail(err, "out of memory creating a %zu-byte arena", capacity);
  arena->capacity = rounded;
  return 0;
}

void *arena_alloc(Arena *arena, size_t bytes, FimiError *err) {
  size_t rounded = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
  if (rounded < bytes || rounded > arena->capacity - arena->used) {
    fimi_fail(err, "arena full: %zu bytes requested, %zu of %zu used", bytes, arena->used, arena->capacity);
    return NULL;
  }
  void *p = arena->base + arena->used;
  arena->used += rounded;
  if (arena->used > arena->peak) arena->peak = arena->used;
  return p;
}

void *arena_calloc(Arena *arena, size_t bytes, FimiError *err) {
  void *p = arena_alloc(arena, bytes, err);
  if (p) memset(p, 0, bytes);
  return p;
}

void arena_reset(Arena *arena) { arena->used = 0; }

void arena_free(Arena *arena) {
  free(arena->base);
  memset(arena, 0, sizeof *arena);
}
