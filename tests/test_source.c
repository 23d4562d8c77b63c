/*
 * test_source.c - the sample index (lib/source/source.c): image folders with
 * torchvision ImageFolder semantics, and list files.
 *
 * ImageFolder, written out: classes = sorted(d.name for d in
 * os.scandir(root) if d.is_dir()), label = position in that list; within a
 * class, for root, _, files in sorted(os.walk(class_dir, followlinks=True)):
 * for f in sorted(files): a sample when f.lower() ends in one of
 * IMG_EXTENSIONS (.jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp).
 * The expected orders below are what that Python gives for the same trees.
 *
 * Trees are made of empty files (and FIFOs, which would block anyone who
 * opened them: indexing must not) in a temporary folder under
 * $RINGFEED_TEST_TMP, $TMPDIR or /tmp, removed afterwards.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ringfeed.h"
#include "source.h"
#include "testcheck.h"
#include "testutil.h"

/* ----------------------------------------------------------------- helpers */

/* Makes root/rel: a folder when rel ends in '/' (put(root, "") makes root
 * itself), else an empty file; missing parents are created. */
static void put(const char *root, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    size_t n = strlen(path);
    for (size_t i = 1; i < n; i++) {
        if (path[i] != '/')
            continue;
        path[i] = '\0';
        if (mkdir(path, 0755) != 0)
            assert_true(access(path, F_OK) == 0);
        path[i] = '/';
    }
    if (path[n - 1] == '/')
        return;
    assert_int_equal(tu_write_file(path, "", 0), 0);
}

static void link_at(const char *target, const char *root, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    assert_int_equal(symlink(target, path), 0);
}

static void fifo_at(const char *root, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    assert_int_equal(mkfifo(path, 0644), 0);
}

static void write_text(const char *path, const char *text)
{
    assert_int_equal(tu_write_file(path, text, strlen(text)), 0);
}

/* Checks the index against (root-relative path, label) pairs. */
typedef struct {
    const char *rel;
    int64_t label;
} want_t;

static void expect_index(const rf_source *s, const char *root, const want_t *w, int64_t n)
{
    for (int64_t i = 0; i < s->n && i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", root, w[i].rel);
        if (strcmp(rf__source_path(s, i), path) != 0 || s->labels[i] != w[i].label)
            fail_msg("sample %lld: got (%s, %lld), want (%s, %lld)", (long long)i,
                     rf__source_path(s, i), (long long)s->labels[i], path,
                     (long long)w[i].label);
    }
    assert_int_equal(s->n, n);
}

static const char *class_name(const rf_source *s, int64_t c)
{
    return s->arena + s->class_off[c];
}

/* ----------------------------------------------------- image folder tests */

static void test_folder_classes_and_files_sorted(void **state)
{
    (void)state;
    char *root = tu_tmp_path("basic");
    /* Made out of order on purpose: readdir order must not leak through. */
    put(root, "dog/b.jpg");
    put(root, "cat/z.jpg");
    put(root, "dog/a.jpg");
    put(root, "cat/a10.jpg");
    put(root, "cat/a2.jpg");
    put(root, "Zebra/x.jpg"); /* uppercase sorts first (byte order, as Python) */
    put(root, "ant/m.jpg");
    put(root, "ant/M.jpg");
    rf_source s;
    tu_source_open_ok(&s, root, NULL);
    assert_int_equal(s.kind, RF_SOURCE_FOLDER);
    assert_int_equal(s.nclasses, 4);
    assert_string_equal(class_name(&s, 0), "Zebra");
    assert_string_equal(class_name(&s, 1), "ant");
    assert_string_equal(class_name(&s, 2), "cat");
    assert_string_equal(class_name(&s, 3), "dog");
    static const want_t w[] = {
        {"Zebra/x.jpg", 0}, {"ant/M.jpg", 1}, {"ant/m.jpg", 1},   {"cat/a10.jpg", 2},
        {"cat/a2.jpg", 2},  {"cat/z.jpg", 2}, {"dog/a.jpg", 3},   {"dog/b.jpg", 3},
    };
    expect_index(&s, root, w, 8);
    rf__source_close(&s);
    assert_int_equal(s.n, 0);
    rf__source_close(&s); /* twice is harmless */
    rf__source_close(NULL);

    /* A trailing slash on the root does not double the separator. */
    char *slashed = NULL;
    assert_true(asprintf(&slashed, "%s//", root) > 0);
    tu_source_open_ok(&s, slashed, NULL);
    expect_index(&s, root, w, 8);
    rf__source_close(&s);
    free(slashed);
    free(root);
}

