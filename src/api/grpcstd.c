/* SPDX-License-Identifier: Apache-2.0 */
/* gRPC's standard services' messages: health and server reflection (see grpcstd.h). */
#include "api/grpcstd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire/pbwire.h"

/* ---- writing helpers (none of this is on the decision path) ---- */

static int put_varint(sl_buf *out, uint64_t v)
{
    uint8_t tmp[10];
    uint8_t *e = sl_pb_put_varint(tmp, v);
    return sl_buf_append(out, tmp, (size_t)(e - tmp));
}

static int put_len_field(sl_buf *out, uint32_t field, const void *p, size_t n)
{
    int rc = put_varint(out, (uint64_t)field << 3 | SL_PB_LEN);
    if (!rc)
        rc = put_varint(out, n);
    if (!rc && n)
        rc = sl_buf_append(out, p, n);
    return rc ? -ENOMEM : 0;
}

static int put_varint_field(sl_buf *out, uint32_t field, uint64_t v)
{
    int rc = put_varint(out, (uint64_t)field << 3 | SL_PB_VARINT);
    if (!rc)
        rc = put_varint(out, v);
    return rc ? -ENOMEM : 0;
}

/* ---- health ---- */

/* An empty message may come as NULL: read it as "" (no arithmetic on a null pointer). */
static sl_pb_rd reader(const uint8_t *msg, size_t n)
{
    if (!msg)
        msg = (const uint8_t *)"", n = 0;
    return (sl_pb_rd){msg, msg + n};
}

int sl_grpcstd_health_decode(const uint8_t *msg, size_t n, const char **svc, size_t *svc_len)
{
    sl_pb_rd r = reader(msg, n);
    *svc = "";
    *svc_len = 0;
    while (r.p < r.end) {
        uint32_t f;
        unsigned wt;
        if (!sl_pb_key(&r, &f, &wt))
            return -EINVAL;
        if (f == 1 && wt == SL_PB_LEN) {
            sl_pb_rd sub;
            if (!sl_pb_bytes(&r, &sub))
                return -EINVAL;
            *svc = (const char *)sub.p;
            *svc_len = (size_t)(sub.end - sub.p);
        } else if (!sl_pb_skip(&r, wt)) {
            return -EINVAL;
        }
    }
    return 0;
}

int sl_grpcstd_health_encode(int status, sl_buf *out)
{
    return status ? put_varint_field(out, 1, (uint64_t)status) : 0; /* proto3: 0 is absent */
}

/* ---- reflection: the request ---- */

int sl_grpcstd_refl_decode(const uint8_t *msg, size_t n, sl_grpcstd_refl_req *req)
{
    memset(req, 0, sizeof *req);
    sl_pb_rd r = reader(msg, n);
    while (r.p < r.end) {
        uint32_t f;
        unsigned wt;
        if (!sl_pb_key(&r, &f, &wt))
            return -EINVAL;
        if (wt != SL_PB_LEN || f < 1 || f > 7 || f == 2) {
            if (!sl_pb_skip(&r, wt))
                return -EINVAL;
            continue;
        }
        sl_pb_rd sub;
        if (!sl_pb_bytes(&r, &sub))
            return -EINVAL;
        const char *s = (const char *)sub.p;
        size_t len = (size_t)(sub.end - sub.p);
        if (f == 1) {
            req->host = s;
            req->host_len = len;
            continue;
        }
        req->kind = f == 3   ? SL_REFL_FILE_BY_NAME
                    : f == 4 ? SL_REFL_SYMBOL
                    : f == 5 ? SL_REFL_EXTENSION
                    : f == 6 ? SL_REFL_EXT_NUMBERS
                             : SL_REFL_LIST;
        req->arg = s;
        req->arg_len = len;
        if (f == 5) { /* ExtensionRequest: its containing_type (field 1) */
            req->arg = "";
            req->arg_len = 0;
            while (sub.p < sub.end) {
                uint32_t ef;
                unsigned ewt;
                if (!sl_pb_key(&sub, &ef, &ewt))
                    return -EINVAL;
                sl_pb_rd ct;
                if (ef == 1 && ewt == SL_PB_LEN) {
                    if (!sl_pb_bytes(&sub, &ct))
                        return -EINVAL;
                    req->arg = (const char *)ct.p;
                    req->arg_len = (size_t)(ct.end - ct.p);
                } else if (!sl_pb_skip(&sub, ewt)) {
                    return -EINVAL;
                }
            }
        }
    }
    return 0;
}

/* ---- reflection: the descriptor index ---- */

/* Bounds of the built-in set (proto/: a dozen files); a set past them is refused. */
#define MAX_FILES 64
#define MAX_DEPS 16
#define MAX_SYMS 64
#define MAX_SERVICES 32

typedef struct str {
    const char *p;
    size_t n;
} str;

typedef struct refl_file {
    str name, pkg;
    const uint8_t *bytes;
    size_t len;
    str depname[MAX_DEPS];
    int dep[MAX_DEPS];
    int ndeps;
    str sym[MAX_SYMS]; /* top-level messages, enums and services */
    int nsyms;
} refl_file;

