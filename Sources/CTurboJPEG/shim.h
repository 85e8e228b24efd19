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

// Any YCbCr matrix and range to JPEG's: BT.601 (JFIF's matrix) at full range. A picture coded
// with another matrix (BT.709 for almost every HD camera) would otherwise be read with the wrong
// one by every JPEG decoder, its colours shifted. The conversion is linear in (Y - offset,
// Cb - 128, Cr - 128): `m` holds the output rows, 16.16 fixed point, m[0..2] for Y from Y, Cb
// and Cr, m[3..4] for Cb from Cb and Cr, m[5..6] for Cr from Cb and Cr (gray stays gray, so
// chroma never depends on luma). Luma takes the chroma sample its position is subsampled to
// (log2 steps `shiftX`, `shiftY`). In place or not: each plane is read before it is written, luma
// first, since luma reads the chroma as it came.

typedef uint8_t ft_u8x8 __attribute__((vector_size(8)));
typedef int32_t ft_i32x8 __attribute__((vector_size(32)));

// A macro, not a function: a 64-byte vector argument has no stable ABI without AVX-512.
#define ft_pack_clamped16(value) ({ \
    ft_i32x16 ft_zero_ = {0}; \
    __builtin_convertvector(__builtin_elementwise_min(__builtin_elementwise_max((value), ft_zero_), ft_zero_ + 255), ft_u8x16); \
})

static inline void ft_to_jpeg_luma_row(
    const uint8_t *y, const uint8_t *cb, const uint8_t *cr, uint8_t *out, size_t width, int shiftX,
    const int32_t m[7], int32_t lumaOffset) {
    size_t x = 0;
    if (shiftX == 1) {
        for (; x + 16 <= width; x += 16) {
            ft_u8x8 cbBytes, crBytes;
            memcpy(&cbBytes, cb + x / 2, 8);
            memcpy(&crBytes, cr + x / 2, 8);
            ft_i32x8 chroma = (__builtin_convertvector(cbBytes, ft_i32x8) - 128) * m[1]
                + (__builtin_convertvector(crBytes, ft_i32x8) - 128) * m[2];
            ft_i32x16 spread = __builtin_shufflevector(chroma, chroma, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
            ft_u8x16 luma;
            memcpy(&luma, y + x, 16);
            ft_i32x16 value = (__builtin_convertvector(luma, ft_i32x16) - lumaOffset) * m[0] + spread + (1 << 15);
            ft_u8x16 result = ft_pack_clamped16(value >> 16);
            memcpy(out + x, &result, 16);
        }
    } else if (shiftX == 0) {
        for (; x + 16 <= width; x += 16) {
            ft_u8x16 luma, cbv, crv;
            memcpy(&luma, y + x, 16);
            memcpy(&cbv, cb + x, 16);
            memcpy(&crv, cr + x, 16);
            ft_i32x16 value = (__builtin_convertvector(luma, ft_i32x16) - lumaOffset) * m[0]
                + (__builtin_convertvector(cbv, ft_i32x16) - 128) * m[1]
                + (__builtin_convertvector(crv, ft_i32x16) - 128) * m[2] + (1 << 15);
            ft_u8x16 result = ft_pack_clamped16(value >> 16);
            memcpy(out + x, &result, 16);
        }
    }
    for (; x < width; x++) {
        int32_t value = (y[x] - lumaOffset) * m[0] + (cb[x >> shiftX] - 128) * m[1] + (cr[x >> shiftX] - 128) * m[2];
        out[x] = (uint8_t)ft_clamp_i32((value + (1 << 15)) >> 16, 0, 255);
    }
}

static inline void ft_to_jpeg_chroma_row(uint8_t *cbOut, uint8_t *crOut, const uint8_t *cb, const uint8_t *cr, size_t width, const int32_t m[7]) {
    size_t x = 0;
    for (; x + 16 <= width; x += 16) {
        ft_u8x16 cbv, crv;
        memcpy(&cbv, cb + x, 16);
        memcpy(&crv, cr + x, 16);
        ft_i32x16 b = __builtin_convertvector(cbv, ft_i32x16) - 128;
        ft_i32x16 r = __builtin_convertvector(crv, ft_i32x16) - 128;
        ft_u8x16 newCb = ft_pack_clamped16(((b * m[3] + r * m[4] + (1 << 15)) >> 16) + 128);
        ft_u8x16 newCr = ft_pack_clamped16(((b * m[5] + r * m[6] + (1 << 15)) >> 16) + 128);
        memcpy(cbOut + x, &newCb, 16);
        memcpy(crOut + x, &newCr, 16);
    }
    for (; x < width; x++) {
        int32_t b = cb[x] - 128, r = cr[x] - 128;
        int32_t newCb = ((b * m[3] + r * m[4] + (1 << 15)) >> 16) + 128;
        int32_t newCr = ((b * m[5] + r * m[6] + (1 << 15)) >> 16) + 128;
        cbOut[x] = (uint8_t)ft_clamp_i32(newCb, 0, 255);
        crOut[x] = (uint8_t)ft_clamp_i32(newCr, 0, 255);
    }
}

/// `input[i]`/`output[i]` with `inputStride[i]`/`outputStride[i]`: the Y, Cb and Cr planes, 8-bit,
/// `width` x `height` luma samples, chroma `chromaWidth` x `chromaHeight`.
static inline void ft_ycbcr_to_jpeg(
    const uint8_t *const input[3], const ptrdiff_t inputStride[3], uint8_t *const output[3], const ptrdiff_t outputStride[3],
    size_t width, size_t height, size_t chromaWidth, size_t chromaHeight, int shiftX, int shiftY,
    const int32_t m[7], int32_t lumaOffset) {
    for (size_t row = 0; row < height; row++) {
        size_t chromaRow = row >> shiftY;
        ft_to_jpeg_luma_row(
            input[0] + (ptrdiff_t)row * inputStride[0], input[1] + (ptrdiff_t)chromaRow * inputStride[1],
            input[2] + (ptrdiff_t)chromaRow * inputStride[2], output[0] + (ptrdiff_t)row * outputStride[0], width, shiftX, m,
            lumaOffset);
    }
    for (size_t row = 0; row < chromaHeight; row++) {
        ft_to_jpeg_chroma_row(
            output[1] + (ptrdiff_t)row * outputStride[1], output[2] + (ptrdiff_t)row * outputStride[2],
            input[1] + (ptrdiff_t)row * inputStride[1], input[2] + (ptrdiff_t)row * inputStride[2], chromaWidth, m);
    }
}

#endif