static void test_folder_nested_walk_order(void **state)
{
    (void)state;
    char *root = tu_tmp_path("nested");
    put(root, "c0/z.jpg");
    put(root, "c0/b.jpg");
    put(root, "c0/a/x.jpg");
    put(root, "c0/a/deeper/v.jpg");
    put(root, "c0/a b/y.jpg");
    put(root, "c0/a-b/w.jpg");
    put(root, "c0/a/deeper/empty/");
    put(root, "c0/a/deeper/only.png");
    put(root, "c1/q/r/s/t.jpg");
    rf_source s;
    tu_source_open_ok(&s, root, NULL);
    /* sorted(os.walk()) sorts by the walked path: "c0/a b" and "c0/a-b"
     * (' ' and '-' sort before '/') come before "c0/a/deeper". */
    static const want_t w[] = {
        {"c0/b.jpg", 0},     {"c0/z.jpg", 0},           {"c0/a/x.jpg", 0},
        {"c0/a b/y.jpg", 0}, {"c0/a-b/w.jpg", 0},       {"c0/a/deeper/only.png", 0},
        {"c0/a/deeper/v.jpg", 0}, {"c1/q/r/s/t.jpg", 1},
    };
    expect_index(&s, root, w, 8);
    assert_int_equal(s.nclasses, 2);
    rf__source_close(&s);
    free(root);
}

