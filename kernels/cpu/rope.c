// kernels/cpu/rope.c: rotary position embedding on the CPU (see ops.h).
// Defines rope_forward and rope_backward, rotate_half convention: dimension i
// is paired with i + hd/2 (not interleaved pairs 2i, 2i+1), and
// rope_forward_partial / rope_backward_partial (Gemma 4's "proportional"
// rope: only the first pairs rotate).
// The angles are computed in float32 step by step as Hugging Face does, so
// cos/sin match bitwise up to the libm used:
//   inv_freq_i = 1 / theta^((2i)/hd)   (float32, then / position_scale for
//                                        HF's "linear" rope_scaling)
//   angle      = float(pos) * inv_freq_i (one float32 product)
#include "kernels/ops.h"

#include <math.h>
#include <stdlib.h>

// inv_freq (hd/2); pairs from rot_pairs on get frequency 0, as HF's
// proportional rope pads them: cos 1, sin 0, an exact pass-through.
static void rope_inv_freq(float *inv_freq, int hd, float theta, float position_scale, int rot_pairs) {
  for (int i = rot_pairs; i < hd / 2; i++) inv_freq[i] = 0.0f;
  for (int i = 0; i < hd / 2 && i < rot_pairs; i++) {
    float exponent = (float)(2 * i) / (float)hd;
    inv_freq[i] = 1.0f / powf(theta, exponent);
    // HF applies linear scaling to the frequencies, not to the positions
    if (position_scale != 1.0f) inv_freq[i] = inv_freq[i] / position_scale;
  }
}

// cos/sin of one position's angles: cos_row, sin_row (hd/2); sin is
// multiplied by direction (-1 rotates backwards).
static void rope_angles(float *cos_row, float *sin_row, const float *inv_freq, int half, int position,
                        float direction) {
  float pos = (float)position;
  for (int i = 0; i < half; i++) {
    float angle = pos * inv_freq[i];
    cos_row[i] = cosf(angle);
    sin_row[i] = direction * sinf(angle);
  }
}

// y, x (nheads, hd): x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1).
static void rope_rotate_heads(float *y, const float *x, const float *cos_row, const float *sin_row, int nheads,
                              int hd) {
  int half = hd / 2;
  for (int h = 0; h < nheads; h++, x += hd, y += hd) {
    for (int i = 0; i < half; i++) {
      float x1 = x[i], x2 = x[i + half];
      y[i] = x1 * cos_row[i] - x2 * sin_row[i];
      y[i + half] = x2 * cos_row[i] + x1 * sin_row[i];
    }
  }
}

// A batch repeats the positions 0..T-1 in every sequence, so when the
// largest position is small next to N the cos/sin of each position are
// computed once into a table ((P+1, hd/2) each) instead of once per row:
// the same cosf/sinf calls, so the result is bitwise identical.
// Returns NULL (rows compute their own) when it would not pay or malloc fails.
static float *rope_table(const int *positions, int N, const float *inv_freq, int half, float direction) {
  int max_position = 0;
  for (int n = 0; n < N; n++) {
    if (positions[n] < 0) return NULL;
    if (positions[n] > max_position) max_position = positions[n];
  }
  long rows = (long)max_position + 1;
  if (rows * 2 > N) return NULL;
  float *table = malloc((size_t)rows * 2 * (size_t)half * sizeof(float));  // (P+1, 2, hd/2)
  if (!table) return NULL;
#pragma omp parallel for schedule(static)
  for (long p = 0; p < rows; p++)
    rope_angles(table + p * 2 * half, table + p * 2 * half + half, inv_freq, half, (int)p, direction);
  return table;
}

// Rotates every head of every row by +angle (direction = 1) or -angle
// (direction = -1, the transpose, which is the backward). In place is safe:
// each pair is read before either half is written.
// out, inp (N, nheads, hd), positions (N)
static void rope_rotate(float *out, const float *inp, const int *positions, int N, int nheads, int hd, float theta,
                        float position_scale, int rot_pairs, float direction) {
  int half = hd / 2;
  if (N <= 0 || half <= 0) return;
  float inv_freq[half];  // (hd/2)
  rope_inv_freq(inv_freq, hd, theta, position_scale, rot_pairs);
  float *table = rope_table(positions, N, inv_freq, half, direction);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    float cos_row[half], sin_row[half];  // (hd/2) shared by every head of this row
    const float *c = cos_row, *s = sin_row;
    if (table) {
      c = table + (long)positions[n] * 2 * half;
      s = c + half;
    } else {
      rope_angles(cos_row, sin_row, inv_freq, half, positions[n], direction);
    }
    long offset = (long)n * nheads * hd;
    rope_rotate_heads(out + offset, inp + offset, c, s, nheads, hd);
  }
  free(table);
}

// out, inp (N, nheads, hd), positions (N). In place allowed.
void rope_forward(float *out, const float *inp, const int *positions, int N, int nheads, int hd, float theta,
                  float position_scale) {
  rope_rotate(out, inp, positions, N, nheads, hd, theta, position_scale, hd / 2, 1.0f);
}

void rope_forward_partial(float *out, const float *inp, const int *positions, int N, int nheads, int hd, float theta,
                          float position_scale, int rot_pairs) {
  rope_rotate(out, inp, positions, N, nheads, hd, theta, position_scale, rot_pairs, 1.0f);
}

// The rotation is orthogonal, so its backward is the rotation by -angle.
// dinp, dout (N, nheads, hd), positions (N). In place allowed.
void rope_backward(float *dinp, const float *dout, const int *positions, int N, int nheads, int hd, float theta,
                   float position_scale) {
  rope_rotate(dinp, dout, positions, N, nheads, hd, theta, position_scale, hd / 2, -1.0f);
}

void rope_backward_partial(float *dinp, const float *dout, const int *positions, int N, int nheads, int hd,
                           float theta, float position_scale, int rot_pairs) {
  rope_rotate(dinp, dout, positions, N, nheads, hd, theta, position_scale, rot_pairs, -1.0f);
}
