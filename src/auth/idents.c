/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Client identities (see idents.h). The set is one allocation of identities plus one of their
 * strings; a sorted array of token hashes finds the one candidate a token could be.
 */
#include "auth/idents.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "auth/bearer.h"
#include "auth/secret.h"
#include "base/grow.h"

struct sl_ident {
    char *token;        /* the bearer token, or the certificate name of a "cert:" line */
    size_t token_len;
    bool cert;          /* a "cert:" line */
    char *name;
    char **prefixes;    /* NULL when all (a "*") */
    size_t *prefix_lens;
    size_t nprefixes;
    bool all;
};

typedef struct {
    uint64_t hash;
    size_t idx;
} slot;

struct sl_idents {
    sl_ident *ids;
    size_t n, cap;
    slot *by_hash;      /* sorted by hash */
};

/* Tokens and certificate names hash with different seeds: one sorted array holds both, and a
 * lookup in one space never lands on the other's entries (the kind is checked as well). */
static uint64_t token_hash(const char *t, size_t n, bool cert)
{
    return XXH3_64bits_withSeed(t, n, cert ? 1 : 0);
}

static int fail(char *err, size_t errlen, size_t line, const char *fmt, ...)
{
    if (err && errlen) {
        int k = snprintf(err, errlen, "line %zu: ", line);
        if (k >= 0 && (size_t)k < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return -EINVAL;
}

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == ':' || c == '-';
}

static char *dup_n(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

static void ident_free(sl_ident *id)
{
    if (id->token) {
        sl_secret_free(id->token, id->token_len);
        id->token = NULL;
    }
    free(id->name);
    for (size_t i = 0; i < id->nprefixes; i++)
        free(id->prefixes[i]);
    free(id->prefixes);
    free(id->prefix_lens);
}

void sl_idents_free(sl_idents *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        ident_free(&s->ids[i]);
    free(s->ids);
    free(s->by_hash);
    free(s);
}

size_t sl_idents_count(const sl_idents *s)
{
    return s ? s->n : 0;
}

/* The next field of [*p, end) (separated by spaces/tabs): its start and length, 0 at the end. */
static size_t next_field(const char **p, const char *end, const char **f)
{
    while (*p < end && (**p == ' ' || **p == '\t'))
        (*p)++;
    *f = *p;
    while (*p < end && **p != ' ' && **p != '\t')
        (*p)++;
    return (size_t)(*p - *f);
}

static int add_prefixes(sl_ident *id, const char *f, size_t n, size_t line, char *err,
                        size_t errlen)
{
    if (n == 1 && f[0] == '*') {
        id->all = true;
        return 0;
    }
    size_t cnt = 1;
    for (size_t i = 0; i < n; i++)
        cnt += f[i] == ',';
    if (cnt > SL_IDENTS_MAX_PREFIXES)
        return fail(err, errlen, line, "more than %d prefixes", SL_IDENTS_MAX_PREFIXES);
    id->prefixes = calloc(cnt, sizeof *id->prefixes);
    id->prefix_lens = calloc(cnt, sizeof *id->prefix_lens);
    if (!id->prefixes || !id->prefix_lens)
        return -ENOMEM;
    const char *s = f, *end = f + n;
    while (s <= end) {
        const char *c = memchr(s, ',', (size_t)(end - s));
        if (!c)
            c = end;
        size_t pl = (size_t)(c - s);
        if (pl == 0 || pl > SL_IDENTS_MAX_PREFIX)
            return fail(err, errlen, line, "a prefix must be 1..%d bytes", SL_IDENTS_MAX_PREFIX);
        if (pl == 1 && s[0] == '*')
            id->all = true;
        if (!(id->prefixes[id->nprefixes] = dup_n(s, pl)))
            return -ENOMEM;
        id->prefix_lens[id->nprefixes++] = pl;
        s = c + 1;
    }
    return 0;
}

static int parse_line(sl_idents *s, const char *p, const char *end, size_t line, char *err,
                      size_t errlen)
{
    const char *tok, *name, *pre, *extra;
    size_t tl = next_field(&p, end, &tok);
    if (tl == 0 || tok[0] == '#')
        return 0; /* blank or comment */
    size_t nl = next_field(&p, end, &name);
    size_t pl = next_field(&p, end, &pre);
    if (nl == 0 || pl == 0)
        return fail(err, errlen, line, "expected <token> <name> <prefix>[,<prefix>...]");
    if (next_field(&p, end, &extra))
        return fail(err, errlen, line, "unexpected text after the prefixes");
    const size_t cpl = sizeof SL_IDENTS_CERT_PREFIX - 1;
    bool cert = tl >= cpl && !memcmp(tok, SL_IDENTS_CERT_PREFIX, cpl);
    if (cert) {
        tok += cpl;
        tl -= cpl;
        if (tl == 0 || tl > SL_IDENTS_MAX_CERT_NAME)
            return fail(err, errlen, line, "a certificate name must be 1..%d bytes",
                        SL_IDENTS_MAX_CERT_NAME);
    } else if (tl < SL_BEARER_MIN_LEN || tl > SL_BEARER_MAX_LEN) {
        return fail(err, errlen, line, "a token must be %d..%d bytes", SL_BEARER_MIN_LEN,
                    SL_BEARER_MAX_LEN);
    }
    for (size_t i = 0; i < tl; i++)
        if (!sl_bearer_char_ok((unsigned char)tok[i]))
            return fail(err, errlen, line, cert ? "a certificate name is visible ASCII only"
                                                : "a token is visible ASCII only");
    if (nl > SL_IDENTS_MAX_NAME)
        return fail(err, errlen, line, "a name is at most %d bytes", SL_IDENTS_MAX_NAME);
    for (size_t i = 0; i < nl; i++)
        if (!name_char(name[i]))
            return fail(err, errlen, line, "a name is [A-Za-z0-9_.:-]");
    for (size_t i = 0; i < pl; i++)
        if (!sl_bearer_char_ok((unsigned char)pre[i]))
            return fail(err, errlen, line, "a prefix is visible ASCII only");
    if (s->n == SL_IDENTS_MAX)
        return fail(err, errlen, line, "more than %d identities", SL_IDENTS_MAX);
    if (sl_grow(&s->ids, &s->cap, s->n, 1, 16, SL_IDENTS_MAX))
        return -ENOMEM;
    sl_ident *id = &s->ids[s->n++];
    memset(id, 0, sizeof *id);
    id->token = dup_n(tok, tl);
    id->token_len = tl;
    id->cert = cert;
    id->name = dup_n(name, nl);
    if (!id->token || !id->name)
        return -ENOMEM;
    return add_prefixes(id, pre, pl, line, err, errlen);
}

static int cmp_slot(const void *a, const void *b)
{
    uint64_t x = ((const slot *)a)->hash, y = ((const slot *)b)->hash;
    return x < y ? -1 : x > y;
}

int sl_idents_parse(const char *buf, size_t len, sl_idents **out, char *err, size_t errlen)
{
    *out = NULL;
    if (len > SL_IDENTS_MAX_FILE) {
        fail(err, errlen, 0, "the file is larger than %zu bytes", SL_IDENTS_MAX_FILE);
        return -EFBIG;
    }
    sl_idents *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    const char *p = buf, *end = buf + len;
    size_t line = 0;
    int rc = 0;
    while (p < end && !rc) {
        line++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *e = le > p && le[-1] == '\r' ? le - 1 : le;
        if (e > p && memchr(p, '\0', (size_t)(e - p))) /* e > p: for gcc -O3 */
            rc = fail(err, errlen, line, "a NUL byte");
        else
            rc = parse_line(s, p, e, line, err, errlen);
        p = nl ? nl + 1 : end;
    }
    if (!rc && s->n == 0)
        rc = fail(err, errlen, line, "no identity in the file");
    if (!rc) {
        s->by_hash = malloc(s->n * sizeof *s->by_hash);
        if (!s->by_hash)
            rc = -ENOMEM;
    }
    if (!rc) {
        for (size_t i = 0; i < s->n; i++)
            s->by_hash[i] = (slot){token_hash(s->ids[i].token, s->ids[i].token_len,
                                              s->ids[i].cert), i};
        qsort(s->by_hash, s->n, sizeof *s->by_hash, cmp_slot);
        for (size_t i = 1; i < s->n && !rc; i++)
            if (s->by_hash[i].hash == s->by_hash[i - 1].hash)
                rc = fail(err, errlen, 0, "identities '%s' and '%s' have the same %s",
                          s->ids[s->by_hash[i - 1].idx].name, s->ids[s->by_hash[i].idx].name,
                          s->ids[s->by_hash[i].idx].cert ? "certificate name" : "token");
    }
    if (rc) {
        if (rc == -ENOMEM && err && errlen)
            snprintf(err, errlen, "out of memory");
        sl_idents_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static const sl_ident *find(const sl_idents *s, const char *tok, size_t len, bool cert)
{
    if (!s || !s->n)
        return NULL;
    uint64_t h = token_hash(tok, len, cert);
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->by_hash[mid].hash < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == s->n || s->by_hash[lo].hash != h)
        return NULL;
    const sl_ident *id = &s->ids[s->by_hash[lo].idx];
    return id->cert == cert && sl_bearer_equal(tok, len, id->token, id->token_len) ? id : NULL;
}

const sl_ident *sl_idents_find(const sl_idents *s, const char *tok, size_t len)
{
    return find(s, tok, len, false);
}

const sl_ident *sl_idents_find_cert(const sl_idents *s, const char *name, size_t len)
{
    return find(s, name, len, true);
}

const char *sl_ident_name(const sl_ident *id)
{
    return id->name;
}

bool sl_ident_allows(const sl_ident *id, const char *name, size_t len)
{
    if (id->all)
        return true;
    for (size_t i = 0; i < id->nprefixes; i++)
        if (id->prefix_lens[i] <= len && !memcmp(name, id->prefixes[i], id->prefix_lens[i]))
            return true;
    return false;
}
