// tests/standin/ops_cuda_standin.c: a HOST stand-in for the CUDA backend
// (kernels/cuda/ops_cuda.h), for tests only. It lets the GPU model code
// (model/gemma_cuda.c) run on a machine without a GPU, under AddressSanitizer,
// so that its logic (buffer offsets, op order, what each op is given) is
// tested in CI. Defines every function of ops_cuda.h:
// - "Device" memory is host malloc, registered in a table of blocks. Every
//   op checks that each device operand lies inside one live block (a host
//   pointer given as device memory would fault on a GPU), that outputs do
//   not overlap other operands except where ops.h allows in place (the
//   stand-in's conversions would otherwise hide the aliasing), and that token
//   ids are in range. New blocks are filled with 0xFF (NaN in bf16 and fp32),
//   so reading memory nothing wrote shows up as NaN in the results.
// - Each op converts its bf16 inputs to fp32, calls the CPU reference of
//   kernels/ops.h and rounds bf16 outputs to nearest even; fp32 outputs and
//   parameter gradients are the CPU kernel's own (gradients accumulate, as
//   the CUDA contract says). Ops run synchronously.
// - attention_*_cudnn are fimi's CPU attention, refusing softcap > 0 with the
//   real function's error; attention_cudnn_check only checks the arguments.
// What it does NOT test: the CUDA kernels themselves (tiling, their fp32
// accumulation orders, the bf16 roundings inside a fused kernel such as the
// LM head's dlogits), cuBLASLt, cuDNN, stream ordering and asynchrony (every
// op here completes before it returns), device memory limits and speed.
// tests/gpu/ covers those on a GPU.
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/ops_cuda.h"
#include "model/safetensors.h"  // float_to_bf16 (nearest even), bf16_to_float

struct CudaContext {
  int device;
};

// ---- the device memory table ----

typedef struct Block {
  char *base;
  size_t bytes;
} Block;

static Block *blocks;
static size_t num_blocks, cap_blocks;

// A programming error in the caller (what a GPU would fault on): print and
// abort, so that ASan or a debugger shows the stack.
__attribute__((format(printf, 1, 2), noreturn)) static void standin_die(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  fprintf(stderr, "ops_cuda_standin: ");
  vfprintf(stderr, fmt, args);
  fputc('\n', stderr);
  va_end(args);
  abort();
}

static Block *find_block(const void *p) {
  const char *c = p;
  for (size_t i = 0; i < num_blocks; i++)
    if (c >= blocks[i].base && c < blocks[i].base + blocks[i].bytes) return &blocks[i];
  return NULL;
}

// [p, p + bytes) must lie inside one live cuda_malloc block (p NULL or bytes 0: nothing to check).
static void require_device(const void *p, size_t bytes, const char *what) {
  if (!p || bytes == 0) return;
  const Block *b = find_block(p);
  if (!b) standin_die("%s: %p (%zu bytes) is not device memory (no cuda_malloc block holds it)", what, p, bytes);
  if ((size_t)((const char *)p - b->base) + bytes > b->bytes)
    standin_die("%s: %p (%zu bytes) runs past the end of its cuda_malloc block", what, p, bytes);
}

// A host argument of a copy must not be device memory (cudaMemcpy's direction would be wrong).
static void require_host(const void *p, size_t bytes, const char *what) {
  if (p && bytes && find_block(p))
    standin_die("%s: %p (%zu bytes) is device memory, expected host memory", what, p, bytes);
}

// ---- operand checks ----

typedef struct Span {
  const void *p;
  size_t bytes;
} Span;

static int overlap(Span a, Span b) {
  if (!a.p || !b.p || !a.bytes || !b.bytes) return 0;
  const char *a0 = a.p, *b0 = b.p;
  return a0 < b0 + b.bytes && b0 < a0 + a.bytes;
}

// Every operand is device memory; every output is disjoint from the other
// outputs and from the inputs, except an input it exactly equals when the op
// allows in place.
static void check_operands(const char *op, const Span *outs, int nout, const Span *ins, int nin, int in_place) {
  for (int i = 0; i < nout; i++) require_device(outs[i].p, outs[i].bytes, op);
  for (int i = 0; i < nin; i++) require_device(ins[i].p, ins[i].bytes, op);
  for (int i = 0; i < nout; i++) {
    for (int j = i + 1; j < nout; j++)
      if (overlap(outs[i], outs[j])) standin_die("%s: outputs %d and %d overlap", op, i, j);
    for (int j = 0; j < nin; j++) {
      int same = outs[i].p == ins[j].p && outs[i].bytes == ins[j].bytes;
      if (overlap(outs[i], ins[j]) && !(in_place && same))
        standin_die("%s: output %d overlaps input %d (not allowed in place)", op, i, j);
    }
  }
}

// Token ids index rows of a (V, C) table (negative: padding, no row): one >= V
// would make a GPU kernel write out of bounds.
static void require_tokens_below(const char *op, const int *tokens, int N, int V) {
  for (int i = 0; i < N; i++)
    if (tokens[i] >= V) standin_die("%s: token id %d at row %d is not below V = %d", op, tokens[i], i, V);
}

static size_t nb_bf16(size_t n) { return n * sizeof(bf16); }
static size_t nb_f32(size_t n) { return n * sizeof(float); }
static size_t nb_i32(size_t n) { return n * sizeof(int); }

// ---- bf16 <-> fp32 staging ----

static void *host_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) standin_die("out of host memory (%zu bytes)", bytes);
  return p;
}

// A new fp32 copy of src (n) bf16; NULL in, NULL out. The caller frees it.
static float *to_f32(const bf16 *src, size_t n) {
  if (!src) return NULL;
  float *out = host_alloc(nb_f32(n));
  for (size_t i = 0; i < n; i++) out[i] = bf16_to_float(src[i]);
  return out;
}

