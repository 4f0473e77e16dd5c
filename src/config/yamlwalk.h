/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bounded walk over a libyaml document, shared by the two readers of the quota file
 * (config/quotafile.c for limit:/factor:, config/killswitch.c for killswitch:/concurrency:/fleet:).
 * Every node fetched through sl_yw_node costs one unit of a budget fixed at load time: YAML aliases
 * let a small file name one big mapping many times, so the walk is bounded by the file's size, not
 * by what the aliases expand to. Errors go to the caller's buffer as "line N: msg".
 *
 * Callers that need their own state embed sl_yw as the FIRST member of their struct and convert
 * the sl_yw * a callback receives back to it; per-call state travels in ud.
 */
#ifndef SLUICE_CONFIG_YAMLWALK_H
#define SLUICE_CONFIG_YAMLWALK_H

#include <stdbool.h>
#include <stddef.h>

#include <yaml.h>

typedef struct sl_yw {
    yaml_document_t doc;
    bool loaded;      /* doc holds a document to delete */
    bool scalar_keys; /* sl_yw_each rejects a non-scalar key ("<what>: a key must be a string") */
    size_t budget;    /* nodes left to visit */
    char *err;
    size_t errlen;
    char dummy[1]; /* err when the caller passed none */
} sl_yw;

/* Called with each key and value of a mapping; a nonzero return stops the walk and is returned. */
typedef int (*sl_yw_pair_fn)(sl_yw *w, yaml_node_t *k, yaml_node_t *v, void *ud);

/*
 * Parses text into w->doc with a budget of 8 * (len + 16) node visits. err (may be NULL) is
 * cleared, and receives "line N: <libyaml problem>" on a syntax error (-EINVAL); -ENOMEM if the
 * parser cannot start. w must not move afterwards (err may point into it); always sl_yw_free it.
 * Set w->scalar_keys after loading; load resets it.
 */
int sl_yw_load(sl_yw *w, const char *text, size_t len, char *err, size_t errlen);
void sl_yw_free(sl_yw *w);

/* The document's root, NULL for an empty document or an empty scalar (a file of comments). */
yaml_node_t *sl_yw_root(sl_yw *w);

/* Node id of the document, or NULL once the budget is spent (report "quota file too complex"). */
yaml_node_t *sl_yw_node(sl_yw *w, int id);

/* An empty scalar: "key:" with nothing under it. */
bool sl_yw_empty(const yaml_node_t *n);
/* The scalar's bytes (not NUL-terminated) and length, NULL if n is not a scalar. */
const char *sl_yw_scalar(const yaml_node_t *n, size_t *len);
/* n is the scalar s. */
bool sl_yw_is(const yaml_node_t *n, const char *s);

/* Formats "line N: msg" (just "msg" when n is NULL) into the error buffer and returns rc. */
int sl_yw_fail(sl_yw *w, const yaml_node_t *n, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/*
 * Calls fn for each pair of the mapping n, each key and value costing one node of the budget. An
 * empty scalar is an empty mapping; anything else but a mapping fails with "<what> must be a
 * mapping", a spent budget (or n NULL) with "quota file too complex", both -EINVAL.
 */
int sl_yw_each(sl_yw *w, const yaml_node_t *n, const char *what, sl_yw_pair_fn fn, void *ud);

#endif
