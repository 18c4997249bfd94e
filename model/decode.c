// model/decode.c: incremental decoding with a KV cache, chunked prefill,
// sampling, and batched generation (see decode.h). One decode step runs the
// same layer math as gemma.c's forward for one new token per active
// sequence, a prefill chunk for a chunk of one sequence (layer by layer over
// groups of chunks); attention reads the keys from tiles kept transposed in
// the cache (attention_cached); the layer settings come from gemma_attn_spec
// so the paths cannot disagree. Ops too small to pay for waking threads run
// on the calling thread (SERIAL_WORK).
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/ops.h"
#include "model/decode.h"

// Named views into cache->scratch for n rows (n <= B).
typedef struct StepBuffers {
  float *x;      // (n, C) residual stream
  float *ln;     // (n, C) norm outputs
  float *tmp;    // (n, C) post-norm outputs before the residual add
  float *rstd;   // (n * max(nh, 1)) rstd of whichever norm ran last (unused after)
  float *q_raw;  // (n, qd) q_proj output (gemma3: before q_norm)
  float *q;      // (n, qd) = (n, nh, hd) normed + roped
  float *k_raw;  // (n, kvd)
  float *k;      // (n, kvd) normed + roped, copied into the cache
  float *v;      // (n, kvd)
  float *att;    // (n, qd)
  float *o;      // (n, C)
  float *gate;   // (n, I)
  float *up;     // (n, I)
  float *act;    // (n, I) gelu_tanh(gate) * up
  // Gemma 4 (sized 0 otherwise)
  float *v_raw;     // (n, kvd) v_proj output before the value norm
  float *h_ff;      // (n, C) residual after the MLP block
  float *ple_gate;  // (n, P)
  float *ple_act;   // (n, P)
  float *ple;       // (L, n, P) the rows' per-layer inputs
  float *ple_proj;  // (n, L*P) and its norm's output below
  float *ple_normed;  // (n, L*P)
} StepBuffers;

// Sizes for the widest layer (Gemma 4 layers differ).
static size_t carve_step(StepBuffers *s, float *base, const GemmaConfig *cfg, size_t n) {
  size_t C = cfg->hidden_size, nh = cfg->num_attention_heads, L = cfg->num_hidden_layers;
  size_t I = 0, qd = 0, kvd = 0;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    if ((size_t)shape.intermediate > I) I = shape.intermediate;
    if (nh * shape.head_dim > qd) qd = nh * shape.head_dim;
    if ((size_t)shape.kv_heads * shape.head_dim > kvd) kvd = (size_t)shape.kv_heads * shape.head_dim;
  }
  int gemma4 = cfg->family == GEMMA_FAMILY_GEMMA4;
  size_t P = gemma4 ? (size_t)cfg->hidden_size_per_layer_input : 0, rstd_rows = nh > L ? nh : L;
  size_t sizes[21] = {n * C, n * C, n * C, n * rstd_rows, n * qd, n * qd, n * kvd, n * kvd, n * kvd, n * qd, n * C,
                      n * I, n * I, n * I, gemma4 ? n * kvd : 0, gemma4 ? n * C : 0, n * P, n * P, n * L * P,
                      n * L * P, n * L * P};
  float **slots[21] = {&s->x, &s->ln, &s->tmp, &s->rstd, &s->q_raw, &s->q, &s->k_raw,
                       &s->k, &s->v, &s->att, &s->o, &s->gate, &s->up, &s->act,
                       &s->v_raw, &s->h_ff, &s->ple_gate, &s->ple_act, &s->ple, &s->ple_proj, &s->ple_normed};
  size_t used = 0;
  for (int i = 0; i < 21; i++) {
    *slots[i] = base ? base + used : NULL;
    used += (sizes[i] + 15) & ~(size_t)15;
  }
  return used;
}

// Tokens per prefill group (rounded down to whole chunks, at least one):
// gemma_prefill runs each layer over all chunks of a group before the next
// layer, so a layer's weights stay in cache between its chunks instead of
// all layers' weights streaming through for every chunk (a small-10m layer
// is 4 MB of 26; 9-13% less prefill time for a 483-token prompt in chunks
// of 64 on one core). Each chunk runs exactly the ops it would run alone,
// so the results are those of chunk after chunk, bitwise (test_decode.c).
#define PREFILL_GROUP_TOKENS 1024

// Key tiles of a sequence of `capacity` positions.
static size_t key_tiles(int capacity) { return ((size_t)capacity + ATTN_CACHE_TILE - 1) / ATTN_CACHE_TILE; }

// Floats of one key or value row of layer l: nkv * hd.
static size_t layer_kvd(const GemmaConfig *cfg, int l) {
  GemmaLayerShape shape;
  gemma_layer_shape(cfg, l, &shape);
  return (size_t)shape.kv_heads * shape.head_dim;
}