// fp32 scratch for an output (n), NULL when the output is not wanted.
static float *out_f32(const void *wanted, size_t n) { return wanted ? host_alloc(nb_f32(n)) : NULL; }

// dst (n) bf16 = src rounded to nearest even, then src freed; dst NULL: only freed.
static void store_bf16(bf16 *dst, float *src, size_t n) {
  if (dst)
    for (size_t i = 0; i < n; i++) dst[i] = float_to_bf16(src[i]);
  free(src);
}

// ---- context ----

int cuda_context_create(CudaContext **out, int device, FimiError *err) {
  *out = NULL;
  if (device != 0) return fimi_fail(err, "CUDA stand-in: device %d does not exist (only device 0)", device);
  CudaContext *ctx = fimi_calloc(1, sizeof *ctx, err);
  if (!ctx) return -1;
  ctx->device = device;
  *out = ctx;
  return 0;
}

void cuda_context_destroy(CudaContext *ctx) { free(ctx); }

// Every op has completed when it returned: nothing to wait for.
int cuda_context_sync(CudaContext *ctx, FimiError *err) { return 0; }

void *cuda_context_stream(CudaContext *ctx) { return ctx; }

// ---- memory helpers ----

int cuda_malloc(void **out, size_t bytes, FimiError *err) {
  *out = NULL;
  if (bytes == 0) return 0;  // as cudaMalloc(0) in context.cu: NULL, no error
  if (num_blocks == cap_blocks) {
    size_t cap = cap_blocks ? 2 * cap_blocks : 64;
    Block *grown = realloc(blocks, cap * sizeof *grown);
    if (!grown) return fimi_fail(err, "CUDA stand-in: out of host memory for the block table");
    blocks = grown;
    cap_blocks = cap;
  }
  char *p = malloc(bytes);
  if (!p) return fimi_fail(err, "CUDA stand-in: cudaMalloc(%zu bytes): out of host memory", bytes);
  memset(p, 0xFF, bytes);  // NaN poison: cudaMalloc'ed memory is uninitialized
  blocks[num_blocks++] = (Block){p, bytes};
  *out = p;
  return 0;
}

void cuda_free(void *ptr) {
  if (!ptr) return;
  Block *b = find_block(ptr);
  if (!b || b->base != (char *)ptr) standin_die("cuda_free: %p was not returned by cuda_malloc", ptr);
  free(b->base);
  *b = blocks[--num_blocks];
}

// Stand-in only (not in ops_cuda.h; the test declares it): blocks still
// allocated, so a test can check that its frees released all device memory
// (the table keeps them reachable, which hides them from LeakSanitizer).
size_t cuda_standin_live_blocks(void) { return num_blocks; }

void cuda_upload_bf16(CudaContext *ctx, bf16 *dst, const float *src, size_t n) {
  require_device(dst, nb_bf16(n), "cuda_upload_bf16 dst");
  require_host(src, nb_f32(n), "cuda_upload_bf16 src");
  for (size_t i = 0; i < n; i++) dst[i] = float_to_bf16(src[i]);
}

void cuda_download_bf16(CudaContext *ctx, float *dst, const bf16 *src, size_t n) {
  require_host(dst, nb_f32(n), "cuda_download_bf16 dst");
  require_device(src, nb_bf16(n), "cuda_download_bf16 src");
  for (size_t i = 0; i < n; i++) dst[i] = bf16_to_float(src[i]);
}

void cuda_upload_f32(CudaContext *ctx, float *dst, const float *src, size_t n) {
  require_device(dst, nb_f32(n), "cuda_upload_f32 dst");
  require_host(src, nb_f32(n), "cuda_upload_f32 src");
  if (n) memcpy(dst, src, nb_f32(n));
}

void cuda_download_f32(CudaContext *ctx, float *dst, const float *src, size_t n) {
  require_host(dst, nb_f32(n), "cuda_download_f32 dst");
  require_device(src, nb_f32(n), "cuda_download_f32 src");
  if (n) memcpy(dst, src, nb_f32(n));
}

void cuda_upload_i32(CudaContext *ctx, int *dst, const int *src, size_t n) {
  require_device(dst, nb_i32(n), "cuda_upload_i32 dst");
  require_host(src, nb_i32(n), "cuda_upload_i32 src");
  if (n) memcpy(dst, src, nb_i32(n));
}

void cuda_fill_bytes(CudaContext *ctx, void *dst, int byte, size_t n) {
  require_device(dst, n, "cuda_fill_bytes");
  if (n) memset(dst, byte, n);
}

void cuda_copy_rows(CudaContext *ctx, void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t row_bytes,
                    size_t rows) {
  if (rows == 0 || row_bytes == 0) return;
  // cudaMemcpy2D's rule: a pitch holds at least one row.
  if (dst_pitch < row_bytes || src_pitch < row_bytes)
    standin_die("cuda_copy_rows: a pitch (%zu, %zu) is smaller than the row (%zu bytes)", dst_pitch, src_pitch,
                row_bytes);
  Span dst_span = {dst, (rows - 1) * dst_pitch + row_bytes}, src_span = {src, (rows - 1) * src_pitch + row_bytes};
  check_operands("cuda_copy_rows", &dst_span, 1, &src_span, 1, 0);
  for (size_t r = 0; r < rows; r++) memcpy((char *)dst + r * dst_pitch, (const char *)src + r * src_pitch, row_bytes);
}

// ---- casts and elementwise ----

void cast_f32_to_bf16_cuda(CudaContext *ctx, bf16 *out, const float *inp, size_t n) {
  Span o[] = {{out, nb_bf16(n)}}, i[] = {{inp, nb_f32(n)}};
  check_operands(__func__, o, 1, i, 1, 0);
  for (size_t k = 0; k < n; k++) out[k] = float_to_bf16(inp[k]);
}

