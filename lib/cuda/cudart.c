/*
 * cudart.c - the CUDA runtime (libcudart), loaded at run time (see cudart.h).
 *
 * The first rf__cudart() call looks for a runtime, first hit wins:
 *   1. one already loaded in the process: dlopen(RTLD_NOLOAD) of each soname
 *      below. Once torch is imported this is the copy its wheel ships, so that
 *      torch and the copier talk to one runtime;
 *   2. the file named by $RINGFEED_CUDART;
 *   3. the sonames: libcudart.so.<the build's major> first, then the other
 *      majors whose ABI for the table is the same, newest first (11's soname
 *      is libcudart.so.11.0);
 *   4. libcudart.so.
 * A runtime that fails to load or lacks a function of the table is closed
 * and the search goes on, and so is one whose driver is too old for it
 * (cudaGetDeviceCount says cudaErrorInsufficientDriver: an older major may
 * still run; that one is left loaded, as it has started); the note keeps
 * each attempt and why it failed. No runtime is not an error: the library
 * runs on the CPU.
 *
 * Contexts. Since CUDA 12, cudaSetDevice(d) creates device d's primary
 * context at once (~0.5 GiB of device memory): putting back a thread's
 * "previous device" with it would give every thread that never chose one a
 * context on device 0. So with a runtime of CUDA 12 or later the table also
 * holds the driver's context calls (RF_CUDART_DRIVER_FUNCS), through
 * cudaGetDriverEntryPointByVersion (12.5+) or cudaGetDriverEntryPoint, and
 * the copier saves and restores a thread's current context (which may be
 * none) instead. Without them (an older runtime) it uses cudaSetDevice, which
 * made no context before CUDA 12.
 *
 * ABI. The table's types are the header's declarations (__typeof__) and the
 * symbols the names the header binds them to (RF_CUDART_SYM). The table's
 * functions, and the constants the copier passes them (cudaSuccess,
 * cudaErrorNotReady = 600, cudaStreamNonBlocking, cudaEventDisableTiming,
 * cudaHostAllocPortable, cudaMemcpyHostToDevice / DeviceToDevice), have the
 * same names, signatures and values in CUDA 11, 12 and 13: a build against
 * any of these can call a runtime of any other. The major is checked with
 * cudaRuntimeGetVersion after the load (a file named by RINGFEED_CUDART or
 * libcudart.so may be anything); a build against another major accepts only
 * its own.
 *
 * Lock rules: the search runs once, under pthread_once; the table and the
 * note are written only there and read-only afterwards (pthread_once orders
 * those writes before every return from it).
 */
#define _GNU_SOURCE
#include "cudart.h"

#include <stdio.h>

#ifdef RF_HAVE_CUDA
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define BUILD_MAJOR (CUDART_VERSION / 1000)
/* Majors whose ABI for the table was checked against the headers. */
static const int abi_majors[] = {13, 12, 11};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static rf_cudart rt; /* valid when loaded */
static int loaded;   /* written under `once` */
static struct {
    char name[560]; /* soname, or RINGFEED_CUDART=<path> */
    char why[160];  /* "not found", dlerror()'s text, ... */
} attempts[8];      /* what was tried, in order */
static int nattempts;
static char tried[1024];  /* the attempts, when nothing was loaded */
static char passed[400];  /* runtimes passed over for their driver, for the desc */

static int abi_ok(int major)
{
    if (major == BUILD_MAJOR)
        return 1;
    int build_ok = 0, ok = 0;
    for (size_t i = 0; i < sizeof abi_majors / sizeof *abi_majors; i++) {
        build_ok |= abi_majors[i] == BUILD_MAJOR;
        ok |= abi_majors[i] == major;
    }
    return build_ok && ok;
}

static void soname(int major, char *out, size_t cap)
{
    if (major <= 11)
        snprintf(out, cap, "libcudart.so.%d.0", major);
    else
        snprintf(out, cap, "libcudart.so.%d", major);
}

