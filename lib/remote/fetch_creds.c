/*
 * fetch_creds.c - S3 credentials (see fetch.h): from the environment, else
 * from the shared credentials file, read at create and again when S3 says
 * the ones a request was signed with expired (fetch.c).
 *
 * The file is the AWS CLI's INI: "[profile]" sections of "key = value"
 * lines; '#' and ';' start comment lines; indented lines (a nested
 * section's) are passed over. It is read whole, at most CREDS_FILE_MAX
 * bytes, only when it is a regular file (a FIFO would block the fetch
 * thread), and wiped before it is freed, as every copy of a secret here
 * is (explicit_bzero, which the compiler may not drop).
 *
 * Strings have no length limit but the environment's and the file's: a
 * session token of any length works.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fetch.h"
#include "ringfeed.h"

#define CREDS_FILE_MAX ((size_t)1 << 20)
#define UNSET "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY not both set"

static void wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

void rf__fetch_creds_free(rf_fetch_creds *c)
{
    wipe_free(c->key_id);
    wipe_free(c->secret);
    wipe_free(c->token);
    c->key_id = c->secret = c->token = NULL;
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

int rf__fetch_creds_same(const rf_fetch_creds *a, const rf_fetch_creds *b)
{
    return same_str(a->key_id, b->key_id) && same_str(a->secret, b->secret) &&
           same_str(a->token, b->token);
}

void rf__fetch_creds_key_shown(const rf_fetch_creds *c, char *out, size_t cap)
{
    size_t n = c->key_id ? strlen(c->key_id) : 0;
    snprintf(out, cap, "****%s", n >= 8 ? c->key_id + n - 4 : "");
}

int rf__fetch_creds_error(const char *code)
{
    static const char *const codes[] = {"ExpiredToken",          "ExpiredTokenException",
                                        "InvalidToken",          "TokenRefreshRequired",
                                        "InvalidAccessKeyId",    "InvalidClientTokenId",
                                        "SignatureDoesNotMatch", "InvalidSecurity"};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (!strcmp(code, codes[i]))
            return 1;
    return 0;
}

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* A copy of [a, a + n), or NULL (out of memory: *oom). */
static char *dup_n(const char *a, size_t n, int *oom)
{
    char *s = strndup(a, n);
    if (!s)
        *oom = 1;
    return s;
}

/* The file at path, whole and NUL-terminated (*len bytes), or NULL with
 * why (errno's text, or what is wrong with it). */
static char *read_file(const char *path, size_t *len, char *why, size_t whycap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, whycap, "%s", strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || (size_t)st.st_size > CREDS_FILE_MAX) {
        snprintf(why, whycap, "%s",
                 S_ISREG(st.st_mode) ? "larger than 1 MiB" : "not a regular file");
        close(fd);
        return NULL;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    while (buf && n < (size_t)st.st_size) {
        ssize_t r = read(fd, buf + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    if (!buf) {
        snprintf(why, whycap, "out of memory");
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Fills c's strings from profile's section of the file text (NUL-ended).
 * 1 when the section was there. */
static int parse_profile(const char *text, const char *profile, rf_fetch_creds *c, int *oom)
{
    int in = 0, found = 0;
    for (const char *p = text; *p;) {
        const char *eol = p + strcspn(p, "\n"), *next = *eol ? eol + 1 : eol;
        const char *a = p, *e = eol;
        int indented = blank(*a);
        while (a < e && blank(*a))
            a++;
        while (e > a && blank(e[-1]))
            e--;
        if (a < e && *a == '[') {
            const char *b = memchr(a, ']', (size_t)(e - a));
            if (b) {
                const char *na = a + 1, *ne = b;
                while (na < ne && blank(*na))
                    na++;
                while (ne > na && blank(ne[-1]))
                    ne--;
                in = strlen(profile) == (size_t)(ne - na) &&
                     !strncmp(na, profile, (size_t)(ne - na));
                found |= in;
            }
        } else if (in && !indented && a < e && *a != '#' && *a != ';') {
            const char *eq = memchr(a, '=', (size_t)(e - a));
            if (eq) {
                const char *ke = eq, *v = eq + 1;
                while (ke > a && blank(ke[-1]))
                    ke--;
                while (v < e && blank(*v))
                    v++;
                size_t kn = (size_t)(ke - a);
                char **slot = NULL;
                if (kn == 17 && !strncasecmp(a, "aws_access_key_id", kn))
                    slot = &c->key_id;
                else if (kn == 21 && !strncasecmp(a, "aws_secret_access_key", kn))
                    slot = &c->secret;
                else if (kn == 17 && !strncasecmp(a, "aws_session_token", kn))
                    slot = &c->token;
                if (slot && v < e) {
                    wipe_free(*slot);
                    *slot = dup_n(v, (size_t)(e - v), oom);
                }
            }
        }
        p = next;
    }
    return found;
}

int rf__fetch_creds_read(rf_fetch_creds *c)
{
    memset(c, 0, sizeof *c);
    int oom = 0;
    const char *key = env("AWS_ACCESS_KEY_ID"), *secret = env("AWS_SECRET_ACCESS_KEY");
    if (key && secret) {
        const char *token = env("AWS_SESSION_TOKEN");
        c->key_id = dup_n(key, strlen(key), &oom);
        c->secret = dup_n(secret, strlen(secret), &oom);
        if (token)
            c->token = dup_n(token, strlen(token), &oom);
        snprintf(c->from, sizeof c->from, "the environment");
    } else {
        const char *file = env("AWS_SHARED_CREDENTIALS_FILE"), *home = env("HOME");
        const char *profile = env("AWS_PROFILE");
        char path[4096];
        if (!profile)
            profile = "default";
        if (file)
            snprintf(path, sizeof path, "%s", file);
        else if (home)
            snprintf(path, sizeof path, "%s/.aws/credentials", home);
        else
            path[0] = '\0';
        char why[128];
        size_t len = 0;
        char *text = path[0] ? read_file(path, &len, why, sizeof why) : NULL;
        if (!path[0]) {
            snprintf(c->from, sizeof c->from,
                     "no credentials: " UNSET "; no AWS_SHARED_CREDENTIALS_FILE and no HOME");
        } else if (!text) {
            snprintf(c->from, sizeof c->from, "no credentials: " UNSET "; %.300s: %s", path, why);
        } else {
            int found = parse_profile(text, profile, c, &oom);
            explicit_bzero(text, len);
            free(text);
            if (!found || !c->key_id || !c->secret) {
                rf__fetch_creds_free(c);
                snprintf(c->from, sizeof c->from, "no credentials: " UNSET "; %.300s: %s [%.100s]",
                         path,
                         found ? "no aws_access_key_id and aws_secret_access_key in" : "no profile",
                         profile);
            } else {
                snprintf(c->from, sizeof c->from, "%.300s [%.100s]", path, profile);
            }
        }
    }
    if (oom) {
        rf__fetch_creds_free(c);
        return RF_E_NOMEM;
    }
    return 0;
}