struct sl_grpcstd_refl {
    refl_file files[MAX_FILES];
    int nfiles;
    char *service[MAX_SERVICES]; /* full names: package.Service */
    int nservices;
};

static bool str_eq(str a, const char *p, size_t n)
{
    return a.n == n && memcmp(a.p, p, n) == 0;
}

/* The name (field 1) of a DescriptorProto / EnumDescriptorProto / ServiceDescriptorProto. */
static int name_of(sl_pb_rd m, str *out)
{
    out->p = "";
    out->n = 0;
    while (m.p < m.end) {
        uint32_t f;
        unsigned wt;
        if (!sl_pb_key(&m, &f, &wt))
            return -EINVAL;
        if (f == 1 && wt == SL_PB_LEN) {
            sl_pb_rd s;
            if (!sl_pb_bytes(&m, &s))
                return -EINVAL;
            out->p = (const char *)s.p;
            out->n = (size_t)(s.end - s.p);
        } else if (!sl_pb_skip(&m, wt)) {
            return -EINVAL;
        }
    }
    return 0;
}

static int add_service(sl_grpcstd_refl *r, str pkg, str name)
{
    if (r->nservices >= MAX_SERVICES)
        return -EINVAL;
    char *s = malloc(pkg.n + 1 + name.n + 1);
    if (!s)
        return -ENOMEM;
    size_t k = 0;
    if (pkg.n) {
        memcpy(s, pkg.p, pkg.n);
        s[pkg.n] = '.';
        k = pkg.n + 1;
    }
    memcpy(s + k, name.p, name.n);
    s[k + name.n] = 0;
    r->service[r->nservices++] = s;
    return 0;
}

static int index_file(sl_grpcstd_refl *r, sl_pb_rd m)
{
    if (r->nfiles >= MAX_FILES)
        return -EINVAL;
    refl_file *fl = &r->files[r->nfiles];
    fl->bytes = m.p;
    fl->len = (size_t)(m.end - m.p);
    str services[MAX_SERVICES];
    int nsvc = 0;
    while (m.p < m.end) {
        uint32_t f;
        unsigned wt;
        if (!sl_pb_key(&m, &f, &wt))
            return -EINVAL;
        if (wt != SL_PB_LEN || !(f <= 6)) {
            if (!sl_pb_skip(&m, wt))
                return -EINVAL;
            continue;
        }
        sl_pb_rd s;
        if (!sl_pb_bytes(&m, &s))
            return -EINVAL;
        str v = {(const char *)s.p, (size_t)(s.end - s.p)};
        if (f == 1) {
            fl->name = v;
        } else if (f == 2) {
            fl->pkg = v;
        } else if (f == 3) {
            if (fl->ndeps >= MAX_DEPS)
                return -EINVAL;
            fl->depname[fl->ndeps++] = v;
        } else if (f >= 4) { /* message_type 4, enum_type 5, service 6 */
            if (fl->nsyms >= MAX_SYMS)
                return -EINVAL;
            int rc = name_of(s, &fl->sym[fl->nsyms]);
            if (rc)
                return rc;
            if (f == 6) {
                if (nsvc >= MAX_SERVICES)
                    return -EINVAL;
                services[nsvc++] = fl->sym[fl->nsyms];
            }
            fl->nsyms++;
        }
    }
    if (!fl->name.n)
        return -EINVAL;
    for (int i = 0; i < nsvc; i++) {
        int rc = add_service(r, fl->pkg, services[i]);
        if (rc)
            return rc;
    }
    r->nfiles++;
    return 0;
}

