/*
 * copy_bench.c - host-to-device bandwidth of batch-sized copies: a plain
 * cudaMemcpyAsync loop (the machine's reference) against ringfeed's copier
 * doing the same work with its own protocol (copy stream, events, a host slot
 * reused only after its copy completed, a device buffer only after its
 * release), from page-locked and from pageable host memory.
 *
 *   rf-copy-bench [--batch 256] [--size 224] [--iters 200] [--slots 4]
 *                 [--repeats 3] [--device 0] [--json FILE]
 *
 * Each figure is the best of `repeats` runs of `iters` copies of batch x
 * size x size x 3 bytes (plus the labels for the copier), wall clock from the
 * first enqueue to the end of a stream synchronisation, in GB/s (1e9 B/s).
 * The copier's host slots are made as a loader's are (rf__copier_slot_alloc:
 * page-locked blocks with the labels' staging, a device buffer each).
 * Prints one JSON object with the machine, the runtime and the git revision
 * (also written to FILE). Without a CUDA device it holds "skipped": "..." and
 * the program exits 0.
 *
 * It does not link libcudart: it calls the runtime the library loaded
 * (lib/cuda/cudart.h: torch's, $RINGFEED_CUDART, or libcudart.so.<major>), so
 * that both use one runtime, found the library's way.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>

#include "benchutil.h"
#include "copier.h"
#include "cudart.h"
#include "ringfeed.h"

static const rf_cudart *rt; /* the runtime the library loaded */

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "rf-copy-bench: %s: %s\n", #x, rt->GetErrorString(e_));                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

typedef struct cfg {
    int batch, size, iters, slots, repeats, device;
    size_t bytes;
} cfg;

/* Plain loop: cudaMemcpyAsync from host[i % slots] to dev[i % slots]. */
static double plain(const cfg *c, int pinned)
{
    cudaStream_t s;
    CK(rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking));
    void **host = calloc((size_t)c->slots, sizeof *host),
         **dev = calloc((size_t)c->slots, sizeof *dev);
    for (int i = 0; i < c->slots; i++) {
        if (pinned)
            CK(rt->HostAlloc(&host[i], c->bytes, cudaHostAllocPortable));
        else if (posix_memalign(&host[i], 4096, c->bytes) != 0)
            exit(1);
        memset(host[i], i, c->bytes);
        CK(rt->Malloc(&dev[i], c->bytes));
    }
    double best = 0;
    for (int r = 0; r <= c->repeats; r++) { /* run 0 warms up */
        CK(rt->StreamSynchronize(s));
        double t0 = bu_now_s();
        for (int i = 0; i < c->iters; i++)
            CK(rt->MemcpyAsync(dev[i % c->slots], host[i % c->slots], c->bytes,
                               cudaMemcpyHostToDevice, s));
        CK(rt->StreamSynchronize(s));
        double gbps = (double)c->bytes * c->iters / (bu_now_s() - t0) / 1e9;
        if (r > 0 && gbps > best)
            best = gbps;
    }
    for (int i = 0; i < c->slots; i++) {
        if (pinned)
            rt->FreeHost(host[i]);
        else
            free(host[i]);
        rt->Free(dev[i]);
    }
    free(host);
    free(dev);
    rt->StreamDestroy(s);
    return best;
}

/* The copier: slot i % slots is reused only once rf__copier_slot_done says so
 * (as the ring's claim does), the batch goes to the device (to_device, the
 * loader's next_device) or into caller memory (copy_to), and is released at
 * once (the consumer does nothing). */
static double copier(const cfg *c, int pinned, int direct, char *why, size_t whycap)
{
    rf_copier *cp = NULL;
    char note[256] = "", err[256] = "";
    int rc = rf__copier_open(&cp, c->device, c->slots, c->bytes, c->batch, note, sizeof note, err,
                             sizeof err);
    if (rc < 0 || !cp) {
        snprintf(why, whycap, "%s%s", err, note);
        return 0;
    }
    uint8_t **host = calloc((size_t)c->slots, sizeof *host);
    void **dst = calloc((size_t)c->slots, sizeof *dst);
    int *pin = calloc((size_t)c->slots, sizeof *pin);
    int64_t *labels = calloc((size_t)c->batch, sizeof *labels);
    for (int i = 0; i < c->slots; i++) {
        char n2[160] = "";
        host[i] = rf__copier_slot_alloc(cp, i, c->bytes, pinned, &pin[i], n2, sizeof n2);
        if (!host[i] || pin[i] != pinned) {
            snprintf(why, whycap, "host memory: %s", n2);
            return 0;
        }
        memset(host[i], i, c->bytes);
        if (direct)
            CK(rt->Malloc(&dst[i], c->bytes + (size_t)c->batch * 8));
    }
    cudaStream_t s;
    CK(rt->StreamCreateWithFlags(&s, cudaStreamNonBlocking));
    double best = 0;
    for (int r = 0; r <= c->repeats; r++) {
        CK(rt->StreamSynchronize(s));
        double t0 = bu_now_s();
        for (int i = 0; i < c->iters; i++) {
            int k = i % c->slots;
            while (!rf__copier_slot_done(cp, k))
                ; /* the dispatcher polls (every 0.5 ms); here: spin */
            if (direct) {
                rc = rf__copier_copy_to(cp, k, host[k], c->bytes, labels, c->batch, dst[k],
                                        (uint8_t *)dst[k] + c->bytes, s, err, sizeof err);
            } else {
                void *d;
                int64_t *dl;
                rc = rf__copier_to_device(cp, k, host[k], c->bytes, labels, c->batch, s, &d, &dl,
                                          err, sizeof err);
                if (rc == 0 && !d) {
                    snprintf(why, whycap, "slot %d has no device buffer (device memory)", k);
                    return 0;
                }
                rf__copier_release(cp, k);
            }
            if (rc < 0) {
                snprintf(why, whycap, "%s", err);
                return 0;
            }
        }
        CK(rt->StreamSynchronize(s));
        double gbps =
            (double)(c->bytes + (size_t)c->batch * 8) * c->iters / (bu_now_s() - t0) / 1e9;
        if (r > 0 && gbps > best)
            best = gbps;
    }
    rf__copier_drain(cp);
    for (int i = 0; i < c->slots; i++) {
        rf__copier_slot_free(cp, i, host[i], pin[i]);
        if (dst[i])
            rt->Free(dst[i]);
    }
    rf__copier_destroy(cp);
    free(host);
    free(dst);
    free(pin);
    free(labels);
    rt->StreamDestroy(s);
    return best;
}