void cast_bf16_to_f32_cuda(CudaContext *ctx, float *out, const bf16 *inp, size_t n) {
  Span o[] = {{out, nb_f32(n)}}, i[] = {{inp, nb_bf16(n)}};
  check_operands(__func__, o, 1, i, 1, 0);
  for (size_t k = 0; k < n; k++) out[k] = bf16_to_float(inp[k]);
}

void accumulate_f64_cuda(CudaContext *ctx, double *acc, const float *x, size_t n) {
  Span o[] = {{acc, n * sizeof(double)}}, i[] = {{x, nb_f32(n)}};
  check_operands(__func__, o, 1, i, 1, 0);
  for (size_t k = 0; k < n; k++) acc[k] += (double)x[k];
}

void cast_f64_to_f32_cuda(CudaContext *ctx, float *out, const double *in, size_t n) {
  Span o[] = {{out, nb_f32(n)}}, i[] = {{in, n * sizeof(double)}};
  check_operands(__func__, o, 1, i, 1, 0);
  for (size_t k = 0; k < n; k++) out[k] = (float)in[k];
}

void residual_add_cuda(CudaContext *ctx, bf16 *out, const bf16 *a, const bf16 *b, size_t n) {
  Span o[] = {{out, nb_bf16(n)}}, i[] = {{a, nb_bf16(n)}, {b, nb_bf16(n)}};
  check_operands(__func__, o, 1, i, 2, 1);
  float *fa = to_f32(a, n), *fb = to_f32(b, n), *fo = out_f32(out, n);
  residual_add(fo, fa, fb, n);
  store_bf16(out, fo, n);
  free(fa), free(fb);
}

// out (n) = inp (n) * factor in fp32, rounded; element by element, so in place works.
static void scale_bf16(bf16 *out, const bf16 *inp, float factor, size_t n) {
  for (size_t k = 0; k < n; k++) out[k] = float_to_bf16(bf16_to_float(inp[k]) * factor);
}

void scale_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, float scale, size_t n) {
  Span o[] = {{out, nb_bf16(n)}}, i[] = {{inp, nb_bf16(n)}};
  check_operands(__func__, o, 1, i, 1, 1);
  scale_bf16(out, inp, scale, n);
}

// The factor is read from "device" memory, as the kernel does; out may be inp
// but never cover the factor (another block of the GPU kernel could
// overwrite it before this one reads it).
void scale_by_device_scalar_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const bf16 *scalar, size_t n) {
  Span o[] = {{out, nb_bf16(n)}}, i[] = {{inp, nb_bf16(n)}, {scalar, nb_bf16(1)}};
  if (!scalar) standin_die("%s: scalar is NULL", __func__);
  if (overlap(o[0], i[1])) standin_die("%s: output overlaps the scalar", __func__);
  check_operands(__func__, o, 1, i, 2, 1);
  scale_bf16(out, inp, bf16_to_float(scalar[0]), n);
}

// Element (l, n, p) of the layer-major (L, N, P) tensor is (n, l*P + p) of the flat (N, L*P) one.
static size_t ple_flat_index(int l, int n, int p, int L, int P) { return (size_t)n * L * P + (size_t)l * P + p; }

void per_layer_inputs_combine_cuda(CudaContext *ctx, bf16 *out, const bf16 *normed, const bf16 *embedded, int N,
                                   int L, int P, float scale) {
  if (N <= 0 || L <= 0 || P <= 0) return;
  size_t n = (size_t)N * L * P;
  Span o[] = {{out, nb_bf16(n)}}, i[] = {{normed, nb_bf16(n)}, {embedded, nb_bf16(n)}};
  check_operands(__func__, o, 1, i, 2, 0);
  bf16 *dst = out;
  for (int l = 0; l < L; l++)
    for (int r = 0; r < N; r++)
      for (int p = 0; p < P; p++) {
        size_t f = ple_flat_index(l, r, p, L, P);
        *dst++ = float_to_bf16((bf16_to_float(normed[f]) + bf16_to_float(embedded[f])) * scale);
      }
}

void per_layer_inputs_split_cuda(CudaContext *ctx, bf16 *dflat, const bf16 *dple, int N, int L, int P, float scale) {
  if (N <= 0 || L <= 0 || P <= 0) return;
  size_t n = (size_t)N * L * P;
  Span o[] = {{dflat, nb_bf16(n)}}, i[] = {{dple, nb_bf16(n)}};
  check_operands(__func__, o, 1, i, 1, 0);
  const bf16 *src = dple;
  for (int l = 0; l < L; l++)
    for (int r = 0; r < N; r++)
      for (int p = 0; p < P; p++) dflat[ple_flat_index(l, r, p, L, P)] = float_to_bf16(bf16_to_float(*src++) * scale);
}

// ---- matmul ----

void matmul_forward_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const bf16 *weight, int N, int C, int OC) {
  size_t NC = (size_t)N * C, WC = (size_t)OC * C, NO = (size_t)N * OC;
  Span o[] = {{out, nb_bf16(NO)}}, i[] = {{inp, nb_bf16(NC)}, {weight, nb_bf16(WC)}};
  check_operands(__func__, o, 1, i, 2, 0);
  float *fi = to_f32(inp, NC), *fw = to_f32(weight, WC), *fo = out_f32(out, NO);
  matmul_forward(fo, fi, fw, N, C, OC);
  store_bf16(out, fo, NO);
  free(fi), free(fw);
}

