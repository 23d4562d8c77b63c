/*
 * augment_simd.h - how the pixel loops of the augmentations and the output
 * conversion are compiled (augment_ops.c, augment_geom.c, convert.c include
 * it after their other headers; nothing else should: the pragma applies to
 * the rest of the file that includes it).
 *
 * The loops are written to vectorise; GCC's -O2 cost model leaves most of
 * them scalar, so these files ask for its dynamic model. Float contraction
 * (a * b + c as one FMA) stays off whatever the flags, since the ops repeat
 * torchvision's float32 steps one rounding at a time. RF_CLONES marks the
 * hottest float loops to be built for AVX2 as well and picked at load time
 * (an ifunc); the results are the same IEEE values either way.
 */
#ifndef RF_AUGMENT_SIMD_H
#define RF_AUGMENT_SIMD_H

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "fp-contract=off")
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__ELF__) && \
    !defined(__SANITIZE_THREAD__) /* its runtime is not up when ifunc resolvers run */
#define RF_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define RF_CLONES
#endif

#endif