int main(int argc, char **argv)
{
    cfg c = {256, 224, 200, 4, 3, 0, 0};
    const char *json = NULL;
    const bu_opt opts[] = {
        {"--batch", 'i', &c.batch, 1, 1 << 16},
        {"--size", 'i', &c.size, 1, 1 << 14},
        {"--iters", 'i', &c.iters, 1, 1 << 24},
        {"--slots", 'i', &c.slots, 1, 1024},
        {"--repeats", 'i', &c.repeats, 1, 1000},
        {"--device", 'i', &c.device, 0, 1 << 16},
        {"--json", 's', &json, 0, 0},
    };
    if (bu_parse_args("rf-copy-bench", argc, argv, opts, sizeof opts / sizeof opts[0], NULL, 0)) {
        fprintf(stderr, "usage: rf-copy-bench [--batch N] [--size S] [--iters N] [--slots K] "
                        "[--repeats R] [--device D] [--json FILE]\n");
        return 2;
    }
    if (c.batch < 1 || c.size < 1 || c.iters < 1 || c.slots < 1 || c.repeats < 1)
        return 2;
    c.bytes = (size_t)c.batch * c.size * c.size * 3;
    /* One object, built in memory: printed, and written to FILE. */
    char *out = NULL, why[512] = "", rev[128];
    size_t outlen = 0;
    FILE *o = open_memstream(&out, &outlen);
    if (!o)
        return 1;
    bu_git_revision(rev, sizeof rev);
    bu_json_begin(o, "copy", rev);
    int n = rf_cuda_device_count();
    rt = rf__cudart(NULL, 0);
    __typeof__(cudaGetDeviceProperties) *props =
        rt ? (__typeof__(props))dlsym(rt->handle, RF_CUDART_SYM(cudaGetDeviceProperties)) : NULL;
    if (n <= c.device || !props) {
        char note[600];
        rf__cuda_devices(note, sizeof note);
        fprintf(o, ", \"skipped\": ");
        bu_json_str(o, n <= c.device ? note : "the runtime lacks cudaGetDeviceProperties");
        fputc('}', o);
    } else {
        CK(rt->SetDevice(c.device));
        struct cudaDeviceProp p;
        CK(props(&p, c.device));
        double pp = plain(&c, 1), pg = plain(&c, 0);
        double cp = copier(&c, 1, 0, why, sizeof why);
        double cg = copier(&c, 0, 0, why, sizeof why);
        double cd = copier(&c, 1, 1, why, sizeof why);
        fputs(", \"gpu\": ", o);
        bu_json_str(o, p.name);
        fputs(", \"runtime\": ", o);
        bu_json_str(o, rt->desc);
        fprintf(o,
                ", \"bytes_per_copy\": %zu, \"batch\": %d, \"image_size\": %d, "
                "\"iters\": %d, \"slots\": %d, \"repeats\": %d, "
                "\"plain_pinned_gbps\": %.3f, \"plain_pageable_gbps\": %.3f, "
                "\"copier_pinned_gbps\": %.3f, \"copier_pageable_gbps\": %.3f, "
                "\"copier_direct_pinned_gbps\": %.3f, "
                "\"copier_pinned_vs_plain\": %.4f, \"pinned_vs_pageable\": %.3f, \"note\": ",
                c.bytes, c.batch, c.size, c.iters, c.slots, c.repeats, pp, pg, cp, cg, cd,
                pp > 0 ? cp / pp : 0, cg > 0 ? cp / cg : 0);
        bu_json_str(o, why);
        fputc('}', o);
    }
    if (fclose(o) != 0)
        return 1;
    puts(out);
    if (json) {
        FILE *f = fopen(json, "w");
        if (!f || fprintf(f, "%s\n", out) < 0 || fclose(f) != 0) {
            perror(json);
            return 1;
        }
    }
    free(out);
    return 0;
}