/* Sonames in search order: the build's major, then the others. */
static int sonames(char names[][32], int cap)
{
    int n = 0;
    soname(BUILD_MAJOR, names[n++], sizeof names[0]);
    for (size_t i = 0; i < sizeof abi_majors / sizeof *abi_majors && n < cap; i++)
        if (abi_majors[i] != BUILD_MAJOR && abi_ok(abi_majors[i]))
            soname(abi_majors[i], names[n++], sizeof names[0]);
    return n;
}

static void attempt(const char *name, const char *why)
{
    if (nattempts < (int)(sizeof attempts / sizeof *attempts)) {
        snprintf(attempts[nattempts].name, sizeof attempts[0].name, "%s", name);
        snprintf(attempts[nattempts].why, sizeof attempts[0].why, "%s", why);
        nattempts++;
    }
}

/* The attempts as "a (why), b, c (why2)": a run of attempts that failed for
 * the same reason gives it once (the notes that carry this are short). */
static void format_attempts(void)
{
    size_t len = 0;
    for (int i = 0; i < nattempts && len < sizeof tried; i++) {
        int last = i + 1 == nattempts || strcmp(attempts[i].why, attempts[i + 1].why) != 0;
        int n = last ? snprintf(tried + len, sizeof tried - len, "%s (%s)%s", attempts[i].name,
                                attempts[i].why, i + 1 < nattempts ? ", " : "")
                     : snprintf(tried + len, sizeof tried - len, "%s, ", attempts[i].name);
        len += n > 0 ? (size_t)n : 0;
    }
}

/* dlerror() text without the file name in front; "not found" for ENOENT. */
static const char *dl_why(const char *name)
{
    const char *e = dlerror();
    if (!e)
        return "unknown dlopen error";
    if (strstr(e, "No such file or directory"))
        return "not found";
    size_t n = strlen(name);
    if (strncmp(e, name, n) == 0 && strncmp(e + n, ": ", 2) == 0)
        e += n + 2;
    return e;
}

/* Resolves the table from handle h (name: how it was found, for the note);
 * 1 when done, 0 (attempt recorded, h closed) when it cannot serve. */
/* The driver's context calls, from the runtime's entry points (12+): 1 when
 * all were found. */
