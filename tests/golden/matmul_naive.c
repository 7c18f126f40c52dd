#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
static int asc_error = 0;
static inline float asc_f16_to_f32(uint16_t h) { _Float16 f; memcpy(&f, &h, 2); return (float)f; }
static inline uint16_t asc_f32_to_f16(float x) { _Float16 f = (_Float16)x; uint16_t h; memcpy(&h, &f, 2); return h; }
static inline float asc_round_f16(float x) { return (float)(_Float16)x; }
static inline float asc_bf16_to_f32(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t asc_f32_to_bf16(float x) {
  uint32_t u; memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u); return (uint16_t)(u >> 16);
}
static inline float asc_round_bf16(float x) { return asc_bf16_to_f32(asc_f32_to_bf16(x)); }
static inline int32_t asc_floordiv_int32(int32_t a, int32_t b) { int32_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int32_t asc_mod_int32(int32_t a, int32_t b) { int32_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
static inline int64_t asc_floordiv_int64(int64_t a, int64_t b) { int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int64_t asc_mod_int64(int64_t a, int64_t b) { int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
typedef float asc_f32x16 __attribute__((vector_size(64)));
typedef double asc_f64x8 __attribute__((vector_size(64)));
static inline asc_f32x16 asc_ld_asc_f32x16(const float* p) { asc_f32x16 v; __builtin_memcpy(&v, p, 64); return v; }
static inline void asc_st_asc_f32x16(float* p, asc_f32x16 v) { __builtin_memcpy(p, &v, 64); }
typedef int32_t asc_i32x16 __attribute__((vector_size(64)));
static inline asc_f32x16 asc_max_asc_f32x16(asc_f32x16 a, asc_f32x16 b) { asc_i32x16 m = a > b; return (asc_f32x16)((m & (asc_i32x16)a) | (~m & (asc_i32x16)b)); }
static inline asc_f32x16 asc_min_asc_f32x16(asc_f32x16 a, asc_f32x16 b) { asc_i32x16 m = a < b; return (asc_f32x16)((m & (asc_i32x16)a) | (~m & (asc_i32x16)b)); }
static inline asc_f64x8 asc_ld_asc_f64x8(const double* p) { asc_f64x8 v; __builtin_memcpy(&v, p, 64); return v; }
static inline void asc_st_asc_f64x8(double* p, asc_f64x8 v) { __builtin_memcpy(p, &v, 64); }
typedef int64_t asc_i64x8 __attribute__((vector_size(64)));
static inline asc_f64x8 asc_max_asc_f64x8(asc_f64x8 a, asc_f64x8 b) { asc_i64x8 m = a > b; return (asc_f64x8)((m & (asc_i64x8)a) | (~m & (asc_i64x8)b)); }
static inline asc_f64x8 asc_min_asc_f64x8(asc_f64x8 a, asc_f64x8 b) { asc_i64x8 m = a < b; return (asc_f64x8)((m & (asc_i64x8)a) | (~m & (asc_i64x8)b)); }
#if defined(__x86_64__)
#include <immintrin.h>
#endif
static inline asc_f32x16 asc_ldm_asc_f32x16(const float* p, int n) {
#if defined(__AVX512F__)
  return (asc_f32x16)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1u), p);
#else
  asc_f32x16 v = {0}; for (int i = 0; i < n; ++i) v[i] = p[i]; return v;
#endif
}
static inline void asc_stm_asc_f32x16(float* p, asc_f32x16 v, int n) {
#if defined(__AVX512F__)
  _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1u), (__m512)v);
#else
  for (int i = 0; i < n; ++i) p[i] = v[i];
#endif
}
static inline asc_f64x8 asc_ldm_asc_f64x8(const double* p, int n) {
#if defined(__AVX512F__)
  return (asc_f64x8)_mm512_maskz_loadu_pd((__mmask8)((1u << n) - 1u), p);
#else
  asc_f64x8 v = {0}; for (int i = 0; i < n; ++i) v[i] = p[i]; return v;
#endif
}
static inline void asc_stm_asc_f64x8(double* p, asc_f64x8 v, int n) {
#if defined(__AVX512F__)
  _mm512_mask_storeu_pd(p, (__mmask8)((1u << n) - 1u), (__m512d)v);
#else
  for (int i = 0; i < n; ++i) p[i] = v[i];
#endif
}
__attribute__((visibility("default"))) int default_function(float* restrict A, float* restrict B, float* restrict C) {
  asc_error = 0;
  for (int32_t i = 0; i < 64; ++i) {
    for (int32_t j = 0; j < 64; ++j) {
      C[((i * 64) + j)] = 0.0f;
      for (int32_t k = 0; k < 64; ++k) {
        C[((i * 64) + j)] = (C[((i * 64) + j)] + (A[((i * 64) + k)] * B[((k * 64) + j)]));
      }
    }
  }
  return asc_error;
}
