// core/rng.h: deterministic random numbers (xoshiro256**, seeded by
// splitmix64). Defines Rng, rng_seed, rng_next_u64, rng_uniform (float in
// [0,1)), rng_normal (Box-Muller). The same seed gives the same stream on
// every machine: no wall clock, no global state.
#ifndef FIMI_CORE_RNG_H
#define FIMI_CORE_RNG_H

#include <stdint.h>

typedef struct Rng {
  uint64_t state[4];
} Rng;

void rng_seed(Rng *rng, uint64_t seed);
uint64_t rng_next_u64(Rng *rng);
// Uniform in [0, 1) with 24 random bits (exactly representable in float).
float rng_uniform(Rng *rng);
// Uniform in [0, 1) with 53 random bits.
double rng_uniform_double(Rng *rng);
// Standard normal sample, computed in double then returned.
double rng_normal(Rng *rng);
// Fills n floats with N(mean, std^2).
void rng_fill_normal(Rng *rng, float *out, long n, float mean, float std);
// A seed derived from two values (a seed and a step, task or index): a
// boost-style combination through splitmix64's finalizer, so nearby inputs
// give unrelated seeds.
uint64_t rng_mix(uint64_t a, uint64_t b);
// Fills n floats uniformly in [low, high).
void rng_fill_uniform(Rng *rng, float *out, long n, float low, float high);

#endif