static void test_folder_extensions(void **state)
{
    (void)state;
    char *root = tu_tmp_path("ext");
    static const char *names[] = {
        "c/a.jpg",   "c/b.jpeg",    "c/c.JPEG",  "c/d.Jpg",    "c/e.JPG",     "c/f.jPeG",
        "c/g.png",   "c/h.txt",     "c/i",       "c/j.jpg.bak", "c/k.jpgx",   "c/jpg",
        "c/l.gif",   "c/.hidden.jpg", "c/.hidden.png", "c/.jpg", "c/m.tar.jpeg", "c/n.JPEG.txt",
        "c/o.PPM",   "c/p.bmp",     "c/q.Pgm",   "c/r.tif",    "c/s.TIFF",    "c/t.webp",
        "c/u.WebP",  "c/v.pbm",     "c/w.pnm",   "c/x.jfif",   "c/y.tiff.gz", "c/z.png ",
        "c/za.ppm.", "c/zb.heic",   "c/zc.avif", "c/zd.PNG",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        put(root, names[i]);
    rf_source s;
    tu_source_open_ok(&s, root, NULL);
    /* f.lower().endswith(IMG_EXTENSIONS), hidden files included: what
     * torchvision 0.14's has_file_allowed_extension keeps of these names. */
    static const want_t w[] = {
        {"c/.hidden.jpg", 0}, {"c/.hidden.png", 0}, {"c/.jpg", 0},   {"c/a.jpg", 0},
        {"c/b.jpeg", 0},      {"c/c.JPEG", 0},      {"c/d.Jpg", 0},  {"c/e.JPG", 0},
        {"c/f.jPeG", 0},      {"c/g.png", 0},       {"c/m.tar.jpeg", 0}, {"c/o.PPM", 0},
        {"c/p.bmp", 0},       {"c/q.Pgm", 0},       {"c/r.tif", 0},  {"c/s.TIFF", 0},
        {"c/t.webp", 0},      {"c/u.WebP", 0},      {"c/zd.PNG", 0},
    };
    expect_index(&s, root, w, 19);
    rf__source_close(&s);
    free(root);
}

static void test_folder_directory_named_like_image(void **state)
{
    (void)state;
    char *root = tu_tmp_path("dirjpg");
    put(root, "c/real.jpg");
    put(root, "c/folder.jpg/"); /* not a sample, but walked into */
    put(root, "c/folder.jpg/inner.jpg");
    put(root, "c/empty.jpeg/");
    rf_source s;
    tu_source_open_ok(&s, root, NULL);
    static const want_t w[] = {{"c/real.jpg", 0}, {"c/folder.jpg/inner.jpg", 0}};
    expect_index(&s, root, w, 2);
    rf__source_close(&s);
    free(root);
}

static void test_folder_symlinks(void **state)
{
    (void)state;
    char *root = tu_tmp_path("links");
    char *elsewhere = tu_tmp_path("links-target");
    put(elsewhere, "real/one.jpg");
    put(elsewhere, "real/two.jpg");
    put(elsewhere, "sub/deep.jpg");
    put(elsewhere, "pic.jpg");
    put(root, "a/own.jpg");
    char target[4096];
    snprintf(target, sizeof target, "%s/real", elsewhere);
    link_at(target, root, "b"); /* a symlinked class folder is a class */
    snprintf(target, sizeof target, "%s/sub", elsewhere);
    link_at(target, root, "a/linked"); /* symlinked subfolder: walked */
    snprintf(target, sizeof target, "%s/pic.jpg", elsewhere);
    link_at(target, root, "a/link.jpg"); /* symlink to a file: a sample */
    link_at(elsewhere, root, "a/dirlink.jpg"); /* symlink to a folder: not a sample */
    link_at("does-not-exist", root, "a/broken.jpg"); /* listed, as os.walk lists it */
    link_at("a/own.jpg", root, "notaclass"); /* a file link at the root: not a class */
    rf_source s;
    tu_source_open_ok(&s, root, NULL);
    assert_int_equal(s.nclasses, 2);
    assert_string_equal(class_name(&s, 0), "a");
    assert_string_equal(class_name(&s, 1), "b");
    /* "a/dirlink.jpg" is a folder too (followed), holding pic.jpg and more. */
    static const want_t w[] = {
        {"a/broken.jpg", 0},
        {"a/link.jpg", 0},
        {"a/own.jpg", 0},
        {"a/dirlink.jpg/pic.jpg", 0},
        {"a/dirlink.jpg/real/one.jpg", 0},
        {"a/dirlink.jpg/real/two.jpg", 0},
        {"a/dirlink.jpg/sub/deep.jpg", 0},
        {"a/linked/deep.jpg", 0},
        {"b/one.jpg", 1},
        {"b/two.jpg", 1},
    };
    expect_index(&s, root, w, 10);
    rf__source_close(&s);
    free(root);
    free(elsewhere);
}

static void test_folder_never_opens_samples(void **state)
{
    (void)state;
    /* FIFOs block whoever opens them for reading until a writer comes: an
     * indexer that opened sample files would hang here (alarm in main). */
    char *root = tu_tmp_path("fifo");
    put(root, "c/");
    fifo_at(root, "c/a.jpg");
    fifo_at(root, "c/b.jpeg");
    fifo_at(root, "c/c.png");
    rf_source s;
    tu_source_open_ok(&s, root, NULL);
    static const want_t w[] = {{"c/a.jpg", 0}, {"c/b.jpeg", 0}, {"c/c.png", 0}};
    expect_index(&s, root, w, 3);
    rf__source_close(&s);

    /* Unreadable sample files index fine (meaningful when not root). */
    char *root2 = tu_tmp_path("noperm");
    put(root2, "c/x.jpg");
    char path[4096];
    snprintf(path, sizeof path, "%s/c/x.jpg", root2);
    assert_int_equal(chmod(path, 0), 0);
    tu_source_open_ok(&s, root2, NULL);
    assert_int_equal(s.n, 1);
    rf__source_close(&s);
    free(root);
    free(root2);
}

static void test_folder_empty_class(void **state)
{
    (void)state;
    char *root = tu_tmp_path("emptyclass");
    put(root, "full/a.jpg");
    put(root, "hollow_class/readme.txt");
    put(root, "hollow_class/pic.gif"); /* not in IMG_EXTENSIONS */
    put(root, "hollow_class/sub/");
    put(root, "zfull/b.jpg");
    tu_source_open_fails(root, NULL, "hollow_class", NULL);
    free(root);

    char *root2 = tu_tmp_path("emptyclass2");
    put(root2, "only_empty/");
    tu_source_open_fails(root2, NULL, "only_empty", NULL);
    free(root2);
}

static void test_folder_missing_or_classless_root(void **state)
{
    (void)state;
    char *missing = tu_tmp_path("no/such/root");
    tu_source_open_fails(missing, NULL, missing, NULL);
    free(missing);

    /* Root holding only files: no class folders. */
    char *flat = tu_tmp_path("flat");
    put(flat, "a.jpg");
    put(flat, "b.jpg");
    tu_source_open_fails(flat, NULL, flat, NULL);
    free(flat);

    /* Empty root. */
    char *empty = tu_tmp_path("emptyroot");
    put(empty, "");
    tu_source_open_fails(empty, NULL, empty, NULL);
    free(empty);

    /* Neither a folder nor a regular file. */
    tu_source_open_fails("/dev/null", NULL, "/dev/null", NULL);
}

/* Two loaders may be started on two threads at once, so indexing must not
 * share state between calls (a sort comparator's context in a global, say). */
enum { CC_CLASSES = 12, CC_FILES = 40, CC_ROUNDS = 40, CC_THREADS = 4 };

typedef struct {
    char root[4096];
    int id;
    int bad; /* rounds that came out wrong */
    int rounds;
} cc_job;

/* File f of job t: f + 1 + 3t copies of the letter 'a' + t, so names sort
 * in f order and every job's names (and their offsets) differ. */
static void cc_name(char *buf, int t, int f)
{
    int n = f + 1 + 3 * t;
    memset(buf, 'a' + t, (size_t)n);
    strcpy(buf + n, ".jpg");
}

static void *cc_main(void *arg)
{
    cc_job *j = arg;
    for (int r = 0; r < CC_ROUNDS; r++) {
        rf_source s;
        char err[512];
        int ok = rf__source_open(&s, j->root, err, sizeof err) == 0 &&
                 s.n == CC_CLASSES * CC_FILES && s.nclasses == CC_CLASSES;
        for (int64_t i = 0; ok && i < s.n; i++) {
            char want[4400], name[128];
            cc_name(name, j->id, (int)(i % CC_FILES));
            snprintf(want, sizeof want, "%s/k%03d/%s", j->root, (int)(i / CC_FILES), name);
            ok = strcmp(rf__source_path(&s, i), want) == 0 && s.labels[i] == i / CC_FILES;
        }
        rf__source_close(&s);
        j->bad += !ok;
        j->rounds++;
    }
    return NULL;
}

static void test_folder_concurrent_indexing(void **state)
{
    (void)state;
    cc_job jobs[CC_THREADS];
    pthread_t th[CC_THREADS];
    for (int t = 0; t < CC_THREADS; t++) {
        char *root = tu_tmp_path("concurrent%d", t);
        snprintf(jobs[t].root, sizeof jobs[t].root, "%s", root);
        free(root);
        jobs[t].id = t;
        jobs[t].bad = jobs[t].rounds = 0;
        for (int c = CC_CLASSES - 1; c >= 0; c--)
            for (int f = CC_FILES - 1; f >= 0; f--) {
                char rel[160], name[128];
                cc_name(name, t, f);
                snprintf(rel, sizeof rel, "k%03d/%s", c, name);
                put(jobs[t].root, rel);
            }
    }
    /* One job alone comes out right: the expectation itself is sound. */
    cc_main(&jobs[0]);
    assert_int_equal(jobs[0].bad, 0);
    jobs[0].bad = jobs[0].rounds = 0;
    for (int t = 0; t < CC_THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, cc_main, &jobs[t]), 0);
    int bad = 0;
    for (int t = 0; t < CC_THREADS; t++) {
        pthread_join(th[t], NULL);
        assert_int_equal(jobs[t].rounds, CC_ROUNDS);
        bad += jobs[t].bad;
    }
    if (bad)
        fail_msg("%d of %d concurrent indexings came out in the wrong order", bad,
                 CC_THREADS * CC_ROUNDS);
}

