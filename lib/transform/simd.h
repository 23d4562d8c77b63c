/*
 * simd.h - the instruction-set levels of the resampler's kernels, shared by
 * the resampler (resample.c, which picks one) and the kernels
 * (kernels.c, which provide each) so neither includes the other.
 */
#ifndef RF_SIMD_H
#define RF_SIMD_H

/* Instruction sets the resampler may use: portable C only; SSE2 intrinsics
 * for the byte transposes; the passes' loops compiled for AVX2 as well. All
 * give the same bytes. A new resampler uses the best that the build and the
 * machine have. */
enum { RF__SIMD_NONE = 0, RF__SIMD_SSE2 = 1, RF__SIMD_AVX2 = 2 };

#endif