void matmul_backward_cuda(CudaContext *ctx, bf16 *dinp, float *dweight, const bf16 *dout, const bf16 *inp,
                          const bf16 *weight, int N, int C, int OC) {
  size_t NC = (size_t)N * C, WC = (size_t)OC * C, NO = (size_t)N * OC;
  Span o[] = {{dinp, nb_bf16(NC)}, {dweight, nb_f32(WC)}};
  Span i[] = {{dout, nb_bf16(NO)}, {inp, nb_bf16(NC)}, {weight, nb_bf16(WC)}};
  check_operands(__func__, o, 2, i, 3, 0);
  float *fd = to_f32(dout, NO), *fi = to_f32(inp, NC), *fw = to_f32(weight, WC), *fdi = out_f32(dinp, NC);
  matmul_backward(fdi, dweight, fd, fi, fw, N, C, OC);  // dweight: fp32, accumulated in place
  store_bf16(dinp, fdi, NC);
  free(fd), free(fi), free(fw);
}

// ---- RMSNorm ----

void rmsnorm_forward_cuda(CudaContext *ctx, bf16 *out, float *rstd, const bf16 *inp, const bf16 *weight, int N, int C,
                          float eps) {
  size_t NC = (size_t)N * C;
  Span o[] = {{out, nb_bf16(NC)}, {rstd, nb_f32((size_t)N)}}, i[] = {{inp, nb_bf16(NC)}, {weight, nb_bf16((size_t)C)}};
  check_operands(__func__, o, 2, i, 2, 0);
  float *fi = to_f32(inp, NC), *fw = to_f32(weight, (size_t)C), *fo = out_f32(out, NC);
  rmsnorm_forward(fo, rstd, fi, fw, N, C, eps);
  store_bf16(out, fo, NC);
  free(fi), free(fw);
}

void rmsnorm_backward_cuda(CudaContext *ctx, bf16 *dinp, float *dweight, const bf16 *dout, const bf16 *inp,
                           const bf16 *weight, const float *rstd, int N, int C) {
  size_t NC = (size_t)N * C;
  Span o[] = {{dinp, nb_bf16(NC)}, {dweight, nb_f32((size_t)C)}};
  Span i[] = {{dout, nb_bf16(NC)}, {inp, nb_bf16(NC)}, {weight, nb_bf16((size_t)C)}, {rstd, nb_f32((size_t)N)}};
  check_operands(__func__, o, 2, i, 4, 0);
  float *fd = to_f32(dout, NC), *fi = to_f32(inp, NC), *fw = to_f32(weight, (size_t)C), *fdi = out_f32(dinp, NC);
  rmsnorm_backward(fdi, dweight, fd, fi, fw, rstd, N, C);
  store_bf16(dinp, fdi, NC);
  free(fd), free(fi), free(fw);
}

// weight NULL: no gain (its Span is skipped by the checks).
void rmsnorm_forward_gain_cuda(CudaContext *ctx, bf16 *out, float *rstd, const bf16 *inp, const bf16 *weight, int N,
                               int C, float eps) {
  size_t NC = (size_t)N * C;
  Span o[] = {{out, nb_bf16(NC)}, {rstd, nb_f32((size_t)N)}}, i[] = {{inp, nb_bf16(NC)}, {weight, nb_bf16((size_t)C)}};
  check_operands(__func__, o, 2, i, 2, 0);
  float *fi = to_f32(inp, NC), *fw = to_f32(weight, (size_t)C), *fo = out_f32(out, NC);
  rmsnorm_forward_gain(fo, rstd, fi, fw, N, C, eps);
  store_bf16(out, fo, NC);
  free(fi), free(fw);
}

// ops_cuda.h: dweight must be NULL when weight is (the CPU op would ignore
// it; a caller passing one expects a gradient that never comes).
void rmsnorm_backward_gain_cuda(CudaContext *ctx, bf16 *dinp, float *dweight, const bf16 *dout, const bf16 *inp,
                                const bf16 *weight, const float *rstd, int N, int C) {
  size_t NC = (size_t)N * C;
  if (!weight && dweight) standin_die("%s: dweight given without a weight", __func__);
  Span o[] = {{dinp, nb_bf16(NC)}, {dweight, nb_f32((size_t)C)}};
  Span i[] = {{dout, nb_bf16(NC)}, {inp, nb_bf16(NC)}, {weight, nb_bf16((size_t)C)}, {rstd, nb_f32((size_t)N)}};
  check_operands(__func__, o, 2, i, 4, 0);
  float *fd = to_f32(dout, NC), *fi = to_f32(inp, NC), *fw = to_f32(weight, (size_t)C), *fdi = out_f32(dinp, NC);
  rmsnorm_backward_gain(fdi, dweight, fd, fi, fw, rstd, N, C);
  store_bf16(dinp, fdi, NC);
  free(fd), free(fi), free(fw);
}

// ---- RoPE ----

void rope_forward_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const int *positions, int N, int nheads, int hd,
                       float theta, float position_scale) {
  size_t n = (size_t)N * nheads * hd;
  Span o[] = {{out, nb_bf16(n)}}, i[] = {{inp, nb_bf16(n)}, {positions, nb_i32((size_t)N)}};
  check_operands(__func__, o, 1, i, 2, 1);
  float *fi = to_f32(inp, n), *fo = out_f32(out, n);
  rope_forward(fo, fi, positions, N, nheads, hd, theta, position_scale);
  store_bf16(out, fo, n);
  free(fi);
}

void rope_backward_cuda(CudaContext *ctx, bf16 *dinp, const bf16 *dout, const int *positions, int N, int nheads, int hd,
                        float theta, float position_scale) {
  size_t n = (size_t)N * nheads * hd;
  Span o[] = {{dinp, nb_bf16(n)}}, i[] = {{dout, nb_bf16(n)}, {positions, nb_i32((size_t)N)}};
  check_operands(__func__, o, 1, i, 2, 1);
  float *fd = to_f32(dout, n), *fo = out_f32(dinp, n);
  rope_backward(fo, fd, positions, N, nheads, hd, theta, position_scale);
  store_bf16(dinp, fo, n);
  free(fd);
}

