/*
 * lewrite.h - little-endian fields written into a buffer, as BMP's headers
 * have them: the BMP decoder's fuzzer (fuzz_formats.c) and its unit test
 * (test_formats_bmp.c) lay out the same headers. Header-only (static
 * inline).
 */
#ifndef RF_LEWRITE_H
#define RF_LEWRITE_H

#include <stdint.h>

static inline void put16(uint8_t *p, unsigned v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void put32(uint8_t *p, uint32_t v)
{
    put16(p, v & 0xFFFF);
    put16(p + 2, v >> 16);
}

#endif