int sl_grpcstd_refl_new(const uint8_t *set, size_t n, sl_grpcstd_refl **out)
{
    sl_grpcstd_refl *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    sl_pb_rd rd = reader(set, n);
    int rc = 0;
    while (!rc && rd.p < rd.end) {
        uint32_t f;
        unsigned wt;
        sl_pb_rd m;
        if (!sl_pb_key(&rd, &f, &wt))
            rc = -EINVAL;
        else if (f == 1 && wt == SL_PB_LEN)
            rc = sl_pb_bytes(&rd, &m) ? index_file(r, m) : -EINVAL;
        else if (!sl_pb_skip(&rd, wt))
            rc = -EINVAL;
    }
    /* dependencies by index; --include_imports put every one in the set */
    for (int i = 0; !rc && i < r->nfiles; i++) {
        refl_file *fl = &r->files[i];
        for (int d = 0; d < fl->ndeps && !rc; d++) {
            fl->dep[d] = -1;
            for (int j = 0; j < r->nfiles; j++)
                if (str_eq(r->files[j].name, fl->depname[d].p, fl->depname[d].n))
                    fl->dep[d] = j;
            if (fl->dep[d] < 0)
                rc = -EINVAL;
        }
    }
    if (rc) {
        sl_grpcstd_refl_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void sl_grpcstd_refl_free(sl_grpcstd_refl *r)
{
    if (!r)
        return;
    for (int i = 0; i < r->nservices; i++)
        free(r->service[i]);
    free(r);
}

bool sl_grpcstd_refl_serves(const sl_grpcstd_refl *r, const char *name, size_t n)
{
    for (int i = 0; i < r->nservices; i++)
        if (strlen(r->service[i]) == n && memcmp(r->service[i], name, n) == 0)
            return true;
    return false;
}

size_t sl_grpcstd_refl_services(const sl_grpcstd_refl *r)
{
    return (size_t)r->nservices;
}

size_t sl_grpcstd_refl_files(const sl_grpcstd_refl *r)
{
    return (size_t)r->nfiles;
}

/* The file defining a fully-qualified symbol: a top-level message, enum or service, or anything
 * under one (a method, a nested message, a field), with or without a leading dot. -1: none. */
static int file_of_symbol(const sl_grpcstd_refl *r, const char *s, size_t n)
{
    if (n && s[0] == '.') {
        s++;
        n--;
    }
    for (int i = 0; i < r->nfiles; i++) {
        const refl_file *fl = &r->files[i];
        size_t k = 0;
        if (fl->pkg.n) {
            if (n <= fl->pkg.n || memcmp(s, fl->pkg.p, fl->pkg.n) || s[fl->pkg.n] != '.')
                continue;
            k = fl->pkg.n + 1;
        }
        const char *rest = s + k;
        size_t rn = n - k;
        size_t top = 0;
        while (top < rn && rest[top] != '.')
            top++;
        for (int j = 0; j < fl->nsyms; j++)
            if (str_eq(fl->sym[j], rest, top))
                return i;
    }
    return -1;
}

static int file_by_name(const sl_grpcstd_refl *r, const char *s, size_t n)
{
    for (int i = 0; i < r->nfiles; i++)
        if (str_eq(r->files[i].name, s, n))
            return i;
    return -1;
}

static int error_response(sl_buf *out, int code, const char *msg)
{
    sl_buf e;
    sl_buf_init(&e, 0);
    int rc = put_varint_field(&e, 1, (uint64_t)code);
    if (!rc)
        rc = put_len_field(&e, 2, msg, strlen(msg));
    if (!rc)
        rc = put_len_field(out, 7, e.data, e.len);
    sl_buf_free(&e);
    return rc;
}

/* FileDescriptorResponse: the file, then every file it depends on, each once. */
static int file_response(const sl_grpcstd_refl *r, int root, sl_buf *out)
{
    int order[MAX_FILES];
    bool seen[MAX_FILES] = {false};
    int n = 0;
    order[n++] = root;
    seen[root] = true;
    for (int i = 0; i < n; i++) {
        const refl_file *fl = &r->files[order[i]];
        for (int d = 0; d < fl->ndeps; d++)
            if (!seen[fl->dep[d]]) {
                seen[fl->dep[d]] = true;
                order[n++] = fl->dep[d];
            }
    }
    sl_buf e;
    sl_buf_init(&e, 0);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++)
        rc = put_len_field(&e, 1, r->files[order[i]].bytes, r->files[order[i]].len);
    if (!rc)
        rc = put_len_field(out, 4, e.data, e.len);
    sl_buf_free(&e);
    return rc;
}

int sl_grpcstd_refl_answer(const sl_grpcstd_refl *r, const sl_grpcstd_refl_req *req,
                           const uint8_t *raw, size_t raw_len, sl_buf *out)
{
    int rc = 0;
    if (req->host_len)
        rc = put_len_field(out, 1, req->host, req->host_len);
    if (!rc)
        rc = put_len_field(out, 2, raw, raw_len);
    if (rc)
        return rc;
    int f;
    switch (req->kind) {
    case SL_REFL_LIST: {
        sl_buf e, one;
        sl_buf_init(&e, 0);
        sl_buf_init(&one, 0);
        for (int i = 0; i < r->nservices && !rc; i++) {
            sl_buf_reset(&one);
            rc = put_len_field(&one, 1, r->service[i], strlen(r->service[i]));
            if (!rc)
                rc = put_len_field(&e, 1, one.data, one.len);
        }
        if (!rc)
            rc = put_len_field(out, 6, e.data, e.len);
        sl_buf_free(&e);
        sl_buf_free(&one);
        return rc;
    }
    case SL_REFL_FILE_BY_NAME:
        f = file_by_name(r, req->arg, req->arg_len);
        return f < 0 ? error_response(out, 5, "file not found") : file_response(r, f, out);
    case SL_REFL_SYMBOL:
        f = file_of_symbol(r, req->arg, req->arg_len);
        return f < 0 ? error_response(out, 5, "symbol not found") : file_response(r, f, out);
    case SL_REFL_EXTENSION:
        return error_response(out, 5, "extension not found (sluice's messages have none)");
    case SL_REFL_EXT_NUMBERS: {
        if (file_of_symbol(r, req->arg, req->arg_len) < 0)
            return error_response(out, 5, "type not found");
        sl_buf e;
        sl_buf_init(&e, 0);
        rc = put_len_field(&e, 1, req->arg, req->arg_len);
        if (!rc)
            rc = put_len_field(out, 5, e.data, e.len);
        sl_buf_free(&e);
        return rc;
    }
    default:
        return error_response(out, 12, "no message_request set");
    }
}