// rope.cu's rule: 0 <= rot_pairs <= hd/2, else it exits.
static void require_rot_pairs(const char *op, int hd, int rot_pairs) {
  if (rot_pairs < 0 || rot_pairs > hd / 2)
    standin_die("%s: rot_pairs %d outside [0, hd/2 = %d]", op, rot_pairs, hd / 2);
}

void rope_forward_partial_cuda(CudaContext *ctx, bf16 *out, const bf16 *inp, const int *positions, int N, int nheads,
                               int hd, float theta, float position_scale, int rot_pairs) {
  size_t n = (size_t)N * nheads * hd;
  require_rot_pairs(__func__, hd, rot_pairs);
  Span o[] = {{out, nb_bf16(n)}}, i[] = {{inp, nb_bf16(n)}, {positions, nb_i32((size_t)N)}};
  check_operands(__func__, o, 1, i, 2, 1);
  float *fi = to_f32(inp, n), *fo = out_f32(out, n);
  rope_forward_partial(fo, fi, positions, N, nheads, hd, theta, position_scale, rot_pairs);
  store_bf16(out, fo, n);
  free(fi);
}

void rope_backward_partial_cuda(CudaContext *ctx, bf16 *dinp, const bf16 *dout, const int *positions, int N,
                                int nheads, int hd, float theta, float position_scale, int rot_pairs) {
  size_t n = (size_t)N * nheads * hd;
  require_rot_pairs(__func__, hd, rot_pairs);
  Span o[] = {{dinp, nb_bf16(n)}}, i[] = {{dout, nb_bf16(n)}, {positions, nb_i32((size_t)N)}};
  check_operands(__func__, o, 1, i, 2, 1);
  float *fd = to_f32(dout, n), *fo = out_f32(dinp, n);
  rope_backward_partial(fo, fd, positions, N, nheads, hd, theta, position_scale, rot_pairs);
  store_bf16(dinp, fo, n);
  free(fd);
}

// ---- GeGLU ----

void geglu_forward_cuda(CudaContext *ctx, bf16 *out, const bf16 *gate, const bf16 *up, size_t n) {
  Span o[] = {{out, nb_bf16(n)}}, i[] = {{gate, nb_bf16(n)}, {up, nb_bf16(n)}};
  check_operands(__func__, o, 1, i, 2, 0);
  float *fg = to_f32(gate, n), *fu = to_f32(up, n), *fo = out_f32(out, n);
  geglu_forward(fo, fg, fu, n);
  store_bf16(out, fo, n);
  free(fg), free(fu);
}

void geglu_backward_cuda(CudaContext *ctx, bf16 *dgate, bf16 *dup, const bf16 *dout, const bf16 *gate, const bf16 *up,
                         size_t n) {
  Span o[] = {{dgate, nb_bf16(n)}, {dup, nb_bf16(n)}}, i[] = {{dout, nb_bf16(n)}, {gate, nb_bf16(n)}, {up, nb_bf16(n)}};
  check_operands(__func__, o, 2, i, 3, 0);
  float *fd = to_f32(dout, n), *fg = to_f32(gate, n), *fu = to_f32(up, n);
  float *fdg = out_f32(dgate, n), *fdu = out_f32(dup, n);
  geglu_backward(fdg, fdu, fd, fg, fu, n);
  store_bf16(dgate, fdg, n);
  store_bf16(dup, fdu, n);
  free(fd), free(fg), free(fu);
}

// ---- embedding ----

void embedding_forward_cuda(CudaContext *ctx, bf16 *out, const int *tokens, const bf16 *wte, int N, int C,
                            float scale) {
  size_t NC = (size_t)N * C;
  require_device(tokens, nb_i32((size_t)N), __func__);
  // The op does not take V: wte's extent is checked up to the largest id read.
  int max_token = -1;
  for (int r = 0; r < N; r++) max_token = tokens[r] > max_token ? tokens[r] : max_token;
  size_t rows = (size_t)max_token + 1;
  Span o[] = {{out, nb_bf16(NC)}}, i[] = {{tokens, nb_i32((size_t)N)}, {wte, nb_bf16(rows * C)}};
  check_operands(__func__, o, 1, i, 2, 0);
  float *fw = to_f32(wte, rows * C), *fo = out_f32(out, NC);
  embedding_forward(fo, tokens, fw, N, C, scale);
  store_bf16(out, fo, NC);
  free(fw);
}

void embedding_backward_cuda(CudaContext *ctx, float *dwte, const bf16 *dout, const int *tokens, int N, int C, int V,
                             float scale, int padding_idx) {
  size_t NC = (size_t)N * C;
  Span o[] = {{dwte, nb_f32((size_t)V * C)}}, i[] = {{dout, nb_bf16(NC)}, {tokens, nb_i32((size_t)N)}};
  check_operands(__func__, o, 1, i, 2, 0);
  require_tokens_below(__func__, tokens, N, V);
  float *fd = to_f32(dout, NC);
  embedding_backward(dwte, fd, tokens, N, C, scale, padding_idx);
  free(fd);
}

// ---- attention ----

// The real kernels' shape rule (kernels/cuda/attention.cu): anything else exits.
static void require_attention_shape(const char *op, int nh, int nkv, int hd) {
  if (nh <= 0 || nkv <= 0 || nh % nkv != 0 || (hd != 64 && hd != 128 && hd != 256 && hd != 512)) {
    fprintf(stderr, "ops_cuda_standin: %s: unsupported shape nh=%d nkv=%d hd=%d (hd in {64,128,256,512})\n", op, nh,
            nkv, hd);
    abort();
  }
}