static int driver_calls(void *h, rf_cudart *t)
{
#if CUDART_VERSION >= 12000
    if (t->version < 12000)
        return 0;
    __typeof__(cudaGetDriverEntryPointByVersion) *by_version =
        (__typeof__(by_version))dlsym(h, RF_CUDART_SYM(cudaGetDriverEntryPointByVersion));
    /* 12.0 to 12.4 have only this one, deprecated since (its type is
     * spelled out: the header's declaration carries the deprecation). */
    cudaError_t (*plain)(const char *, void **, unsigned long long,
                         enum cudaDriverEntryPointQueryResult *) = NULL;
    if (!by_version)
        plain = (__typeof__(plain))dlsym(h, RF_CUDART_SYM(cudaGetDriverEntryPoint));
    if (!by_version && !plain)
        return 0;
    int ok = 1;
    /* The functions as of CUDA 12.0, whose ABI later drivers keep. */
#define RF_CUDART_ENTRY(field, fn)                                                                 \
    {                                                                                              \
        void *p = NULL;                                                                            \
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;               \
        cudaError_t e = by_version ? by_version(#fn, &p, 12000, cudaEnableDefault, &q)             \
                                   : plain(#fn, &p, cudaEnableDefault, &q);                        \
        t->field = e == cudaSuccess && q == cudaDriverEntryPointSuccess                            \
                       ? (__typeof__(t->field))p                                                   \
                       : NULL;                                                                     \
        ok &= t->field != NULL;                                                                    \
    }
    RF_CUDART_DRIVER_FUNCS(RF_CUDART_ENTRY)
#undef RF_CUDART_ENTRY
    if (!ok) {
#define RF_CUDART_CLEAR(field, fn) t->field = NULL;
        RF_CUDART_DRIVER_FUNCS(RF_CUDART_CLEAR)
#undef RF_CUDART_CLEAR
        (void)t->GetLastError();
    }
    return ok;
#else
    (void)h;
    (void)t;
    return 0;
#endif
}

static int adopt(void *h, const char *name)
{
    rf_cudart t;
    memset(&t, 0, sizeof t);
    const char *missing = NULL;
#define RF_CUDART_RESOLVE(field, fn)                                                               \
    t.field = (__typeof__(t.field))dlsym(h, RF_CUDART_SYM(fn));                                    \
    if (!t.field && !missing)                                                                      \
        missing = RF_CUDART_SYM(fn);
    RF_CUDART_FUNCS(RF_CUDART_RESOLVE)
#undef RF_CUDART_RESOLVE
    char why[160];
    if (missing) {
        snprintf(why, sizeof why, "no %s", missing);
        attempt(name, why);
        dlclose(h);
        return 0;
    }
    int v = 0;
    if (t.RuntimeGetVersion(&v) != cudaSuccess || v <= 0) {
        attempt(name, "cudaRuntimeGetVersion failed");
        dlclose(h);
        return 0;
    }
    if (!abi_ok(v / 1000)) {
        snprintf(why, sizeof why, "cudart %d.%d, this build takes CUDA %d", v / 1000, v % 1000 / 10,
                 BUILD_MAJOR);
        attempt(name, why);
        dlclose(h);
        return 0;
    }
    int ndev = 0;
    cudaError_t de = t.GetDeviceCount(&ndev);
    if (de == cudaErrorInsufficientDriver) {
        /* Its driver is too old for it: another major may run. Not closed:
         * it has started (cudaGetDeviceCount initialises the driver). */
        snprintf(why, sizeof why, "cudart %d.%d: the driver is older than it (%s)", v / 1000,
                 v % 1000 / 10, t.GetErrorName(de));
        (void)t.GetLastError();
        attempt(name, why);
        size_t n = strlen(passed);
        snprintf(passed + n, sizeof passed - n, "%s%s (%s)", n ? ", " : "", name, why);
        return 0;
    }
    (void)t.GetLastError();
    t.version = v;
    t.contexts = driver_calls(h, &t) ? "driver" : "runtime";
    struct link_map *lm = NULL;
    const char *path = name;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
        path = lm->l_name;
    char *abs = realpath(path, NULL); /* a relative LD_LIBRARY_PATH gives a relative l_name */
    t.handle = h;
    snprintf(t.path, sizeof t.path, "%s", abs ? abs : path);
    free(abs);
    snprintf(t.desc, sizeof t.desc, "cudart %d.%d from %s%s%s", v / 1000, v % 1000 / 10, t.path,
             passed[0] ? "; passed over: " : "", passed);
    rt = t;
    loaded = 1;
    return 1;
}

static int try_open(const char *name, const char *label)
{
    dlerror();
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        attempt(label, dl_why(name));
        return 0;
    }
    return adopt(h, label);
}

static void load(void)
{
    char names[4][32];
    int n = sonames(names, 4);
    /* 1. already in the process (not an attempt worth listing when absent). */
    for (int i = 0; i < n; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        char label[160];
        snprintf(label, sizeof label, "%s in the process", names[i]);
        if (h && adopt(h, label))
            return;
    }
    /* 2. $RINGFEED_CUDART (ignored in setuid programs, like LD_LIBRARY_PATH). */
    const char *env = secure_getenv("RINGFEED_CUDART");
    if (env && env[0]) {
        char label[600];
        snprintf(label, sizeof label, "RINGFEED_CUDART=%s", env);
        if (try_open(env, label))
            return;
    }
    /* 3, 4. the sonames, then the unversioned name. */
    for (int i = 0; i < n; i++)
        if (try_open(names[i], names[i]))
            return;
    if (!try_open("libcudart.so", "libcudart.so"))
        format_attempts();
}

const rf_cudart *rf__cudart(char *note, size_t notecap)
{
    pthread_once(&once, load);
    if (loaded)
        return &rt;
    if (note && notecap)
        snprintf(note, notecap, "no CUDA runtime: tried %s", tried);
    return NULL;
}
#else
const rf_cudart *rf__cudart(char *note, size_t notecap)
{
    if (note && notecap)
        snprintf(note, notecap, "no CUDA: built without the CUDA toolkit");
    return NULL;
}
#endif