// Floats of cache->k_tiles per (layer, sequence).
static size_t seq_tile_floats(const GemmaKVCache *cache, const GemmaConfig *cfg, int l) {
  return key_tiles(cache->capacity) * ATTN_CACHE_TILE * layer_kvd(cfg, l);
}

// Lays out each layer's part of the cache; returns the floats of k (= v)
// and, in *tiles, of k_tiles. A kv-shared layer takes its source's offsets.
static size_t layout_cache(GemmaKVCache *cache, const GemmaConfig *cfg, size_t *tiles) {
  size_t rows = 0, tiled = 0, B = cache->batch, S = cache->capacity;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    if (shape.kv_source != l) {
      cache->kv_offset[l] = cache->kv_offset[shape.kv_source];
      cache->tile_offset[l] = cache->tile_offset[shape.kv_source];
      continue;
    }
    cache->kv_offset[l] = rows;
    cache->tile_offset[l] = tiled;
    rows += B * S * layer_kvd(cfg, l);
    tiled += B * seq_tile_floats(cache, cfg, l);
  }
  *tiles = tiled;
  return rows;
}

int gemma_kv_cache_create(GemmaKVCache *cache, const GemmaConfig *cfg, int batch, int capacity, FimiError *err) {
  return gemma_kv_cache_create_rows(cache, cfg, batch, capacity, batch, err);
}

int gemma_kv_cache_create_rows(GemmaKVCache *cache, const GemmaConfig *cfg, int batch, int capacity, int rows,
                               FimiError *err) {
  memset(cache, 0, sizeof *cache);
  if (batch <= 0 || capacity <= 0 || rows <= 0)
    return fimi_fail(err, "KV cache: batch %d, capacity %d and rows %d must be positive", batch, capacity, rows);
  cache->batch = batch;
  cache->capacity = capacity;
  cache->rows = rows > batch ? rows : batch;
  cache->chunk = rows;
  size_t tiled = 0, kv_floats = layout_cache(cache, cfg, &tiled);
  // Zeroed: attention never reads past a sequence's length, but zeros keep
  // any stray read finite.
  cache->lengths = fimi_calloc((size_t)batch, sizeof(int), err);
  cache->k = fimi_calloc(kv_floats, sizeof(float), err);
  cache->v = cache->k ? fimi_calloc(kv_floats, sizeof(float), err) : NULL;
  cache->k_tiles = cache->v ? fimi_calloc(tiled, sizeof(float), err) : NULL;
  StepBuffers views;
  cache->scratch = cache->k_tiles ? fimi_malloc(carve_step(&views, NULL, cfg, (size_t)cache->rows) * sizeof(float), err) : NULL;
  cache->slots = cache->scratch ? fimi_calloc(4 * (size_t)cache->rows, sizeof(int), err) : NULL;
  cache->group_rows = rows * (PREFILL_GROUP_TOKENS / rows > 1 ? PREFILL_GROUP_TOKENS / rows : 1);
  size_t group_floats = (size_t)cache->group_rows * cfg->hidden_size;
  cache->group_x = cache->slots ? fimi_malloc(group_floats * sizeof(float), err) : NULL;
  size_t ple_floats = cfg->family == GEMMA_FAMILY_GEMMA4
                          ? (size_t)cache->group_rows * cfg->num_hidden_layers * cfg->hidden_size_per_layer_input
                          : 0;
  cache->group_ple = cache->group_x && ple_floats ? fimi_malloc(ple_floats * sizeof(float), err) : NULL;
  if (!cache->lengths || !cache->group_x || (ple_floats && !cache->group_ple)) {
    gemma_kv_cache_free(cache);
    return fimi_fail_wrap(err, "KV cache for %d sequences of %d tokens", batch, capacity);
  }
  return 0;
}

void gemma_kv_cache_free(GemmaKVCache *cache) {
  if (!cache) return;
  free(cache->lengths);
  free(cache->k);
  free(cache->v);
  free(cache->k_tiles);
  free(cache->scratch);
  free(cache->slots);
  free(cache->group_x);
  free(cache->group_ple);
  memset(cache, 0, sizeof *cache);
}

void gemma_kv_cache_reset(GemmaKVCache *cache) {
  // Lengths alone define what is valid; old rows are overwritten before use.
  memset(cache->lengths, 0, (size_t)cache->batch * sizeof(int));
}

int decode_run_length(const int *ids, int n, int i) {
  int len = 1;
  while (i + len < n && ids[i + len] == ids[i] + len) len++;
  return len;
}

