/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libcurl's entry points for the statically linked sluiced (make static), which is built without
 * libcurl: Debian's libcurl.a needs MIT Kerberos (GSS-API) and p11-kit (through GnuTLS, for
 * librtmp and libldap), and Debian ships no static archive of either (docs/operations.md "Static
 * build"). The two users of libcurl in sluiced are the etcd client (ctlplane/etcd.c) and the
 * Kubernetes discovery (ctlplane/k8s.c); the static sluiced refuses the options that start them
 * (src/daemon/main.c), so these definitions only stand in at link time. Should anything still
 * reach them, every handle fails to come into being and every transfer fails with
 * CURLE_NOT_BUILT_IN, so the caller takes its normal error path.
 */
#define CURL_DISABLE_TYPECHECK /* the type-checking macros would rename these definitions */
#include <curl/curl.h>
#include <stddef.h>

static const char NO_CURL[] = "this sluiced is linked statically without libcurl";

CURLcode curl_global_init(long flags)
{
    (void)flags;
    return CURLE_NOT_BUILT_IN;
}

CURL *curl_easy_init(void)
{
    return NULL;
}

void curl_easy_cleanup(CURL *c)
{
    (void)c;
}

void curl_easy_reset(CURL *c)
{
    (void)c;
}

CURLcode curl_easy_setopt(CURL *c, CURLoption opt, ...)
{
    (void)c;
    (void)opt;
    return CURLE_NOT_BUILT_IN;
}

CURLcode curl_easy_perform(CURL *c)
{
    (void)c;
    return CURLE_NOT_BUILT_IN;
}

CURLcode curl_easy_getinfo(CURL *c, CURLINFO info, ...)
{
    (void)c;
    (void)info;
    return CURLE_NOT_BUILT_IN;
}

const char *curl_easy_strerror(CURLcode code)
{
    (void)code;
    return NO_CURL;
}

CURLM *curl_multi_init(void)
{
    return NULL;
}

CURLMcode curl_multi_cleanup(CURLM *m)
{
    (void)m;
    return CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_add_handle(CURLM *m, CURL *c)
{
    (void)m;
    (void)c;
    return CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_remove_handle(CURLM *m, CURL *c)
{
    (void)m;
    (void)c;
    return CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_perform(CURLM *m, int *running)
{
    (void)m;
    *running = 0;
    return CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_poll(CURLM *m, struct curl_waitfd fds[], unsigned n, int timeout_ms, int *ret)
{
    (void)m;
    (void)fds;
    (void)n;
    (void)timeout_ms;
    if (ret)
        *ret = 0;
    return CURLM_BAD_HANDLE;
}

CURLMcode curl_multi_wakeup(CURLM *m)
{
    (void)m;
    return CURLM_BAD_HANDLE;
}

CURLMsg *curl_multi_info_read(CURLM *m, int *left)
{
    (void)m;
    *left = 0;
    return NULL;
}

struct curl_slist *curl_slist_append(struct curl_slist *l, const char *s)
{
    (void)l;
    (void)s;
    return NULL;
}

void curl_slist_free_all(struct curl_slist *l)
{
    (void)l;
}
