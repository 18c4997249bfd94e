// core/rng.c: xoshiro256** generator (see rng.h). Public-domain algorithm by
// Blackman and Vigna; written here from its published definition.
#include "core/rng.h"

#include <math.h>

#include "core/hash.h"

static uint64_t splitmix64(uint64_t *x) { return hash_mix64(*x += 0x9e3779b97f4a7c15ULL); }

uint64_t rng_mix(uint64_t a, uint64_t b) { return hash_mix64(a ^ (b + 0x9E3779B97F4A7C15ULL + (a << 6) + (a >> 2))); }

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_seed(Rng *rng, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) rng->state[i] = splitmix64(&x);
}

uint64_t rng_next_u64(Rng *rng) {
  uint64_t *s = rng->state;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

float rng_uniform(Rng *rng) { return (float)(rng_next_u64(rng) >> 40) * (1.0f / 16777216.0f); }

double rng_uniform_double(Rng *rng) { return (double)(rng_next_u64(rng) >> 11) * (1.0 / 9007199254740992.0); }

double rng_normal(Rng *rng) {
  // Box-Muller; 1 - u keeps the log argument in (0, 1].
  double u1 = 1.0 - rng_uniform_double(rng);
  double u2 = rng_uniform_double(rng);
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void rng_fill_normal(Rng *rng, float *out, long n, float mean, float std) {
  for (long i = 0; i < n; i++) out[i] = mean + std * (float)rng_normal(rng);
}

void rng_fill_uniform(Rng *rng, float *out, long n, float low, float high) {
  for (long i = 0; i < n; i++) out[i] = low + (high - low) * rng_uniform(rng);
}
