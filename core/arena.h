// core/arena.h: a bump allocator for buffers that live and die together
// (a step's scratch, a parsed file). Defines Arena, arena_init, arena_alloc,
// arena_reset, arena_free. Allocations are 64-byte aligned (cache lines, SIMD).
#ifndef FIMI_CORE_ARENA_H
#define FIMI_CORE_ARENA_H

#include <stddef.h>

#include "core/error.h"

typedef struct Arena {
  unsigned char *base;
  size_t capacity;
  size_t used;
  size_t peak;
} Arena;

int arena_init(Arena *arena, size_t capacity, FimiError *err);
// Returns NULL (and fills err) when the arena is full; never grows, so
// pointers already handed out stay valid.
void *arena_alloc(Arena *arena, size_t bytes, FimiError *err);
// Zeroed allocation.
void *arena_calloc(Arena *arena, size_t bytes, FimiError *err);
void arena_reset(Arena *arena);
void arena_free(Arena *arena);

#endif
