/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer driver for ctlplane/k8s's protocol half: arbitrary bytes as a list answer and then as
 * a watch stream (cut into pieces at points the input picks), for EndpointSlices or Pods (the
 * first byte picks the mode, the byte cap and the cut points). Nothing crashes or overruns; a
 * refused list leaves the set as it was; every reported peer is "host:port" or "[v6]:port" with
 * a port in 1..65535; the resourceVersion stays a short NUL-terminated string. A broken property
 * traps, which libFuzzer reports as a crash.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctlplane/k8s.h"

#define CHECK(x) do { if (!(x)) __builtin_trap(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t snapshot(const sl_k8s_set *s, char **joined)
{
    char **v = NULL;
    int n = sl_k8s_set_addrs(s, &v);
    CHECK(n >= 0);
    size_t total = 1;
    for (int i = 0; i < n; i++)
        total += strlen(v[i]) + 1;
    char *out = malloc(total);
    CHECK(out);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        const char *a = v[i];
        const char *colon = strrchr(a, ':');
        CHECK(colon && colon > a);
        long port = strtol(colon + 1, NULL, 10);
        CHECK(port >= 1 && port <= 65535);
        if (a[0] == '[')
            CHECK(colon[-1] == ']');
        strcat(out, a);
        strcat(out, ",");
        free(v[i]);
    }
    free(v);
    *joined = out;
    return (size_t)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t ctl = data[0], cut = data[1];
    data += 2;
    size -= 2;
    sl_k8s_set s;
    sl_k8s_set_init(&s, (ctl & 1) ? SL_K8S_PODS : SL_K8S_SLICES, (ctl & 2) ? "http" : NULL,
                    (ctl & 4) ? 8080 : 0, (ctl & 8) ? 256 : 0);
    /* the input up to the first NUL is a list answer, the rest a watch stream */
    const uint8_t *nul = memchr(data, 0, size);
    size_t ll = nul ? (size_t)(nul - data) : size;
    char *before, *after;
    snapshot(&s, &before);
    int rc = sl_k8s_set_list(&s, (const char *)data, ll);
    snapshot(&s, &after);
    if (rc < 0)
        CHECK(strcmp(before, after) == 0 && s.rv[0] == '\0');
    else
        CHECK(rc == SL_K8S_CHANGED && s.rv[0] != '\0');
    free(before);
    free(after);
    if (nul) {
        const char *p = (const char *)nul + 1;
        size_t n = size - ll - 1, step = (size_t)cut + 1;
        while (n) {
            size_t k = n < step ? n : step;
            rc = sl_k8s_set_feed(&s, p, k);
            CHECK(rc == 0 || rc == SL_K8S_CHANGED || rc == SL_K8S_GONE || rc < 0);
            if (rc < 0 || rc == SL_K8S_GONE)
                break;
            p += k;
            n -= k;
        }
        CHECK(memchr(s.rv, 0, sizeof s.rv) != NULL);
        snapshot(&s, &after);
        free(after);
    }
    sl_k8s_set_free(&s);
    return 0;
}