// One model call: n rows, row i a token of sequence ids[i] at positions[i]
// attending to the first query_lengths[i] cached positions of its sequence.
typedef struct RowsCall {
  const int *ids, *positions, *toks, *query_lengths;  // (n) each
  int n;
  int per_row;  // one GEMM per row (rows_matmul)
  int prefill;  // the rows are one chunk of sequence ids[0] (attend_cached)
  int threads;  // the caller's OpenMP thread count
} RowsCall;

// Work (floating-point operations) below which an op runs on the calling
// thread alone. With passive waiting, which a shared machine needs, every
// OpenMP parallel region wakes its threads: 30-45 us each on the loaded
// 2-core VM of docs/benchmarks.md, more than a small op's whole work, and a
// one-row decode step of small-10m runs ~70 ops (2 threads were slower than
// 1 there). 3.2e7 operations are ~0.5 ms of a 64-row GEMM on one core. The
// choice depends on an op's shape only, never on the other sequences of a
// step, so a sequence's prefill stays independent of the slot count
// (OpenBLAS's GEMM is the one op whose bits may depend on its thread count;
// the fimi kernels give the same bits at any count).
#define SERIAL_WORK 3.2e7

static void threads_for(const RowsCall *c, double work) {
#ifdef _OPENMP
  omp_set_num_threads(work < SERIAL_WORK ? 1 : c->threads);
#else
  (void)c, (void)work;
#endif
}

static int caller_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

static void restore_threads(int threads) {
#ifdef _OPENMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
}

// Attention of the call's queries against their sequences' caches for layer
// l: one attention_cached call (a prefill chunk's queries share each key
// tile, decode rows of a GQA group share theirs).
static void attend_cached(const GemmaModel *model, const GemmaKVCache *cache, int l, const StepBuffers *s,
                          const RowsCall *c, const GemmaAttnSpec *spec) {
  const GemmaConfig *cfg = &model->config;
  GemmaLayerShape shape;
  gemma_layer_shape(cfg, l, &shape);
  int S = cache->capacity, nh = cfg->num_attention_heads, nkv = shape.kv_heads;
  int hd = shape.head_dim, n = c->n;
  const float *k_tiles = cache->k_tiles + cache->tile_offset[l];  // this layer's (or its kv source's)
  const float *vc = cache->v + cache->kv_offset[l];                // (B, S, nkv, hd)
  double keys = 0;  // (query, key) pairs attended
  for (int i = 0; i < n; i++) {
    int len = c->query_lengths[i];
    keys += spec->window > 0 && spec->window < len ? spec->window : len;
  }
  threads_for(c, 4.0 * keys * nh * hd);
  attention_cached(s->att, s->q, k_tiles, vc, c->ids, c->query_lengths, n, S, nh, nkv, hd, spec->window,
                   spec->softcap, spec->scale);
}

// Writes the call's new keys and values (n, nkv, hd) into layer l's cache:
// rows of k and v, and columns of k_tiles.
static void write_cache(GemmaKVCache *cache, const GemmaConfig *cfg, int l, const StepBuffers *s, const RowsCall *c) {
  int T = ATTN_CACHE_TILE;
  size_t kvd = layer_kvd(cfg, l), S = cache->capacity, seq_tiles = seq_tile_floats(cache, cfg, l);
  for (int i = 0; i < c->n; i++) {
    size_t b = c->ids[i], p = c->positions[i];
    size_t row = cache->kv_offset[l] + (b * S + p) * kvd;  // cache[l][b][p]
    memcpy(cache->k + row, s->k + (size_t)i * kvd, kvd * sizeof(float));
    memcpy(cache->v + row, s->v + (size_t)i * kvd, kvd * sizeof(float));
    float *tile = cache->k_tiles + cache->tile_offset[l] + b * seq_tiles + (p / T) * T * kvd;  // (nkv, hd, T) holding p
    for (size_t x = 0; x < kvd; x++) tile[x * T + p % T] = s->k[(size_t)i * kvd + x];
  }
}

// out (n, OC) = inp (n, C) @ w^T; c->per_row: one GEMM per row, so that a
// row's result never depends on which other rows share the call (OpenBLAS's
// small-matrix kernels round differently for different n).
static void rows_matmul(const RowsCall *c, float *out, const float *inp, const float *w, int C, int OC) {
  int n = c->n;
  if (!c->per_row) {
    threads_for(c, 2.0 * n * C * OC);
    matmul_forward(out, inp, w, n, C, OC);
    return;
  }
  threads_for(c, 2.0 * C * OC);
  for (int i = 0; i < n; i++) matmul_forward(out + (size_t)i * OC, inp + (size_t)i * C, w, 1, C, OC);
}

