/*
 * The Redis store's scripts, sans-I/O: which algorithms have a server-side script, the Lua
 * sources (src/store/lua/NAME.lua, embedded at build time), their SHA1s, the command that runs one
 * request (EVALSHA, or EVAL after a NOSCRIPT) and the reading of its answer. Everything here is
 * pure: the connection that sends the commands is rstore.c.
 *
 * A request is validated and its times computed in C exactly as the engine does (sl_alg_decide:
 * t = created_at or now; Gregorian expirations), so a script only does the arithmetic on the
 * key's state. Keys are "sl:" <name length> ":" <name> ":" <unique_key>: the length keeps
 * ("a:b", "c") and ("a", "b:c") apart.
 */
#ifndef SLUICE_STORE_RSCRIPT_H
#define SLUICE_STORE_RSCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/engine.h"

/* Longest key: "sl:" + 4 digits + ":" + name + ":" + unique_key. */
#define SL_RSCRIPT_KEY_MAX (3 + 4 + 1 + SL_MAX_NAME_LEN + 1 + SL_MAX_KEY_LEN)
#define SL_RSCRIPT_ARGS 16 /* most ARGV of a script */
#define SL_RSCRIPT_ARGC (4 + SL_RSCRIPT_ARGS) /* EVALSHA sha 1 key ARGV... */
#define SL_RSCRIPT_ANSWER 5 /* status limit remaining reset_time retry_after */

/* The per-item error of an algorithm the Redis store has no script for. */
extern const char sl_rscript_err_unsupported[];

typedef struct sl_rscript {
    const char *src;   /* Lua source */
    size_t len;
    const char *sha;   /* its SHA1, lower-case hex (computed by CMake's file(SHA1)) */
} sl_rscript;

/* The script of an algorithm, or NULL when it has none (sl_rscript_err_unsupported). */
const sl_rscript *sl_rscript_of(int32_t algorithm);

/* One request's command, with its argument storage. */
typedef struct sl_rscript_cmd {
    int argc;
    const char *argv[SL_RSCRIPT_ARGC];
    size_t argvlen[SL_RSCRIPT_ARGC];
    char key[SL_RSCRIPT_KEY_MAX];
    char num[SL_RSCRIPT_ARGS][24];
    int64_t t;         /* the decision time (created_at or now) */
} sl_rscript_cmd;

/*
 * Build the command deciding `req` at `now` (a request sl_request_validate() and
 * sl_request_check_time() accepted, whose algorithm has a script): EVALSHA <sha> when `eval` is
 * false, else EVAL <source> (which also loads the script). margin_ms: how long after the state's
 * own expiry Redis keeps the key. NULL, or a per-item error (a Gregorian interval the calendar
 * cannot give).
 */
const char *sl_rscript_build(sl_rscript_cmd *cmd, const sl_request *req, int64_t now,
                             const sl_engine_config *cfg, bool eval, int64_t margin_ms);

/* Turn a script's answer (n integers: the decimal strings of its reply) into *resp. 0, or
 * -EPROTO when it is not one. */
int sl_rscript_answer(const long long *v, size_t n, int64_t t, const sl_engine_config *cfg,
                      sl_response *resp);

#endif
