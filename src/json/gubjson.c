/* SPDX-License-Identifier: Apache-2.0 */
/*
 * protojson over protobuf-c descriptors (see gubjson.h for the conventions): the parse entry point.
 *
 * Parsing has two implementations of one behaviour, each in its own file:
 *
 *   gubjson_ref.c, the reference, is the definition: a byte pre-scan bounds what jansson builds,
 *   jansson does the JSON syntax, and a walk of its tree against the descriptor fills the struct.
 *
 *   gubjson_fast.c, written by hand, is what runs: one pass over the bytes straight into the
 *   struct, allocating only the message itself. It accepts exactly the documents the reference
 *   accepts and builds the same struct; whatever it is not sure of, it declines, and the reference
 *   then parses the body and reports the error in jansson's words. Errors are rare, so they may
 *   cost two parses.
 *
 * The helpers both share (field lookup by proto or camelCase name, maps, integer and enum
 * conversions) are in protojson.c; the printer is gubjson_print.c.
 */
#include "json/gubjson.h"

#include <errno.h>
#include <stdio.h>

#include "json/gubjson_fast.h"
#include "json/gubjson_ref.h"

void sl_gubjson_limits_default(sl_gubjson_limits *lim)
{
    lim->max_body = SL_GUBJSON_DEFAULT_MAX_BODY;
    lim->max_depth = SL_GUBJSON_DEFAULT_MAX_DEPTH;
    lim->max_tokens = SL_GUBJSON_DEFAULT_MAX_TOKENS;
}

int sl_gubjson_parse_with(sl_gubjson_parser which, const ProtobufCMessageDescriptor *desc,
                          const char *body, size_t len, const sl_gubjson_limits *lim,
                          ProtobufCAllocator *alloc, ProtobufCMessage **out, char *err,
                          size_t errsz)
{
    sl_gubjson_limits dl;
    if (!lim) {
        sl_gubjson_limits_default(&dl);
        lim = &dl;
    }
    if (errsz)
        err[0] = 0;
    *out = NULL;
    if (len > lim->max_body) {
        if (errsz)
            snprintf(err, errsz, "request body too large: %zu bytes (the maximum is %zu)", len,
                     lim->max_body);
        return -EMSGSIZE;
    }
    if (which != SL_GUBJSON_PARSE_REFERENCE) {
        int rc = sl_gubjson_fast_parse(desc, body, len, lim, alloc, out);
        if (rc == 0)
            return 0;
        if (which == SL_GUBJSON_PARSE_FAST) {
            if (errsz)
                snprintf(err, errsz, "declined by the hand-written parser");
            return rc;
        }
    }
    return sl_gubjson_ref_parse(desc, body, len, lim, alloc, out, err, errsz);
}

int sl_gubjson_parse(const ProtobufCMessageDescriptor *desc, const char *body, size_t len,
                     const sl_gubjson_limits *lim, ProtobufCAllocator *alloc,
                     ProtobufCMessage **out, char *err, size_t errsz)
{
    return sl_gubjson_parse_with(SL_GUBJSON_PARSE_AUTO, desc, body, len, lim, alloc, out, err,
                                 errsz);
}

int sl_gubjson_parse_get_rate_limits_req(const char *body, size_t len, const sl_gubjson_limits *lim,
                                         ProtobufCAllocator *alloc,
                                         Pb__Gubernator__GetRateLimitsReq **out, char *err,
                                         size_t errsz)
{
    ProtobufCMessage *m;
    int rc = sl_gubjson_parse(&pb__gubernator__get_rate_limits_req__descriptor, body, len, lim,
                              alloc, &m, err, errsz);
    *out = rc ? NULL : (Pb__Gubernator__GetRateLimitsReq *)m;
    return rc;
}