static void test_add_keeps_paths_as_arena_grows(void **state)
{
    (void)state;
    /* Many appends: offsets stay valid as the arena and arrays grow. */
    rf_source s;
    memset(&s, 0, sizeof s);
    char path[64];
    for (int i = 0; i < 5000; i++) {
        int len = snprintf(path, sizeof path, "dir/%d.jpg", i * 7);
        assert_int_equal(rf__source_add(&s, path, (size_t)len, i % 13), 0);
    }
    /* path_len is honoured: only the first 3 bytes are taken. */
    assert_int_equal(rf__source_add(&s, "abcdef", 3, 99), 0);
    assert_int_equal(s.n, 5001);
    for (int i = 0; i < 5000; i++) {
        snprintf(path, sizeof path, "dir/%d.jpg", i * 7);
        assert_string_equal(rf__source_path(&s, i), path);
        assert_int_equal(s.labels[i], i % 13);
    }
    assert_string_equal(rf__source_path(&s, 5000), "abc");
    rf__source_close(&s);
}

/* --------------------------------------------------------- list file tests */

static void test_list_paths_labels_and_comments(void **state)
{
    (void)state;
    char *dir = tu_tmp_path("list");
    put(dir, "sub/");
    char list[4096];
    snprintf(list, sizeof list, "%s/sub/train.txt", dir);
    write_text(list, "# a comment\n"
                     "a/x.jpg\t0\n"
                     "\n"
                     "/abs/path/y.jpg\t2\n"
                     "b c.jpg\t1\r\n"
                     "#another\t5\n"
                     "\r\n"
                     "../up.jpg\t3\n"
                     "last.jpg\t1"); /* no final newline */
    rf_source s;
    tu_source_open_ok(&s, list, NULL);
    assert_int_equal(s.kind, RF_SOURCE_LIST);
    assert_int_equal(s.n, 5);
    assert_int_equal(s.nclasses, 4); /* max label + 1; '#' lines do not count */
    char want[4096];
    snprintf(want, sizeof want, "%s/sub/a/x.jpg", dir);
    assert_string_equal(rf__source_path(&s, 0), want);
    assert_string_equal(rf__source_path(&s, 1), "/abs/path/y.jpg");
    snprintf(want, sizeof want, "%s/sub/b c.jpg", dir);
    assert_string_equal(rf__source_path(&s, 2), want);
    snprintf(want, sizeof want, "%s/sub/../up.jpg", dir);
    assert_string_equal(rf__source_path(&s, 3), want);
    snprintf(want, sizeof want, "%s/sub/last.jpg", dir);
    assert_string_equal(rf__source_path(&s, 4), want);
    static const int64_t labels[] = {0, 2, 1, 3, 1};
    for (int i = 0; i < 5; i++)
        assert_int_equal(s.labels[i], labels[i]);
    rf__source_close(&s);

    /* The list file's folder, not the working directory, anchors relative
     * paths; a bare file name in the working directory anchors to ".". */
    char *cwd = getcwd(NULL, 0);
    assert_non_null(cwd);
    char sd[4096];
    snprintf(sd, sizeof sd, "%s/sub", dir);
    assert_int_equal(chdir(sd), 0);
    tu_source_open_ok(&s, "train.txt", NULL);
    assert_string_equal(rf__source_path(&s, 0), "a/x.jpg");
    assert_string_equal(rf__source_path(&s, 1), "/abs/path/y.jpg");
    rf__source_close(&s);
    assert_int_equal(chdir(dir), 0);
    tu_source_open_ok(&s, "sub/train.txt", NULL);
    assert_string_equal(rf__source_path(&s, 0), "sub/a/x.jpg");
    rf__source_close(&s);
    assert_int_equal(chdir(cwd), 0);
    free(cwd);

    /* Labels need not be dense: nclasses is still max + 1. */
    snprintf(list, sizeof list, "%s/sparse.txt", dir);
    write_text(list, "p.jpg\t7\nq.jpg\t0\n");
    tu_source_open_ok(&s, list, NULL);
    assert_int_equal(s.nclasses, 8);
    rf__source_close(&s);

    /* None of the listed files exists: nothing is opened until read time. */
    free(dir);
}

