/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes discovery (--discovery k8s): the peers are the ready endpoints of one Service's
 * EndpointSlices (discovery.k8s.io/v1, label kubernetes.io/service-name=<service>), or the ready
 * pods matching a label selector. The source lists the objects, then watches them from the list's
 * resourceVersion (with allowWatchBookmarks), and reports the whole peer list after every change.
 *
 * Two halves. The protocol half is pure (no I/O, no clock): sl_k8s_set holds the objects seen so
 * far and the last resourceVersion; sl_k8s_set_list() replaces it from a list answer,
 * sl_k8s_set_feed() takes the bytes of a watch stream (newline-delimited JSON events, each at
 * most max_bytes) and applies every complete event. The I/O half (sl_k8s_start) runs libcurl on a
 * thread of its own: HTTPS verified against the service-account CA, the bearer token read again
 * whenever its file changes, a 410 Gone answered by a fresh list, a broken stream resumed from the
 * last resourceVersion after a backoff (sl_k8s_backoff_ms).
 */
#ifndef SLUICE_CTLPLANE_K8S_H
#define SLUICE_CTLPLANE_K8S_H

#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "runtime/log.h"

/* Results of the pure half (besides 0 and negative errnos). */
#define SL_K8S_CHANGED 1 /* the peer list may differ: report it */
#define SL_K8S_GONE 2    /* the resourceVersion is too old (410): list again */

/* Defaults. */
#define SL_K8S_MAX_BYTES_DEFAULT (4u << 20)
#define SL_K8S_MAX_OBJECTS 4096
#define SL_K8S_BACKOFF_MIN_MS 200
#define SL_K8S_BACKOFF_MAX_MS 30000

typedef enum sl_k8s_mode { SL_K8S_SLICES = 0, SL_K8S_PODS = 1 } sl_k8s_mode;

typedef struct sl_k8s_config {
    const char *api;        /* "https://host:port"; NULL/"" = KUBERNETES_SERVICE_HOST/_PORT */
    const char *ns;         /* NULL/"" = the contents of <service-account dir>/namespace */
    const char *service;    /* EndpointSlices of this Service ... */
    const char *selector;   /* ... or pods matching this label selector */
    const char *port_name;  /* named port; NULL/"" = "grpc" */
    int port;               /* > 0: this port, whatever the names */
    const char *token_file; /* NULL/"" = the service account's */
    const char *ca_file;    /* NULL/"" = the service account's */
    size_t max_bytes;       /* largest list answer or watch event; 0 = 4 MiB */
    int64_t watch_timeout_s; /* timeoutSeconds of one watch; 0 = 300 */
    int64_t request_timeout_ms; /* list requests, and connecting; 0 = 10000 */
} sl_k8s_config;

#define SL_K8S_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* ---- the pure half ---------------------------------------------------------------------------- */

typedef struct sl_k8s_obj sl_k8s_obj;

typedef struct sl_k8s_set {
    sl_k8s_mode mode;
    char port_name[64];
    int port;
    size_t max_bytes;
    char rv[64];        /* last resourceVersion seen ("" = none) */
    sl_k8s_obj *objs;
    size_t n, cap;
    sl_strbuf line;     /* partial watch event, at most max_bytes */
} sl_k8s_set;

/* An empty set. port_name NULL = "grpc"; max_bytes 0 = the default. */
void sl_k8s_set_init(sl_k8s_set *s, sl_k8s_mode mode, const char *port_name, int port,
                     size_t max_bytes);
void sl_k8s_set_free(sl_k8s_set *s);

/* Replace the set from a list answer (EndpointSliceList or PodList), and forget any partial
 * event. SL_K8S_CHANGED, or -EPROTO (malformed), -EMSGSIZE (over max_bytes or too many
 * objects): then the set is unchanged. */
int sl_k8s_set_list(sl_k8s_set *s, const char *json, size_t len);

/* Apply one watch event (one JSON object). 0 (nothing changed: a bookmark, an object without
 * peers before and after), SL_K8S_CHANGED, SL_K8S_GONE (an ERROR event with code 410), or
 * -EPROTO / -EMSGSIZE. Any other ERROR event is -EPROTO. */
int sl_k8s_set_event(sl_k8s_set *s, const char *json, size_t len);

/* Feed bytes of a watch stream: every complete line is applied by sl_k8s_set_event. Returns
 * SL_K8S_CHANGED if any event changed the set, else 0; or stops at the first SL_K8S_GONE or
 * error and returns it (the stream must then be dropped). A line longer than max_bytes is
 * -EMSGSIZE. */
int sl_k8s_set_feed(sl_k8s_set *s, const char *data, size_t n);

/* The peer addresses ("ip:port", "[ipv6]:port"), unsorted and possibly repeated, malloc'd (the
 * caller frees each and the array). Returns the count or -ENOMEM. */
int sl_k8s_set_addrs(const sl_k8s_set *s, char ***out);

/* Delay before retry number `attempt` (0 = first): doubling from SL_K8S_BACKOFF_MIN_MS up to
 * SL_K8S_BACKOFF_MAX_MS, minus up to a quarter picked by `rnd`. */
int64_t sl_k8s_backoff_ms(unsigned attempt, uint32_t rnd);

/* The request path (no host): list when watch is 0, else a watch from rv. Returns the length or
 * -ENAMETOOLONG. Label selectors and names are percent-encoded. */
int sl_k8s_path(char *out, size_t cap, sl_k8s_mode mode, const char *ns, const char *service,
                const char *selector, int watch, const char *rv, int64_t timeout_s);

/* ---- the source (I/O) ------------------------------------------------------------------------- */

typedef struct sl_k8s sl_k8s;

/* Called on the source's thread with the current peers (unsorted, maybe repeated). */
typedef void (*sl_k8s_fn)(void *ud, char *const *addrs, size_t n);

/* Check the configuration, read the namespace file if needed, and start the thread, which
 * lists, reports and watches. 0, -EINVAL (no service nor selector, both, no API address), or
 * another negative errno. */
int sl_k8s_start(const sl_k8s_config *cfg, sl_logger *log, sl_k8s_fn fn, void *ud,
                 sl_k8s **out);

/* Stop the thread (wakes a blocked watch), free. No callback runs after this returns. */
void sl_k8s_stop(sl_k8s *k);

#endif