// Gemma 2/3 norms scale by (1 + w), Gemma 4's by w.
static void step_norm(const GemmaLayerOffsets *off, float *out, float *rstd, const float *inp, const float *weight,
                      int N, int C, float eps) {
  if (off->gemma4) rmsnorm_forward_gain(out, rstd, inp, weight, N, C, eps);
  else rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
}

// One decoder layer for the call's rows; writes their k/v into the cache
// (a kv-shared layer writes none and attends to its source's). ple_l (n, P):
// the rows' per-layer inputs for layer l (Gemma 4; NULL otherwise).
static void layer_step(GemmaModel *model, GemmaKVCache *cache, int l, const StepBuffers *s, const RowsCall *c,
                       const float *ple_l) {
  const GemmaConfig *cfg = &model->config;
  GemmaLayerShape shape;
  gemma_layer_shape(cfg, l, &shape);
  int C = cfg->hidden_size, I = shape.intermediate, hd = shape.head_dim, n = c->n;
  int nh = cfg->num_attention_heads, nkv = shape.kv_heads, qd = nh * hd, kvd = nkv * hd;
  int P = cfg->family == GEMMA_FAMILY_GEMMA4 ? cfg->hidden_size_per_layer_input : 0;
  float eps = (float)cfg->rms_norm_eps;
  GemmaLayerOffsets off;
  gemma_layer_offsets_at(cfg, l, &off);
  GemmaAttnSpec spec;
  gemma_attn_spec(cfg, l, &spec);
  const float *w = model->layers[l];
  // the norms, rope, residual adds and GeGLU: a few operations per element
  double elementwise = 10.0 * n * (C > I ? C : I);

  threads_for(c, elementwise);
  step_norm(&off, s->ln, s->rstd, s->x, w + off.input_norm, n, C, eps);
  rows_matmul(c, off.has_qk_norm ? s->q_raw : s->q, s->ln, w + off.q, C, qd);
  if (off.has_k) rows_matmul(c, off.has_qk_norm ? s->k_raw : s->k, s->ln, w + off.k, C, kvd);
  float *v_lin = off.gemma4 ? (off.has_v ? s->v_raw : s->k_raw) : s->v;  // (n, kvd) before the value norm
  if (off.has_v) rows_matmul(c, v_lin, s->ln, w + off.v, C, kvd);
  threads_for(c, elementwise);
  if (off.has_qk_norm) {
    step_norm(&off, s->q, s->rstd, s->q_raw, w + off.q_norm, n * nh, hd, eps);
    if (off.has_k) step_norm(&off, s->k, s->rstd, s->k_raw, w + off.k_norm, n * nkv, hd, eps);
  }
  if (off.gemma4 && off.has_k) rmsnorm_forward_gain(s->v, s->rstd, v_lin, NULL, n * nkv, hd, eps);
  rope_forward_partial(s->q, s->q, c->positions, n, nh, hd, spec.rope_theta, spec.rope_position_scale, spec.rope_pairs);
  if (off.has_k) {
    rope_forward_partial(s->k, s->k, c->positions, n, nkv, hd, spec.rope_theta, spec.rope_position_scale,
                         spec.rope_pairs);
    write_cache(cache, cfg, l, s, c);
  }
  attend_cached(model, cache, l, s, c, &spec);
  rows_matmul(c, s->o, s->att, w + off.o, qd, C);
  threads_for(c, elementwise);
  step_norm(&off, s->tmp, s->rstd, s->o, w + off.post_attn_norm, n, C, eps);
  residual_add(s->x, s->x, s->tmp, (size_t)n * C);

  step_norm(&off, s->ln, s->rstd, s->x, w + off.pre_ff_norm, n, C, eps);
  rows_matmul(c, s->gate, s->ln, w + off.gate, C, I);
  rows_matmul(c, s->up, s->ln, w + off.up, C, I);
  threads_for(c, elementwise);
  geglu_forward(s->act, s->gate, s->up, (size_t)n * I);
  rows_matmul(c, s->o, s->act, w + off.down, I, C);
  threads_for(c, elementwise);
  step_norm(&off, s->tmp, s->rstd, s->o, w + off.post_ff_norm, n, C, eps);
  residual_add(s->x, s->x, s->tmp, (size_t)n * C);
  if (!off.gemma4) return;

  // Gemma 4: x = scalar * (x + post_per_layer_input_norm(per_layer_projection(
  //   gelu_tanh(per_layer_input_gate(x)) * ple_l))), as gemma.c's forward.
  if (off.has_ple) {
    rows_matmul(c, s->ple_gate, s->x, w + off.ple_gate, C, P);
    threads_for(c, elementwise);
    geglu_forward(s->ple_act, s->ple_gate, ple_l, (size_t)n * P);
    rows_matmul(c, s->o, s->ple_act, w + off.ple_proj, P, C);
    threads_for(c, elementwise);
    rmsnorm_forward_gain(s->tmp, s->rstd, s->o, w + off.ple_norm, n, C, eps);
    residual_add(s->x, s->x, s->tmp, (size_t)n * C);
  }
  float scalar = w[off.layer_scalar];
  for (size_t i = 0; i < (size_t)n * C; i++) s->x[i] *= scalar;
}

