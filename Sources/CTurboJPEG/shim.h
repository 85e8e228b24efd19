#ifndef FRAMETAP_CTURBOJPEG_SHIM_H
#define FRAMETAP_CTURBOJPEG_SHIM_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <turbojpeg.h>

// Limited-range (video) samples to JPEG's full range, sixteen at a time. JFIF is full range and
// decoded H.264/H.265 is 16-235 (luma) and 16-240 (chroma), so every JPEG of a limited-range
// picture first goes through these. The arithmetic gives, for every input byte, exactly
// round((y - 16) * 255 / 219) and round((c - 128) * 255 / 224 + 128), rounding halves away from
// zero, clamped to 0-255 (ImagingTests checks all 256 inputs). With x = y - 16 (clamped to
// 0...219) luma is (x * 2385 + 986) >> 11; with x = c - 16 (c at most 240) chroma is
// (x * 4663 + 4096) >> 12, clamped (below 16 the arithmetic shift gives a negative value).
// In C with vector types because Swift's SIMD types compiled to code slower than a lookup table.

typedef uint8_t ft_u8x16 __attribute__((vector_size(16)));
typedef int16_t ft_i16x16 __attribute__((vector_size(32)));
typedef int32_t ft_i32x16 __attribute__((vector_size(64)));

static inline int32_t ft_clamp_i32(int32_t value, int32_t low, int32_t high) {
    return value < low ? low : (value > high ? high : value);
}

// Clamps in 16-bit lanes (x86-64's baseline, SSE2, has 16-bit min and max but not 32-bit ones) and
// multiplies in 32-bit lanes: twice the speed of a 256-entry table, where clamping in 32-bit lanes
// was no faster than the table.
static inline ft_u8x16 ft_expand_luma16(ft_u8x16 bytes) {
    ft_i16x16 zero = {0};
    ft_i16x16 x = __builtin_convertvector(bytes, ft_i16x16) - 16;
    x = __builtin_elementwise_min(__builtin_elementwise_max(x, zero), zero + 219);
    ft_i32x16 wide = __builtin_convertvector(x, ft_i32x16);
    return __builtin_convertvector(__builtin_convertvector((wide * 2385 + 986) >> 11, ft_i16x16), ft_u8x16);
}

static inline ft_u8x16 ft_expand_chroma16(ft_u8x16 bytes) {
    ft_i16x16 zero = {0};
    ft_i16x16 x = __builtin_elementwise_min(__builtin_convertvector(bytes, ft_i16x16), zero + 240) - 16;
    ft_i32x16 wide = __builtin_convertvector(x, ft_i32x16);
    ft_i16x16 result = __builtin_convertvector((wide * 4663 + 4096) >> 12, ft_i16x16);
    result = __builtin_elementwise_min(__builtin_elementwise_max(result, zero), zero + 255);
    return __builtin_convertvector(result, ft_u8x16);
}

/// `count` samples of one row; `input` and `output` may be the same row.
static inline void ft_expand_range_row(const uint8_t *input, uint8_t *output, size_t count, int chroma) {
    size_t index = 0;
    for (; index + 16 <= count; index += 16) {
        ft_u8x16 bytes;
        memcpy(&bytes, input + index, 16);
        ft_u8x16 result = chroma ? ft_expand_chroma16(bytes) : ft_expand_luma16(bytes);
        memcpy(output + index, &result, 16);
    }
    for (; index < count; index++) {
        int32_t sample = input[index];
        if (chroma) {
            output[index] = (uint8_t)ft_clamp_i32(((ft_clamp_i32(sample, 0, 240) - 16) * 4663 + 4096) >> 12, 0, 255);
        } else {
            output[index] = (uint8_t)(((ft_clamp_i32(sample, 16, 235) - 16) * 2385 + 986) >> 11);
        }
    }
}

/// A plane of `rows` rows of `rowBytes` samples; `input` and `output` may be the same plane.
static inline void ft_expand_range_plane(
    const uint8_t *input, ptrdiff_t inputStride, uint8_t *output, ptrdiff_t outputStride,
    size_t rowBytes, size_t rows, int chroma) {
    for (size_t row = 0; row < rows; row++) {
        ft_expand_range_row(input + (ptrdiff_t)row * inputStride, output + (ptrdiff_t)row * outputStride, rowBytes, chroma);
    }
}

#endif