void attention_forward_cuda(CudaContext *ctx, bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int B,
                            int T, int nh, int nkv, int hd, int window, float softcap, float scale) {
  require_attention_shape(__func__, nh, nkv, hd);
  size_t nq = (size_t)B * T * nh * hd, nk = (size_t)B * T * nkv * hd;
  Span o[] = {{out, nb_bf16(nq)}, {lse, nb_f32((size_t)B * nh * T)}};
  Span i[] = {{q, nb_bf16(nq)}, {k, nb_bf16(nk)}, {v, nb_bf16(nk)}};
  check_operands(__func__, o, 2, i, 3, 0);
  float *fq = to_f32(q, nq), *fk = to_f32(k, nk), *fv = to_f32(v, nk), *fo = out_f32(out, nq);
  attention_forward(fo, lse, fq, fk, fv, B, T, nh, nkv, hd, window, softcap, scale);
  store_bf16(out, fo, nq);
  free(fq), free(fk), free(fv);
}

void attention_backward_cuda(CudaContext *ctx, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                             const bf16 *k, const bf16 *v, const bf16 *out, const float *lse, int B, int T, int nh,
                             int nkv, int hd, int window, float softcap, float scale) {
  require_attention_shape(__func__, nh, nkv, hd);
  size_t nq = (size_t)B * T * nh * hd, nk = (size_t)B * T * nkv * hd;
  Span o[] = {{dq, nb_bf16(nq)}, {dk, nb_bf16(nk)}, {dv, nb_bf16(nk)}};
  Span i[] = {{dout, nb_bf16(nq)}, {q, nb_bf16(nq)},   {k, nb_bf16(nk)},
              {v, nb_bf16(nk)},    {out, nb_bf16(nq)}, {lse, nb_f32((size_t)B * nh * T)}};
  check_operands(__func__, o, 3, i, 6, 0);
  float *fd = to_f32(dout, nq), *fq = to_f32(q, nq), *fk = to_f32(k, nk), *fv = to_f32(v, nk), *fo = to_f32(out, nq);
  float *fdq = out_f32(dq, nq), *fdk = out_f32(dk, nk), *fdv = out_f32(dv, nk);
  attention_backward(fdq, fdk, fdv, fd, fq, fk, fv, fo, lse, B, T, nh, nkv, hd, window, softcap, scale);
  store_bf16(dq, fdq, nq);
  store_bf16(dk, fdk, nk);
  store_bf16(dv, fdv, nk);
  free(fd), free(fq), free(fk), free(fv), free(fo);
}

void attention_decode_cuda(CudaContext *ctx, bf16 *out, const bf16 *q, const bf16 *k_cache, const bf16 *v_cache,
                           const int *lengths, int B, int S, int nh, int nkv, int hd, int window, float softcap,
                           float scale) {
  require_attention_shape(__func__, nh, nkv, hd);
  size_t nq = (size_t)B * nh * hd, nk = (size_t)B * S * nkv * hd;
  Span o[] = {{out, nb_bf16(nq)}};
  Span i[] = {{q, nb_bf16(nq)}, {k_cache, nb_bf16(nk)}, {v_cache, nb_bf16(nk)}, {lengths, nb_i32((size_t)B)}};
  check_operands(__func__, o, 1, i, 4, 0);
  // 0 is in the contract (no valid key: a zero row, ops.h); beyond the cache
  // or negative is a bookkeeping bug of the caller.
  for (int b = 0; b < B; b++)
    if (lengths[b] < 0 || lengths[b] > S)
      standin_die("%s: length %d of sequence %d is outside [0, %d]", __func__, lengths[b], b, S);
  float *fq = to_f32(q, nq), *fk = to_f32(k_cache, nk), *fv = to_f32(v_cache, nk), *fo = out_f32(out, nq);
  attention_decode(fo, fq, fk, fv, lengths, B, S, nh, nkv, hd, window, softcap, scale);
  store_bf16(out, fo, nq);
  free(fq), free(fk), free(fv);
}

// N queries of one sequence against its cache: N CPU decodes with B = 1
// (the CUDA op's own definition, ops_cuda.h).
void attention_prefill_cuda(CudaContext *ctx, bf16 *out, const bf16 *q, const bf16 *k_cache, const bf16 *v_cache,
                            const int *lengths, int N, int S, int nh, int nkv, int hd, int window, float softcap,
                            float scale) {
  require_attention_shape(__func__, nh, nkv, hd);
  size_t nq = (size_t)N * nh * hd, nk = (size_t)S * nkv * hd;
  Span o[] = {{out, nb_bf16(nq)}};
  Span i[] = {{q, nb_bf16(nq)}, {k_cache, nb_bf16(nk)}, {v_cache, nb_bf16(nk)}, {lengths, nb_i32((size_t)N)}};
  check_operands(__func__, o, 1, i, 4, 0);
  for (int n = 0; n < N; n++)
    if (lengths[n] < 0 || lengths[n] > S)
      standin_die("%s: length %d of query %d is outside [0, %d]", __func__, lengths[n], n, S);
  float *fq = to_f32(q, nq), *fk = to_f32(k_cache, nk), *fv = to_f32(v_cache, nk), *fo = out_f32(out, nq);
  size_t row = (size_t)nh * hd;
  for (int n = 0; n < N; n++)
    attention_decode(fo + n * row, fq + n * row, fk, fv, lengths + n, 1, S, nh, nkv, hd, window, softcap, scale);
  store_bf16(out, fo, nq);
  free(fq), free(fk), free(fv);
}

// ---- attention "through cuDNN": fimi's attention behind cuDNN's argument rules ----

// check_arguments of kernels/cuda/attention_cudnn.cpp, same messages.
static int cudnn_arguments(int B, int T, int nh, int nkv, int hd, float softcap, FimiError *err) {
  if (softcap > 0.0f)
    return fimi_fail(err,
                     "cuDNN attention has no logit softcap (its SDPA cannot combine a score modifier with masks); "
                     "use cuda.attention = fimi for softcapped models (Gemma 2)");
  if (B <= 0 || T <= 0 || nh <= 0 || nkv <= 0 || hd <= 0 || nh % nkv != 0)
    return fimi_fail(err, "cuDNN attention: bad shape B %d T %d nh %d nkv %d hd %d", B, T, nh, nkv, hd);
  return 0;
}