// The final norm (Gemma 4's scales by w).
static void final_norm(const GemmaModel *model, float *out, float *rstd, const float *x, int n) {
  const GemmaConfig *cfg = &model->config;
  GemmaLayerOffsets off;
  gemma_layer_offsets(cfg, &off);
  step_norm(&off, out, rstd, x, model->globals + (size_t)cfg->vocab_size * cfg->hidden_size, n, cfg->hidden_size,
            (float)cfg->rms_norm_eps);
}

// Layer l's slice of per-layer inputs laid out (L, rows, P); NULL without them.
static const float *ple_slice(const GemmaConfig *cfg, const float *ple, int l, int rows, int offset) {
  if (!ple || cfg->family != GEMMA_FAMILY_GEMMA4 || cfg->hidden_size_per_layer_input == 0) return NULL;
  return ple + ((size_t)l * rows + offset) * cfg->hidden_size_per_layer_input;
}

// The call's rows through the model into the cache; the final-normed hidden
// states are left in s->ln (n, C). Leaves the thread count as the last op set it.
static void run_rows(GemmaModel *model, GemmaKVCache *cache, StepBuffers *s, const RowsCall *c) {
  const GemmaConfig *cfg = &model->config;
  int C = cfg->hidden_size, V = cfg->vocab_size, n = c->n;
  carve_step(s, cache->scratch, cfg, (size_t)n);
  const float *wte = model->globals;
  threads_for(c, 10.0 * n * C);
  embedding_forward(s->x, c->toks, wte, n, C, gemma_embed_scale(cfg));
  int with_ple = cfg->family == GEMMA_FAMILY_GEMMA4 && cfg->hidden_size_per_layer_input > 0;
  if (with_ple) {
    threads_for(c, 2.0 * n * C * cfg->num_hidden_layers * cfg->hidden_size_per_layer_input);
    gemma_per_layer_inputs(model, s->x, c->toks, n, s->ple_proj, s->rstd, s->ple_normed, s->ple);
  }
  for (int l = 0; l < cfg->num_hidden_layers; l++)
    layer_step(model, cache, l, s, c, ple_slice(cfg, with_ple ? s->ple : NULL, l, n, 0));
  threads_for(c, 10.0 * n * C);
  final_norm(model, s->ln, s->rstd, s->x, n);
  (void)V;
}

int gemma_decode_step(GemmaModel *model, GemmaKVCache *cache, const int *tokens, const int *active, float *logits,
                      FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  int B = cache->batch, R = cache->rows, C = cfg->hidden_size, V = cfg->vocab_size;
  int *ids = cache->slots, *positions = ids + R, *toks = ids + 2 * R, *query_lengths = ids + 3 * R;
  // Validate everything before touching the cache, so a failure changes nothing.
  int n = 0;
  for (int b = 0; b < B; b++) {
    if (active && !active[b]) continue;
    if (cache->lengths[b] >= cache->capacity)
      return fimi_fail(err, "decode: sequence %d is full (%d tokens, the KV cache capacity)", b, cache->capacity);
    if (tokens[b] < 0 || tokens[b] >= V)
      return fimi_fail(err, "decode: token %d for sequence %d is outside the vocabulary [0, %d)", tokens[b], b, V);
    ids[n] = b;
    positions[n] = cache->lengths[b];
    toks[n] = tokens[b];
    query_lengths[n] = cache->lengths[b] + 1;  // the new token's own k/v is attended too
    n++;
  }
  if (n == 0) return 0;

  StepBuffers s;
  RowsCall call = {ids, positions, toks, query_lengths, n, cache->row_invariant, 0, caller_threads()};
  run_rows(model, cache, &s, &call);
  for (int i = 0; i < n;) {
    int run = call.per_row ? 1 : decode_run_length(ids, n, i);
    threads_for(&call, 2.0 * run * C * V);
    lm_head_logits(logits + (size_t)ids[i] * V, s.ln + (size_t)i * C, model->globals, run, C, V,
                   (float)cfg->final_logit_softcapping);
    i += run;
  }
  restore_threads(call.threads);
  for (int i = 0; i < n; i++) cache->lengths[ids[i]]++;
  return 0;
}

