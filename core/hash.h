// core/hash.h: the non-cryptographic hashes fimi uses for seeds, digests and
// hash tables, in one place. Defines hash_fnv1a (FNV-1a over bytes,
// continuing from a given state), hash_fnv1a_text (over a NUL-terminated
// string), hash_mix64 (splitmix64's finalizer) and the two starting states.
#ifndef FIMI_CORE_HASH_H
#define FIMI_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

// FNV-1a's 64-bit offset basis.
#define HASH_FNV1A_BASIS 14695981039346656037ULL
// The basis with its last digit missing. Most of fimi's hashes (task and
// evaluation seeds, database digests, checkpoint text hashes) were first
// written with it and keep it, so generated tasks and saved checkpoints stay
// as they were. Still a fine starting state: only its fixed value matters.
#define HASH_FNV1A_SHORT_BASIS 1469598103934665603ULL

// FNV-1a of n bytes, starting from state h (a basis above, or the result of
// an earlier call to hash more bytes).
uint64_t hash_fnv1a(uint64_t h, const void *data, size_t n);
// FNV-1a of a NUL-terminated string (without the NUL), from state h.
uint64_t hash_fnv1a_text(uint64_t h, const char *text);
// splitmix64's finalizer: a bijection that spreads every input bit over the
// output (for hash tables keyed by structured values and for derived seeds).
uint64_t hash_mix64(uint64_t x);

#endif