static void test_list_malformed_line_named(void **state)
{
    (void)state;
    char *dir = tu_tmp_path("badlist");
    put(dir, "");
    static const struct {
        const char *text;
        const char *line;
    } cases[] = {
        {"a.jpg\t0\nno-tab-here 3\n", ":2:"},
        {"a.jpg\t0\n\n# c\nb.jpg\t-1\n", ":4:"},
        {"b.jpg\tcat\n", ":1:"},
        {"a.jpg\t1\nb.jpg\t\n", ":2:"},
        {"a.jpg\t1\n\t3\n", ":2:"},
        {"a.jpg\t1\nb.jpg\t3x\n", ":2:"},
        {"a.jpg\t1\nb.jpg\t3 \n", ":2:"},
        {"a.jpg\t1\nb.jpg\t1.5\n", ":2:"},
        {"a.jpg 1\n", ":1:"},
        /* Beyond int64: strtoll saturates (ERANGE); not a label. */
        {"a.jpg\t1\nb.jpg\t99999999999999999999\n", ":2:"},
    };
    char list[4096];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(list, sizeof list, "%s/bad%zu.txt", dir, i);
        write_text(list, cases[i].text);
        tu_source_open_fails(list, NULL, list, cases[i].line, NULL);
    }
    /* The largest int64 label: either refused, or nclasses = max + 1 must
     * not overflow into a negative count. */
    snprintf(list, sizeof list, "%s/maxlabel.txt", dir);
    write_text(list, "a.jpg\t9223372036854775807\n");
    rf_source s;
    char err[512] = "";
    int rc = rf__source_open(&s, list, err, sizeof err);
    if (rc == 0) {
        int64_t nclasses = s.nclasses;
        rf__source_close(&s);
        if (nclasses <= 0)
            fail_msg("label INT64_MAX accepted with nclasses = %lld", (long long)nclasses);
    } else {
        assert_int_equal(rc, RF_E_SOURCE);
        assert_non_null(strstr(err, ":1:"));
    }

    /* No samples at all. */
    snprintf(list, sizeof list, "%s/empty.txt", dir);
    write_text(list, "");
    tu_source_open_fails(list, NULL, list, NULL);
    snprintf(list, sizeof list, "%s/comments.txt", dir);
    write_text(list, "# nothing\n\n#\n");
    tu_source_open_fails(list, NULL, list, NULL);
    free(dir);
}