// The call for the m tokens of sequence b that start `offset` tokens into a
// prefill group whose first token goes to position base.
static void prefill_chunk_call(RowsCall *c, GemmaKVCache *cache, int b, int base, int offset, const int *tokens,
                               int m) {
  int R = cache->rows, *ids = cache->slots, *positions = ids + R, *toks = ids + 2 * R, *lengths = ids + 3 * R;
  for (int i = 0; i < m; i++) {
    ids[i] = b;
    positions[i] = base + offset + i;
    toks[i] = tokens[offset + i];
    lengths[i] = base + offset + i + 1;  // causal within the chunk
  }
  *c = (RowsCall){ids, positions, toks, lengths, m, 0, 1, c->threads};
}

// The g tokens of one prefill group (g <= cache->group_rows) through the
// model, layer by layer, chunk by chunk within a layer; leaves the
// final-normed hidden state of the last token in s->ln (C).
static void prefill_group(GemmaModel *model, GemmaKVCache *cache, StepBuffers *s, RowsCall *c, int b,
                          const int *tokens, int g) {
  const GemmaConfig *cfg = &model->config;
  int C = cfg->hidden_size, V = cfg->vocab_size, chunk = cache->chunk, base = cache->lengths[b];
  const float *wte = model->globals;
  float *x = cache->group_x;  // (g, C)
  threads_for(c, 10.0 * g * C);
  embedding_forward(x, tokens, wte, g, C, gemma_embed_scale(cfg));
  if (cache->group_ple)  // per chunk, with the scratch's temporaries: (L, g, P) for the group
    for (int offset = 0; offset < g; offset += chunk) {
      int m = g - offset < chunk ? g - offset : chunk;
      carve_step(s, cache->scratch, cfg, (size_t)m);
      threads_for(c, 2.0 * m * C * cfg->num_hidden_layers * cfg->hidden_size_per_layer_input);
      gemma_per_layer_inputs(model, x + (size_t)offset * C, tokens + offset, m, s->ple_proj, s->rstd, s->ple_normed,
                             s->ple);
      for (int l = 0; l < cfg->num_hidden_layers; l++)
        memcpy((float *)ple_slice(cfg, cache->group_ple, l, g, offset), ple_slice(cfg, s->ple, l, m, 0),
               (size_t)m * cfg->hidden_size_per_layer_input * sizeof(float));
    }
  for (int l = 0; l < cfg->num_hidden_layers; l++)
    for (int offset = 0; offset < g; offset += chunk) {
      int m = g - offset < chunk ? g - offset : chunk;
      prefill_chunk_call(c, cache, b, base, offset, tokens, m);
      carve_step(s, cache->scratch, cfg, (size_t)m);
      s->x = x + (size_t)offset * C;  // the chunk's rows of the group's residual stream
      layer_step(model, cache, l, s, c, ple_slice(cfg, cache->group_ple, l, g, offset));
    }
  threads_for(c, 10.0 * C);
  final_norm(model, s->ln, s->rstd, x + (size_t)(g - 1) * C, 1);
  (void)V;
  cache->lengths[b] += g;
}

int gemma_prefill(GemmaModel *model, GemmaKVCache *cache, int b, const int *tokens, int n, float *logits,
                  FimiError *err) {
  const GemmaConfig *cfg = &model->config;
  int C = cfg->hidden_size, V = cfg->vocab_size;
  if (b < 0 || b >= cache->batch) return fimi_fail(err, "prefill: sequence %d outside [0, %d)", b, cache->batch);
  if (n < 1) return fimi_fail(err, "prefill: sequence %d: no tokens", b);
  if (cache->lengths[b] + n > cache->capacity)
    return fimi_fail(err, "prefill: sequence %d: %d + %d tokens exceed the KV cache capacity %d", b,
                     cache->lengths[b], n, cache->capacity);
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= V)
      return fimi_fail(err, "prefill: token %d at %d is outside the vocabulary [0, %d)", tokens[i], i, V);
  StepBuffers s;
  RowsCall call = {.threads = caller_threads()};
  for (int start = 0; start < n; start += cache->group_rows) {
    int g = n - start < cache->group_rows ? n - start : cache->group_rows;
    prefill_group(model, cache, &s, &call, b, tokens + start, g);
  }
  if (logits) {
    threads_for(&call, 2.0 * C * V);
    lm_head_logits(logits, s.ln, model->globals, 1, C, V, (float)cfg->final_logit_softcapping);
  }
  restore_threads(call.threads);
  return 0;
}

