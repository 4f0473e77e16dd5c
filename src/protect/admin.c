/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The switchboard's admin endpoint (see admin.h), with jansson for both directions: the bodies
 * are small and rare, so the reference library is the right tool here.
 */
#include "protect/admin.h"

#include <errno.h>
#include <string.h>

#include <jansson.h>

static void admin_json(sl_admin_response *out, int status, json_t *j)
{
    out->status = status;
    out->content_type = "application/json";
    out->body = j ? json_dumps(j, JSON_COMPACT) : NULL;
    out->body_len = out->body ? strlen(out->body) : 0;
    json_decref(j);
}

static void admin_error(sl_admin_response *out, int status, const char *msg)
{
    admin_json(out, status, json_pack("{s:s}", "error", msg));
}

static int list_switch(void *ud, const char *name, size_t len, sl_killswitch_mode mode, bool admin)
{
    json_array_append_new(ud, json_pack("{s:s%,s:s,s:s}", "name", name, len, "mode",
                                        sl_killswitch_mode_name(mode), "origin",
                                        admin ? "admin" : "source"));
    return 0;
}

static int list_conc(void *ud, const char *key, size_t len, const sl_killswitch_conc *c)
{
    static const char dflt[] = "default";
    json_array_append_new(ud, json_pack("{s:s%,s:I,s:I}", "key", len ? key : dflt,
                                        len ? len : sizeof dflt - 1, "limit", (json_int_t)c->limit,
                                        "duration_ms", (json_int_t)c->duration_ms));
    return 0;
}

static void post(sl_killswitch *ks, const uint8_t *body, size_t len, sl_admin_response *out)
{
    json_error_t jerr;
    json_t *j = json_loadb((const char *)body, len, 0, &jerr);
    json_t *jn = j ? json_object_get(j, "name") : NULL;
    json_t *jon = j ? json_object_get(j, "on") : NULL;
    json_t *jm = j ? json_object_get(j, "mode") : NULL;
    int mode = -EINVAL;
    if (jon && json_is_boolean(jon) && !jm)
        mode = json_is_true(jon) ? SL_KILLSWITCH_KILLED : SL_KILLSWITCH_ENFORCE;
    else if (jm && json_is_string(jm) && !jon)
        mode = sl_killswitch_parse_mode(json_string_value(jm), json_string_length(jm));
    if (!j || !json_is_object(j) || !jn || !json_is_string(jn) || mode < 0) {
        json_decref(j);
        admin_error(out, 400,
                    "expected {\"name\": \"N\", \"on\": true|false} or {\"name\": \"N\", "
                    "\"mode\": \"on\"|\"shadow\"|\"off\"}");
        return;
    }
    int rc = sl_killswitch_set(ks, json_string_value(jn), json_string_length(jn),
                               (sl_killswitch_mode)mode);
    if (rc) {
        json_decref(j);
        admin_error(out, rc == -ENOSPC ? 507 : 400,
                    rc == -ENOSPC ? "too many switches" : "bad switch name");
        return;
    }
    admin_json(out, 200, json_pack("{s:O,s:s,s:s}", "name", jn, "mode",
                                   sl_killswitch_mode_name((sl_killswitch_mode)mode), "origin",
                                   "admin"));
    json_decref(j);
}

static void get(sl_protect *p, sl_killswitch *ks, sl_admin_response *out)
{
    sl_killswitch_status st;
    sl_killswitch_status_get(ks, &st);
    json_t *sw = json_array(), *cc = json_array(), *shed = json_array();
    sl_killswitch_visit(ks, list_switch, NULL, sw);
    sl_killswitch_visit(ks, NULL, list_conc, cc);
    for (int i = 0; i < sl_protect_workers(p); i++)
        json_array_append_new(shed, json_pack("{s:i,s:f,s:f}", "worker", i, "level",
                                              sl_protect_shed_level(p, i), "utilization",
                                              sl_protect_shed_util(p, i)));
    json_t *fleet = json_null();
    sl_killswitch_reader r = {0};
    const sl_killswitch_snap *s = sl_killswitch_read(ks, &r);
    const sl_killswitch_fleet *f = sl_killswitch_snap_fleet(s);
    if (f)
        fleet = json_pack("{s:I,s:f,s:I}", "capacity", (json_int_t)f->capacity, "reserve",
                          f->reserve, "duration_ms", (json_int_t)f->duration_ms);
    sl_killswitch_reader_release(&r);
    admin_json(out, 200,
               json_pack("{s:s,s:b,s:b,s:o,s:o,s:o,s:o}", "source",
                         sl_killswitch_source_name(st.source), "loaded", st.loaded, "connected",
                         st.connected, "switches", sw, "concurrency", cc, "fleet", fleet, "shed",
                         shed));
}

void sl_admin_handle(sl_protect *p, const char *method, const uint8_t *body, size_t len,
                     sl_admin_response *out)
{
    memset(out, 0, sizeof *out);
    sl_killswitch *ks = sl_protect_cfg(p)->switches;
    if (!ks)
        admin_error(out, 503, "no switchboard on this node");
    else if (!strcmp(method, "POST"))
        post(ks, body, len, out);
    else if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        admin_error(out, 405, "use GET or POST");
    else
        get(p, ks, out);
}