int attention_forward_cudnn(CudaContext *ctx, bf16 *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v, int B,
                            int T, int nh, int nkv, int hd, int window, float softcap, float scale, FimiError *err) {
  if (cudnn_arguments(B, T, nh, nkv, hd, softcap, err) != 0) return -1;
  attention_forward_cuda(ctx, out, lse, q, k, v, B, T, nh, nkv, hd, window, softcap, scale);
  return 0;
}

int attention_backward_cudnn(CudaContext *ctx, bf16 *dq, bf16 *dk, bf16 *dv, const bf16 *dout, const bf16 *q,
                             const bf16 *k, const bf16 *v, const bf16 *out, const float *lse, int B, int T, int nh,
                             int nkv, int hd, int window, float softcap, float scale, FimiError *err) {
  if (cudnn_arguments(B, T, nh, nkv, hd, softcap, err) != 0) return -1;
  attention_backward_cuda(ctx, dq, dk, dv, dout, q, k, v, out, lse, B, T, nh, nkv, hd, window, softcap, scale);
  return 0;
}

int attention_cudnn_check(int backward, int B, int T, int nh, int nkv, int hd, int window, float softcap, float scale,
                          FimiError *err) {
  return cudnn_arguments(B, T, nh, nkv, hd, softcap, err);
}

// ---- fused LM head ----

void lm_head_logprob_forward_cuda(CudaContext *ctx, float *logprobs, float *lse, const bf16 *hidden, const bf16 *wte,
                                  const int *targets, int N, int C, int V, float softcap) {
  size_t NC = (size_t)N * C, VC = (size_t)V * C;
  Span o[] = {{logprobs, nb_f32((size_t)N)}, {lse, nb_f32((size_t)N)}};
  Span i[] = {{hidden, nb_bf16(NC)}, {wte, nb_bf16(VC)}, {targets, nb_i32((size_t)N)}};
  check_operands(__func__, o, 2, i, 3, 0);
  float *fh = to_f32(hidden, NC), *fw = to_f32(wte, VC);
  lm_head_logprob_forward(logprobs, lse, fh, fw, targets, N, C, V, softcap);
  free(fh), free(fw);
}

void lm_head_logprob_backward_cuda(CudaContext *ctx, bf16 *dhidden, float *dwte, const float *dlogprobs,
                                   const bf16 *hidden, const bf16 *wte, const int *targets, const float *lse, int N,
                                   int C, int V, float softcap) {
  size_t NC = (size_t)N * C, VC = (size_t)V * C;
  Span o[] = {{dhidden, nb_bf16(NC)}, {dwte, nb_f32(VC)}};
  Span i[] = {{dlogprobs, nb_f32((size_t)N)},
              {hidden, nb_bf16(NC)},
              {wte, nb_bf16(VC)},
              {targets, nb_i32((size_t)N)},
              {lse, nb_f32((size_t)N)}};
  check_operands(__func__, o, 2, i, 5, 0);
  float *fh = to_f32(hidden, NC), *fw = to_f32(wte, VC), *fdh = out_f32(dhidden, NC);
  lm_head_logprob_backward(fdh, dwte, dlogprobs, fh, fw, targets, lse, N, C, V, softcap);
  store_bf16(dhidden, fdh, NC);
  free(fh), free(fw);
}

void lm_head_logprob_forward_backward_cuda(CudaContext *ctx, float *logprobs, float *lse, bf16 *dhidden, float *dwte,
                                           const float *dlogprobs, const bf16 *hidden, const bf16 *wte,
                                           const int *targets, int N, int C, int V, float softcap) {
  size_t NC = (size_t)N * C, VC = (size_t)V * C;
  if (!lse) standin_die("%s: lse is required", __func__);
  Span o[] = {{logprobs, nb_f32((size_t)N)}, {lse, nb_f32((size_t)N)}, {dhidden, nb_bf16(NC)}, {dwte, nb_f32(VC)}};
  Span i[] = {{dlogprobs, nb_f32((size_t)N)}, {hidden, nb_bf16(NC)}, {wte, nb_bf16(VC)}, {targets, nb_i32((size_t)N)}};
  check_operands(__func__, o, 4, i, 4, 0);
  float *fh = to_f32(hidden, NC), *fw = to_f32(wte, VC), *fdh = out_f32(dhidden, NC);
  lm_head_logprob_forward_backward(logprobs, lse, fdh, dwte, dlogprobs, fh, fw, targets, N, C, V, softcap);
  store_bf16(dhidden, fdh, NC);
  free(fh), free(fw);
}

void lm_head_logits_cuda(CudaContext *ctx, float *logits, const bf16 *hidden, const bf16 *wte, int N, int C, int V,
                         float softcap) {
  size_t NC = (size_t)N * C, VC = (size_t)V * C;
  Span o[] = {{logits, nb_f32((size_t)N * V)}}, i[] = {{hidden, nb_bf16(NC)}, {wte, nb_bf16(VC)}};
  check_operands(__func__, o, 1, i, 2, 0);
  float *fh = to_f32(hidden, NC), *fw = to_f32(wte, VC);
  lm_head_logits(logits, fh, fw, N, C, V, softcap);
  free(fh), free(fw);
}

// ---- sampling ----