int gemma_kv_cache_copy_sequence(GemmaKVCache *cache, const GemmaConfig *cfg, int dst, int src, FimiError *err) {
  if (dst < 0 || dst >= cache->batch || src < 0 || src >= cache->batch)
    return fimi_fail(err, "KV cache copy: sequences %d <- %d outside [0, %d)", dst, src, cache->batch);
  if (dst == src) return 0;
  size_t S = cache->capacity;
  for (int l = 0; l < cfg->num_hidden_layers; l++) {
    GemmaLayerShape shape;
    gemma_layer_shape(cfg, l, &shape);
    if (shape.kv_source != l) continue;  // a kv-shared layer has no cache of its own
    size_t kvd = layer_kvd(cfg, l), bytes = (size_t)cache->lengths[src] * kvd * sizeof(float);
    // whole tiles up to the one holding the last position (columns past the
    // length are never read)
    size_t seq_tiles = seq_tile_floats(cache, cfg, l);
    size_t tile_bytes = key_tiles(cache->lengths[src]) * ATTN_CACHE_TILE * kvd * sizeof(float);
    size_t from = cache->kv_offset[l] + (size_t)src * S * kvd, to = cache->kv_offset[l] + (size_t)dst * S * kvd;
    memcpy(cache->k + to, cache->k + from, bytes);
    memcpy(cache->v + to, cache->v + from, bytes);
    memcpy(cache->k_tiles + cache->tile_offset[l] + dst * seq_tiles,
           cache->k_tiles + cache->tile_offset[l] + src * seq_tiles, tile_bytes);
  }
  cache->lengths[dst] = cache->lengths[src];
  return 0;
}

// ---------------------------------------------------------------------------
// Sampling

static int argmax_lowest(const float *logits, int V) {
  int best = -1;
  for (int i = 0; i < V; i++) {
    if (logits[i] != logits[i]) continue;  // NaN
    if (best < 0 || logits[i] > logits[best]) best = i;
  }
  return best < 0 ? 0 : best;
}

typedef struct Candidate {
  double p;
  int id;
} Candidate;

// Descending probability, then ascending id: a total order, so qsort's
// instability cannot change the result.
static int by_prob_desc(const void *a, const void *b) {
  const Candidate *x = a, *y = b;
  if (x->p != y->p) return x->p > y->p ? -1 : 1;
  return x->id < y->id ? -1 : (x->id > y->id);
}

// Unnormalized probability of token i: exp((l_i - max) / T), 0 for NaN.
static double weight_of(float logit, float max, float temperature) {
  if (logit != logit) return 0.0;
  return exp(((double)logit - (double)max) / (double)temperature);
}

int sample_token(const float *logits, int V, const SamplerConfig *sampler, Rng *rng) {
  int best = argmax_lowest(logits, V);
  float T = sampler->temperature;
  if (!(T > 0.0f) || logits[best] != logits[best] || isinf(logits[best])) return best;
  float max = logits[best];
  double total = 0.0;
  for (int i = 0; i < V; i++) total += weight_of(logits[i], max, T);
  double u = (double)rng_uniform(rng);
  float top_p = sampler->top_p;
  if (!(top_p < 1.0f)) {
    // No truncation: walk the CDF in id order.
    double target = u * total, cum = 0.0;
    int last = best;
    for (int i = 0; i < V; i++) {
      double p = weight_of(logits[i], max, T);
      if (p <= 0.0) continue;
      cum += p;
      last = i;
      if (cum > target) return i;
    }
    return last;  // rounding left target at the very end
  }
  if (!(top_p > 0.0f)) return best;
  // Tokens below (1 - top_p) / V of the mass together hold less than 1 - top_p,
  // so the nucleus lies inside the rest: sort only those.
  double threshold = (1.0 - (double)top_p) * total / (double)V;
  int count = 0;
  for (int i = 0; i < V; i++)
    if (weight_of(logits[i], max, T) >= threshold) count++;
  Candidate *cand = malloc((size_t)count * sizeof *cand);
  if (!cand) return best;  // out of memory: fall back to greedy rather than fail a rollout
  count = 0;
  for (int i = 0; i < V; i++) {
    double p = weight_of(logits[i], max, T);
    if (p >= threshold) cand[count++] = (Candidate){p, i};
  }
  qsort(cand, (size_t)count, sizeof *cand, by_prob_desc);
  double need = (double)top_p * total, mass = 0.0;
  int keep = 0;
  while (keep < count && mass < need) mass += cand[keep++].p;
  if (keep == 0) keep = 1;
  double target = u * mass, cum = 0.0;
  int chosen = cand[keep - 1].id;
  for (int i = 0; i < keep; i++) {
    cum += cand[i].p;
    if (cum > target) {
      chosen = cand[i].id;
      break;
    }
  }
  free(cand);
  return chosen;
}

// ---------------------------------------------------------------------------
// Generation

