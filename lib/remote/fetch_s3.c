/*
 * fetch_s3.c - where a remote URL is asked for, and how an S3 request is
 * signed (see fetch.h), apart from the fetch thread's loop (fetch.c).
 *
 * s3://BUCKET/KEY becomes ENDPOINT/BUCKET/KEY (path style, with
 * AWS_ENDPOINT_URL) or, on AWS, https://BUCKET.s3.REGION.amazonaws.com/KEY
 * (virtual host) - except for a bucket whose name is not one DNS label of
 * lowercase letters, digits and '-': a name with dots would make a host
 * name that AWS's certificate for *.s3.REGION.amazonaws.com does not match
 * (the wildcard covers one label), and older names with capitals or '_'
 * make no valid host name at all, so those go path style to
 * https://s3.REGION.amazonaws.com/BUCKET/KEY. The key is URI-encoded as
 * SigV4 wants it ('/' kept). Requests are signed by libcurl
 * (CURLOPT_AWS_SIGV4, "aws:amz:REGION:s3") when credentials are set
 * (fetch_creds.c); a session token travels as x-amz-security-token (signed
 * with it), in a header that is wiped before it is freed.
 *
 * Everything here but the signing is plain string work, built with or
 * without libcurl, so that the tests can check it directly.
 */
#define _GNU_SOURCE
#include "fetch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "redact.h"
#include "ringfeed.h"

int rf__fetch_is_url(const char *s)
{
    return !strncmp(s, "s3://", 5) || !strncmp(s, "http://", 7) || !strncmp(s, "https://", 8);
}

int rf__fetch_uri_encode(char *dst, size_t cap, const char *s, int keep_slash)
{
    size_t n = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && keep_slash);
        if (n + 4 > cap)
            return -1;
        n += keep ? (size_t)snprintf(dst + n, cap - n, "%c", c)
                  : (size_t)snprintf(dst + n, cap - n, "%%%02X", c);
    }
    if (n >= cap)
        return -1;
    dst[n] = '\0';
    return 0;
}

static void env_copy(char *dst, size_t cap, const char *a, const char *b, const char *def)
{
    const char *v = getenv(a);
    if ((!v || !*v) && b)
        v = getenv(b);
    snprintf(dst, cap, "%s", v && *v ? v : def);
}

int rf__fetch_s3_env(rf_fetch_s3 *c, char *err, size_t errcap)
{
    memset(c, 0, sizeof *c);
    env_copy(c->region, sizeof c->region, "AWS_REGION", "AWS_DEFAULT_REGION", "us-east-1");
    env_copy(c->endpoint, sizeof c->endpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", "");
    /* the signature and the session token go where the endpoint says: only
     * to a server spoken to in http(s) (a file:// or ftp:// endpoint is a
     * mistake, or worse) */
    if (c->endpoint[0] && strncasecmp(c->endpoint, "http://", 7) != 0 &&
        strncasecmp(c->endpoint, "https://", 8) != 0) {
        char shown[RF__URL_SHOWN];
        snprintf(err, errcap,
                 "fetch: the S3 endpoint %s (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL) is not an "
                 "http:// or https:// URL",
                 rf__redact_url(c->endpoint, shown, sizeof shown));
        return RF_E_SOURCE;
    }
    return rf__fetch_creds_read(&c->creds);
}

void rf__fetch_s3_free(rf_fetch_s3 *c)
{
    rf__fetch_creds_free(&c->creds);
}

int rf__fetch_http_url(const rf_fetch_s3 *c, const char *url, const char *query, char *out,
                       size_t cap)
{
    const char *q = query && *query ? query : NULL;
    if (strncmp(url, "s3://", 5) != 0)
        return snprintf(out, cap, "%s%s%s", url, q ? "?" : "", q ? q : "") < (int)cap ? 0 : -1;
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t blen = slash ? (size_t)(slash - b) : strlen(b);
    char key[4096];
    if (blen == 0 || rf__fetch_uri_encode(key, sizeof key, slash ? slash + 1 : "", 1) != 0)
        return -1;
    int n;
    if (c->endpoint[0]) {
        size_t el = strlen(c->endpoint);
        while (el > 0 && c->endpoint[el - 1] == '/')
            el--;
        n = snprintf(out, cap, "%.*s/%.*s/%s", (int)el, c->endpoint, (int)blen, b, key);
    } else if (strspn(b, "abcdefghijklmnopqrstuvwxyz0123456789-") >= blen) {
        n = snprintf(out, cap, "https://%.*s.s3.%s.amazonaws.com/%s", (int)blen, b, c->region,
                     key);
    } else { /* not a host name label (see above) */
        n = snprintf(out, cap, "https://s3.%s.amazonaws.com/%.*s/%s", c->region, (int)blen, b,
                     key);
    }
    if (n >= 0 && (size_t)n < cap && q)
        n += snprintf(out + n, cap - (size_t)n, "?%s", q);
    return n >= 0 && (size_t)n < cap ? 0 : -1;
}

#ifdef RF_HAVE_CURL
#include <curl/curl.h>

void *rf__fetch_s3_sign(const rf_fetch_s3 *c, const char *url, void *easy)
{
    const rf_fetch_creds *k = &c->creds;
    if (strncmp(url, "s3://", 5) != 0 || !k->key_id || !k->secret)
        return NULL;
    char sig[128];
    snprintf(sig, sizeof sig, "aws:amz:%s:s3", c->region);
    /* S3 wants the payload's hash signed; a GET or HEAD has none to hash
     * (libcurl then signs this value as it is) */
    struct curl_slist *h = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (h && k->token) {
        static const char name[] = "x-amz-security-token: ";
        size_t n = strlen(name) + strlen(k->token) + 1;
        char *th = malloc(n);
        struct curl_slist *h2 = NULL;
        if (th) {
            snprintf(th, n, "%s%s", name, k->token);
            h2 = curl_slist_append(h, th);
            explicit_bzero(th, n);
            free(th);
        }
        if (!h2) { /* no header: better no request than one without the token */
            rf__fetch_headers_free(h);
            return NULL;
        }
        h = h2;
    }
    if (h) {
        curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, sig);
        curl_easy_setopt(easy, CURLOPT_USERNAME, k->key_id);
        curl_easy_setopt(easy, CURLOPT_PASSWORD, k->secret);
    }
    return h;
}

void rf__fetch_headers_free(void *headers)
{
    for (struct curl_slist *h = headers; h; h = h->next)
        explicit_bzero(h->data, strlen(h->data));
    curl_slist_free_all(headers);
}
#endif
