/*
 * convert.h - the last step of a sample on a decode worker: its uint8 RGB
 * picture (HWC) into the slot, in the output's layout and element type
 * (RF_P_DTYPE: uint8, or float32 / float16 / bfloat16 normalised with
 * rf_loader_set_normalize's mean and std).
 *
 * The float value of a byte x on channel c is torchvision's
 * Normalize(mean, std) on ConvertImageDtype(float)'s x / 255, in float32:
 * ((float)x / 255 - mean[c]) / std[c], rounded to nearest even into the
 * 16-bit types. A channel has 256 possible bytes, so each channel is a
 * 256-entry table built once: the conversion costs a lookup per element.
 */
#ifndef RF_CONVERT_H
#define RF_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "augment.h"

typedef struct rf_convert {
    int dtype;  /* enum rf_dtype: RF_DTYPE_UINT8 or a float type */
    int layout; /* enum rf_layout */
    float mean[3], std[3];
    int normalized;       /* uint8 output normalised later: deferred erasing maps its values */
    float f32[3][256];    /* RF_DTYPE_FLOAT32 */
    uint16_t u16[3][256]; /* RF_DTYPE_FLOAT16 / RF_DTYPE_BFLOAT16 bits */
    /* the vector path (x86-64 with AVX2 and F16C): mean and std of 8 lanes,
     * pat[k] for elements 8k.. of an interleaved run (channel i % 3) and
     * pat[3 + c] for a plane of channel c */
    int vec;
    float mean8[6][8], std8[6][8];
    /* x * a + b, a = 1 / (255 std), b = -mean / std: no division, and used
     * only where init checked that it gives every table entry (fast = 1). */
    int fast;
    float a8[6][8], b8[6][8];
} rf_convert;

/* 1 for the float element types (RF_DTYPE_FLOAT32, _FLOAT16, _BFLOAT16). */
int rf__dtype_is_float(int dtype);

/* 1 when trailing RandomErasing ops wait for the conversion (their value is
 * in the normalised space): a float output, or a uint8 one whose
 * normalisation comes later (a mean and std were set: the Python binding's
 * CUDA path normalises on the device). */
int rf__convert_defers(int dtype, int normalized);

/* Bytes of one element of an image output of type dtype (1, 4 or 2). */
size_t rf__convert_elem_size(int dtype);

/* The tables for dtype, layout, mean and std (std nonzero once in float32:
 * rf__convert_check). */
void rf__convert_init(rf_convert *cv, int dtype, int layout, const double mean[3],
                      const double std[3], int normalized);

/* RF_OK, or RF_E_INVALID with the reason in err: a std that is 0 in float32
 * (torchvision refuses it), a mean or std not finite. */
int rf__convert_check(const double mean[3], const double std[3], char *err, size_t errcap);

/* n RGB pixels at s split into the planes d0, d1, d2 (SSSE3 where the
 * machine has it; the same bytes either way). */
void rf__split_planes(const uint8_t *s, uint8_t *d0, uint8_t *d1, uint8_t *d2, int n);

/* IEEE binary16 and bfloat16 bits of a float, rounded to nearest even. */
uint16_t rf__f32_to_f16(float f);
uint16_t rf__f32_to_bf16(float f);

/* The w x h picture at src (rows stride bytes apart; stride 0: three planes
 * of w * h bytes, for a planar output of a float type) into dst (w * h * 3
 * elements, cv's layout and type). With plan, its deferred Erase ops
 * (rf__aug_plan_defer) are then applied in the output's space: the value
 * (or N(0, 1) draws) as the normalised float itself, as torchvision's
 * RandomErasing after Normalize writes them; into a uint8 output normalised
 * later, as the byte nearest to what the normalisation maps to that value
 * (round((v * std + mean) * 255), clamped). scr: the worker's scratch (a
 * float NCHW row's planes, "random" values). RF_OK, or RF_E_NOMEM. */
int rf__convert_run(const rf_convert *cv, const uint8_t *src, int w, int h, ptrdiff_t stride,
                    void *dst, const rf_aug_plan *plan, rf_aug_scratch *scr);

#endif