static int is_stop_token(const GenerateOptions *opt, int token) {
  for (int i = 0; i < opt->num_stop_tokens; i++)
    if (opt->stop_tokens[i] == token) return 1;
  return 0;
}

int generate_capacity(const int *prompt_lengths, int B, const GenerateOptions *opt, FimiError *err) {
  if (B <= 0 || opt->max_new < 0)
    return fimi_fail(err, "generate: batch %d must be positive, max_new %d >= 0", B, opt->max_new);
  int max_prompt = 0;
  for (int b = 0; b < B; b++) {
    if (prompt_lengths[b] < 1) return fimi_fail(err, "generate: prompt %d is empty", b);
    if (prompt_lengths[b] > max_prompt) max_prompt = prompt_lengths[b];
  }
  if (max_prompt > INT_MAX - opt->max_new) return fimi_fail(err, "generate: prompt + max_new too long");
  return max_prompt + opt->max_new;
}

int generate_with(const GenerateDecoder *dec, int V, const int *const *prompts, const int *prompt_lengths, int B,
                  const GenerateOptions *opt, int *out_tokens, int *out_lengths, FimiError *err) {
  int max_new = opt->max_new;
  int capacity = generate_capacity(prompt_lengths, B, opt, err);
  if (capacity < 0) return -1;
  int max_prompt = capacity - max_new;
  for (int b = 0; b < B; b++) {
    out_lengths[b] = 0;
    for (int j = 0; j < max_new; j++) out_tokens[(size_t)b * max_new + j] = -1;
  }
  if (max_new == 0) return 0;

  float *logits = fimi_malloc((size_t)B * V * sizeof(float), err);  // (B, V)
  int *step_tokens = fimi_calloc((size_t)B, sizeof(int), err);       // (B)
  int *active = fimi_calloc((size_t)B, sizeof(int), err);            // (B)
  Rng *rngs = fimi_calloc((size_t)B, sizeof(Rng), err);              // (B)
  int rc = -1;
  if (!logits || !step_tokens || !active || !rngs) goto done;
  for (int b = 0; b < B; b++) rng_seed(&rngs[b], opt->seed ^ ((uint64_t)b * 0x9E3779B97F4A7C15ULL));

  // Prefill one position at a time; a sequence whose prompt has ended sits
  // out, so its logits row keeps the next-token distribution after its prompt.
  for (int t = 0; t < max_prompt; t++) {
    for (int b = 0; b < B; b++) {
      active[b] = t < prompt_lengths[b];
      step_tokens[b] = active[b] ? prompts[b][t] : 0;
    }
    if (dec->step(dec->ctx, step_tokens, active, logits, err) != 0) goto done;
  }
  for (int b = 0; b < B; b++) active[b] = 1;
  for (int step = 0; step < max_new; step++) {
    int any = 0;
    for (int b = 0; b < B; b++) {
      if (!active[b]) continue;
      int tok = sample_token(logits + (size_t)b * V, V, &opt->sampler, &rngs[b]);
      out_tokens[(size_t)b * max_new + out_lengths[b]++] = tok;
      step_tokens[b] = tok;
      if (opt->on_token) opt->on_token(opt->on_token_ctx, b, tok);
      if (is_stop_token(opt, tok) || out_lengths[b] == max_new) active[b] = 0;
      any |= active[b];
    }
    if (!any) break;
    if (dec->step(dec->ctx, step_tokens, active, logits, err) != 0) goto done;
  }
  rc = 0;
done:
  if (rc != 0) fimi_fail_wrap(err, "generate");
  free(logits);
  free(step_tokens);
  free(active);
  free(rngs);
  return rc;
}

typedef struct CpuDecoder {
  GemmaModel *model;
  GemmaKVCache *cache;
} CpuDecoder;

static int cpu_decode_step(void *ctx, const int *tokens, const int *active, float *logits, FimiError *err) {
  CpuDecoder *d = ctx;
  return gemma_decode_step(d->model, d->cache, tokens, active, logits, err);
}

int gemma_generate(GemmaModel *model, const int *const *prompts, const int *prompt_lengths, int B,
                   const GenerateOptions *opt, int *out_tokens, int *out_lengths, FimiError *err) {
  int capacity = generate_capacity(prompt_lengths, B, opt, err);
  if (capacity < 0) return -1;
  GemmaKVCache cache;
  if (gemma_kv_cache_create(&cache, &model->config, B, capacity, err) != 0) return -1;
  CpuDecoder cpu = {model, &cache};
  GenerateDecoder dec = {cpu_decode_step, &cpu};
  int rc = generate_with(&dec, model->config.vocab_size, prompts, prompt_lengths, B, opt, out_tokens, out_lengths, err);
  gemma_kv_cache_free(&cache);
  return rc;
}