static void test_list_of_200k_lines(void **state)
{
    (void)state;
    enum { LINES = 200000 };
    char *dir = tu_tmp_path("scale");
    put(dir, "");
    char list[4096];
    snprintf(list, sizeof list, "%s/big.txt", dir);
    FILE *f = fopen(list, "w");
    assert_non_null(f);
    for (int i = 0; i < LINES; i++)
        fprintf(f, "train/n%08d/n%08d_%06d.JPEG\t%d\n", i % 1000, i % 1000, i, i % 1000);
    assert_int_equal(fclose(f), 0);

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rf_source s;
    tu_source_open_ok(&s, list, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("  list of %d lines indexed in %.3f s (arena %zu bytes)\n", LINES, secs,
           s.arena_len);
    assert_int_equal(s.n, LINES);
    assert_int_equal(s.nclasses, 1000);
    char want[4096];
    snprintf(want, sizeof want, "%s/train/n%08d/n%08d_%06d.JPEG", dir, 123, 123, 199123);
    assert_string_equal(rf__source_path(&s, 199123), want);
    assert_int_equal(s.labels[199123], 123);
    rf__source_close(&s);
    /* The time is printed, not asserted: rf-index-bench measures indexing. */
    free(dir);
}

/* ------------------------------------------------------------------- main */

int main(void)
{
    alarm(120); /* a hang (e.g. a FIFO opened while indexing) fails the run */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_folder_classes_and_files_sorted),
        cmocka_unit_test(test_folder_nested_walk_order),
        cmocka_unit_test(test_folder_extensions),
        cmocka_unit_test(test_folder_directory_named_like_image),
        cmocka_unit_test(test_folder_symlinks),
        cmocka_unit_test(test_folder_never_opens_samples),
        cmocka_unit_test(test_folder_empty_class),
        cmocka_unit_test(test_folder_missing_or_classless_root),
        cmocka_unit_test(test_folder_concurrent_indexing),
        cmocka_unit_test(test_add_keeps_paths_as_arena_grows),
        cmocka_unit_test(test_list_paths_labels_and_comments),
        cmocka_unit_test(test_list_malformed_line_named),
        cmocka_unit_test(test_list_of_200k_lines),
    };
    return cmocka_run_group_tests(tests, tu_tmp_setup, tu_tmp_teardown);
}
