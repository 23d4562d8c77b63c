/*
 * copier.h - host memory for the ring, and (with CUDA) the device side.
 *
 * This is the seam between the CPU pipeline and CUDA: without CUDA, host
 * memory is plain page-aligned memory and the device is "cpu".
 */
#ifndef RF_COPIER_H
#define RF_COPIER_H

#include <stddef.h>

/* Allocates bytes of host memory for the ring. With pin and a usable CUDA
 * device it is page-locked (*pinned = 1); otherwise pageable, with the reason
 * written to note when pinning was asked for. NULL when out of memory. */
void *rf__host_alloc(size_t bytes, int pin, int *pinned, char *note, size_t notecap);
void rf__host_free(void *p, int pinned);

/* Number of usable CUDA devices (0 without CUDA, driver or device), and a
 * note saying why when 0. */
int rf__cuda_devices(char *note, size_t notecap);

#endif
