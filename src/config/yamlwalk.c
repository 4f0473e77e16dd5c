/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bounded libyaml document walk (see yamlwalk.h). The budget is charged per node fetched, not
 * per node in the document, because aliases make one node reachable many times.
 */
#include "config/yamlwalk.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int sl_yw_load(sl_yw *w, const char *text, size_t len, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    if (!err || errlen == 0)
        err = w->dummy, errlen = sizeof w->dummy;
    err[0] = 0;
    w->err = err;
    w->errlen = errlen;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &w->doc)) {
        snprintf(err, errlen, "line %lu: %s", (unsigned long)parser.problem_mark.line + 1,
                 parser.problem ? parser.problem : "YAML syntax error");
        yaml_parser_delete(&parser);
        return -EINVAL;
    }
    yaml_parser_delete(&parser);
    w->loaded = true;
    /* each entry costs a few nodes; aliases cannot make the walk longer than this */
    w->budget = 8 * (len + 16);
    return 0;
}

void sl_yw_free(sl_yw *w)
{
    if (w->loaded)
        yaml_document_delete(&w->doc);
    w->loaded = false;
    w->budget = 0;
}

yaml_node_t *sl_yw_root(sl_yw *w)
{
    if (!w->loaded)
        return NULL;
    yaml_node_t *root = yaml_document_get_root_node(&w->doc);
    return root && !sl_yw_empty(root) ? root : NULL;
}

yaml_node_t *sl_yw_node(sl_yw *w, int id)
{
    if (w->budget == 0)
        return NULL;
    w->budget--;
    return yaml_document_get_node(&w->doc, id);
}

bool sl_yw_empty(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.length == 0;
}

const char *sl_yw_scalar(const yaml_node_t *n, size_t *len)
{
    if (!n || n->type != YAML_SCALAR_NODE)
        return NULL;
    *len = n->data.scalar.length;
    return (const char *)n->data.scalar.value;
}

bool sl_yw_is(const yaml_node_t *n, const char *s)
{
    size_t l;
    const char *v = sl_yw_scalar(n, &l);
    return v && l == strlen(s) && !memcmp(v, s, l);
}

int sl_yw_fail(sl_yw *w, const yaml_node_t *n, int rc, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n)
        snprintf(w->err, w->errlen, "line %lu: %s", (unsigned long)n->start_mark.line + 1, msg);
    else
        snprintf(w->err, w->errlen, "%s", msg);
    return rc;
}

int sl_yw_each(sl_yw *w, const yaml_node_t *n, const char *what, sl_yw_pair_fn fn, void *ud)
{
    if (!n)
        return sl_yw_fail(w, NULL, -EINVAL, "quota file too complex");
    if (sl_yw_empty(n))
        return 0;
    if (n->type != YAML_MAPPING_NODE)
        return sl_yw_fail(w, n, -EINVAL, "%s must be a mapping", what);
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = sl_yw_node(w, p->key), *v = sl_yw_node(w, p->value);
        if (!k || !v)
            return sl_yw_fail(w, NULL, -EINVAL, "quota file too complex");
        if (w->scalar_keys && k->type != YAML_SCALAR_NODE)
            return sl_yw_fail(w, k, -EINVAL, "%s: a key must be a string", what);
        int rc = fn(w, k, v, ud);
        if (rc)
            return rc;
    }
    return 0;
}
