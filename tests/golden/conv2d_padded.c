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
__attribute__((visibility("default"))) int default_function(float* restrict data, float* restrict kernel, float* restrict conv) {
  asc_error = 0;
  for (int32_t n = 0; n < 1; ++n) {
    #pragma omp parallel for schedule(static)
    for (int32_t f = 0; f < 4; ++f) {
      conv[((n * 400) + (f * 100))] = 0.0f;
      for (int32_t rc = 0; rc < 3; ++rc) {
        for (int32_t rx = 0; rx < 3; ++rx) {
          conv[((n * 400) + (f * 100))] = (conv[((n * 400) + (f * 100))] + (0.0f * kernel[(((f * 27) + (rc * 9)) + rx)]));
        }
        for (int32_t ry = 0; ry < 2; ++ry) {
          conv[((n * 400) + (f * 100))] = (conv[((n * 400) + (f * 100))] + (0.0f * kernel[((((f * 27) + (rc * 9)) + (ry * 3)) + 3)]));
          for (int32_t rx_2 = 0; rx_2 < 2; ++rx_2) {
            conv[((n * 400) + (f * 100))] = (conv[((n * 400) + (f * 100))] + (data[((((n * 300) + (rc * 100)) + (ry * 10)) + rx_2)] * kernel[(((((f * 27) + (rc * 9)) + (ry * 3)) + rx_2) + 4)]));
          }
        }
      }
      for (int32_t x = 0; x < 8; ++x) {
        conv[((((n * 400) + (f * 100)) + x) + 1)] = 0.0f;
        for (int32_t rc_2 = 0; rc_2 < 3; ++rc_2) {
          for (int32_t ry_2 = 0; ry_2 < 3; ++ry_2) {
            for (int32_t rx_3 = 0; rx_3 < 3; ++rx_3) {
              conv[((((n * 400) + (f * 100)) + x) + 1)] = (conv[((((n * 400) + (f * 100)) + x) + 1)] + ((((0 + ry_2) >= 1) ? data[((((((n * 300) + (rc_2 * 100)) + (ry_2 * 10)) + x) + rx_3) - 10)] : 0.0f) * kernel[((((f * 27) + (rc_2 * 9)) + (ry_2 * 3)) + rx_3)]));
            }
          }
        }
      }
      conv[(((n * 400) + (f * 100)) + 9)] = 0.0f;
      for (int32_t rc_3 = 0; rc_3 < 3; ++rc_3) {
        for (int32_t ry_3 = 0; ry_3 < 3; ++ry_3) {
          for (int32_t rx_4 = 0; rx_4 < 3; ++rx_4) {
            conv[(((n * 400) + (f * 100)) + 9)] = (conv[(((n * 400) + (f * 100)) + 9)] + (((((0 + ry_3) >= 1) && ((9 + rx_4) < 11)) ? data[(((((n * 300) + (rc_3 * 100)) + (ry_3 * 10)) + rx_4) - 2)] : 0.0f) * kernel[((((f * 27) + (rc_3 * 9)) + (ry_3 * 3)) + rx_4)]));
          }
        }
      }
      for (int32_t y = 0; y < 8; ++y) {
        for (int32_t x_2 = 0; x_2 < 10; ++x_2) {
          conv[(((((n * 400) + (f * 100)) + (y * 10)) + x_2) + 10)] = 0.0f;
          for (int32_t rc_4 = 0; rc_4 < 3; ++rc_4) {
            for (int32_t ry_4 = 0; ry_4 < 3; ++ry_4) {
              for (int32_t rx_5 = 0; rx_5 < 3; ++rx_5) {
                conv[(((((n * 400) + (f * 100)) + (y * 10)) + x_2) + 10)] = (conv[(((((n * 400) + (f * 100)) + (y * 10)) + x_2) + 10)] + (((((x_2 + rx_5) >= 1) && ((x_2 + rx_5) < 11)) ? data[(((((((n * 300) + (rc_4 * 100)) + (y * 10)) + (ry_4 * 10)) + x_2) + rx_5) - 1)] : 0.0f) * kernel[((((f * 27) + (rc_4 * 9)) + (ry_4 * 3)) + rx_5)]));
              }
            }
          }
        }
      }
      for (int32_t x_3 = 0; x_3 < 10; ++x_3) {
        conv[((((n * 400) + (f * 100)) + x_3) + 90)] = 0.0f;
        for (int32_t rc_5 = 0; rc_5 < 3; ++rc_5) {
          for (int32_t ry_5 = 0; ry_5 < 3; ++ry_5) {
            for (int32_t rx_6 = 0; rx_6 < 3; ++rx_6) {
              conv[((((n * 400) + (f * 100)) + x_3) + 90)] = (conv[((((n * 400) + (f * 100)) + x_3) + 90)] + ((((((9 + ry_5) < 11) && ((x_3 + rx_6) >= 1)) && ((x_3 + rx_6) < 11)) ? data[((((((n * 300) + (rc_5 * 100)) + (ry_5 * 10)) + x_3) + rx_6) + 79)] : 0.0f) * kernel[((((f * 27) + (rc_5 * 9)) + (ry_5 * 3)) + rx_6)]));
            }
          }
        }
      }
    }
  }
  return asc_error;
}