// hash_u64 of kernels/cuda/common.cuh (splitmix64 finalizer of seed + index).
static uint64_t hash_u64(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Argmax over the non-NaN logits, lowest index on ties (all NaN: 0).
static int row_argmax(const float *z, int V) {
  int best = -1;
  for (int i = 0; i < V; i++)
    if (!isnan(z[i]) && (best < 0 || z[i] > z[best])) best = i;
  return best < 0 ? 0 : best;
}

static const float *sort_weights;  // qsort has no context argument
static int by_weight_desc(const void *pa, const void *pb) {
  int a = *(const int *)pa, b = *(const int *)pb;
  if (sort_weights[a] != sort_weights[b]) return sort_weights[a] > sort_weights[b] ? -1 : 1;
  return a < b ? -1 : 1;
}

// Zeroes the weights outside the nucleus: the shortest prefix of the tokens
// sorted by weight (descending, lower index first on ties) whose mass reaches
// top_p of the total (top_p >= 1: every token with a weight). Returns the kept mass.
static double keep_nucleus(float *w, int V, float top_p, double total) {
  int *order = host_alloc(nb_i32((size_t)V));
  for (int i = 0; i < V; i++) order[i] = i;
  sort_weights = w;
  qsort(order, (size_t)V, sizeof *order, by_weight_desc);
  double need = top_p < 1.0f ? (double)top_p * total : total, mass = 0;
  int kept = 0;
  while (kept < V && w[order[kept]] > 0.0f && (kept == 0 || mass < need)) mass += w[order[kept++]];
  for (int i = kept; i < V; i++) w[order[i]] = 0.0f;
  free(order);
  return mass;
}

// One row as sampling.cu's contract: weights exp((l - max) / T), the nucleus,
// then u * (kept mass) with u from hash_u64(seed, row), walked over the kept
// tokens in index order (rounding fallback: the last kept token).
static int sample_row(const float *z, int V, float temperature, float top_p, uint64_t seed, int row) {
  int best = row_argmax(z, V);
  if (temperature <= 0.0f || top_p <= 0.0f || isinf(z[best])) return best;
  float *w = host_alloc(nb_f32((size_t)V));
  double total = 0;
  for (int i = 0; i < V; i++) {
    w[i] = isnan(z[i]) ? 0.0f : expf((z[i] - z[best]) / temperature);
    total += w[i];
  }
  double mass = keep_nucleus(w, V, top_p, total);
  double target = (double)(hash_u64(seed, (uint64_t)row) >> 11) * 0x1.0p-53 * mass, run = 0;
  int token = best;
  for (int i = 0; i < V; i++) {
    if (w[i] <= 0.0f) continue;
    token = i;
    run += w[i];
    if (run > target) break;
  }
  free(w);
  return token;
}

void sample_tokens_cuda(CudaContext *ctx, int *out_tokens, const float *logits, int N, int V, float temperature,
                        float top_p, uint64_t seed) {
  Span o[] = {{out_tokens, nb_i32((size_t)N)}}, i[] = {{logits, nb_f32((size_t)N * V)}};
  check_operands(__func__, o, 1, i, 1, 0);
  for (int r = 0; r < N; r++) out_tokens[r] = sample_row(logits + (size_t)r * V, V, temperature, top_p, seed, r);
}

// ---- optimizer ----

// Stochastic rounding of float_to_bf16_stochastic (common.cuh): 16 random bits
// added below the bf16 mantissa, then truncation; Inf/NaN to nearest.
static bf16 bf16_stochastic(float x, uint32_t random16) {
  uint32_t bits;
  memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) return float_to_bf16(x);
  bits += random16 & 0xffffu;
  return (bf16)(bits >> 16);
}

// out (n) = in rounded stochastically, element k with hash(seed, index0 + k)'s bits.
static void round_stochastic(bf16 *out, const float *in, size_t n, uint64_t seed, size_t index0) {
  for (size_t k = 0; k < n; k++) out[k] = bf16_stochastic(in[k], (uint32_t)hash_u64(seed, (uint64_t)(index0 + k)));
}

void adamw_update_cuda(CudaContext *ctx, float *param, float *m, float *v, const float *grad, bf16 *bf16_param,
                       size_t n, const AdamWStep *step, uint64_t seed, size_t index0) {
  Span o[] = {{param, nb_f32(n)}, {m, nb_f32(n)}, {v, nb_f32(n)}, {bf16_param, nb_bf16(n)}};
  Span i[] = {{grad, nb_f32(n)}};
  check_operands(__func__, o, 4, i, 1, 0);
  require_host(step, sizeof *step, __func__);  // passed by pointer, read on the host
  adamw_update(param, m, v, grad, n, step);
  if (bf16_param) round_stochastic(bf16_param, param, n, seed, index0);
}

void round_bf16_stochastic_cuda(CudaContext *ctx, bf16 *out, const float *in, size_t n, uint64_t seed,
                                size_t index0) {
  Span o[] = {{out, nb_bf16(n)}}, i[] = {{in, nb_f32(n)}};
  check_operands(__func__, o, 1, i, 1, 0);
  round_stochastic(out, in, n, seed, index0);
}

// Pairwise sum of v (n), n >= 1.
static double pairwise_sum(const double *v, size_t n) {
  return n == 1 ? v[0] : pairwise_sum(v, n / 2) + pairwise_sum(v + n / 2, n - n / 2);
}

// In adamw.cu's order rather than the CPU's: 1024 x 256 threads, thread t
// summing x[t], x[t + stride], ... in double, then trees over the partials.
// Its rounding error is that small (tests/gpu/test_gpu_adamw.c holds the GPU
// to 1e-12 at n = 2^28, which a sequential sum misses).
void sum_squares_cuda(CudaContext *ctx, double *out, const float *x, size_t n) {
  Span o[] = {{out, sizeof(double)}}, i[] = {{x, nb_f32(n)}};
  check_operands(__func__, o, 1, i, 1, 0);
  enum { THREADS = 1024 * 256 };
  double *partial = calloc(THREADS, sizeof(double));
  if (!partial) standin_die("sum_squares_cuda: out of host memory");
  for (size_t t = 0; t < THREADS; t++)
    for (size_t k = t; k < n; k += THREADS) partial[t] += (double)x[k] * (double)x[k];
  *out = pairwise_sum(partial, THREADS);
  free(partial);
}
