/*
 * The Redis store's scripts, sans-I/O: which algorithms have a server-side script, the Lua
 * sources (src/store/lua/NAME.lua, embedded at build time), their SHA1s, the command that runs one
 * request (EVALSHA, or EVAL after a NOSCRIPT) and the reading of its answer. Everything here is
 * pure: the connection that sends the commands is rstore.c. Each script decides any number of
 * keys of its algorithm in one call, in order.
 *
 * A request is validated and its times computed in C exactly as the engine does (sl_alg_decide:
 * t = created_at or now; Gregorian expirations), so a script only does the arithmetic on the
 * key's state. Keys are "sl:{" <name length> ":" <name> ":" <unique_key> "}": the length keeps
 * ("a:b", "c") and ("a", "b:c") apart, and the braces make the key a Redis Cluster hash tag, so
 * that a key and the keys beside it (SLIDING_LOG's "<key>|log", CONCURRENCY's "<key>|leases")
 * share a slot whatever the name and key hold (the first "}" after the "{" is at the latest the
 * key's last byte).
 */
#ifndef SLUICE_STORE_RSCRIPT_H
#define SLUICE_STORE_RSCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/engine.h"

/* Longest key: "sl:{" + 4 digits + ":" + name + ":" + unique_key + "}". */
#define SL_RSCRIPT_KEY_MAX (4 + 4 + 1 + SL_MAX_NAME_LEN + 1 + SL_MAX_KEY_LEN + 1)
#define SL_RSCRIPT_ARGS 16 /* most ARGV of a script */
#define SL_RSCRIPT_ANSWER 6 /* per item: status limit remaining reset_time retry_after delay_ms */

/* The per-item error of an algorithm the Redis store has no script for. */
extern const char sl_rscript_err_unsupported[];
/* The per-item error of a GCRA or SLIDING_WINDOW request whose numbers Redis's Lua (doubles)
 * cannot hold exactly (a script's status -1). */
extern const char sl_rscript_err_range[];

typedef struct sl_rscript {
    const char *src;   /* Lua source */
    size_t len;
    const char *sha;   /* its SHA1, lower-case hex (computed by CMake's file(SHA1)) */
} sl_rscript;

/* The script of an algorithm, or NULL when it has none (sl_rscript_err_unsupported). */
const sl_rscript *sl_rscript_of(int32_t algorithm);

/* One request's script arguments (ARGV of its item), computed as the engine would. */
typedef struct sl_rscript_args {
    int n;
    char num[SL_RSCRIPT_ARGS][24];
    size_t len[SL_RSCRIPT_ARGS];
    int64_t t;         /* the decision time (created_at or now) */
} sl_rscript_args;

/*
 * The arguments deciding `req` at `now` (a request sl_request_validate() and
 * sl_request_check_time() accepted). margin_ms: how long after the state's own expiry Redis keeps
 * the key. NULL, or a per-item error: no script for the algorithm (sl_rscript_err_unsupported),
 * or a Gregorian interval the calendar cannot give.
 */
const char *sl_rscript_args_of(sl_rscript_args *a, const sl_request *req, int64_t now,
                               const sl_engine_config *cfg, int64_t margin_ms);

/* The key of req: writes at most SL_RSCRIPT_KEY_MAX bytes (no NUL) and returns the length. */
size_t sl_rscript_key(char *buf, const sl_request *req);

/*
 * One script call for many requests of one algorithm: EVALSHA <sha> n key1..keyn args1..argsn
 * (EVAL <source> ... with `eval`, which also loads the script). The argument arrays and their
 * bytes are the command's own, grown as needed and reused from call to call.
 */
typedef struct sl_rscript_cmd {
    int argc;
    const char **argv;
    size_t *argvlen;
    size_t args_cap;
    char *bytes;
    size_t bytes_cap;
} sl_rscript_cmd;

/* One item of a script call: the request and the time it is decided at. */
typedef struct sl_rscript_item {
    const sl_request *req;
    int64_t now;
} sl_rscript_item;

/* Build the call deciding items[0..n-1] (each accepted by sl_rscript_args_of, all of algorithm
 * `alg`). 0, or -ENOMEM. */
int sl_rscript_cmd_build(sl_rscript_cmd *c, int32_t alg, bool eval, const sl_rscript_item *items,
                         size_t n, const sl_engine_config *cfg, int64_t margin_ms);
void sl_rscript_cmd_free(sl_rscript_cmd *c);

/* Turn one item's answer (n integers: the decimal strings of its part of the reply) into *resp
 * (status -1: the error sl_rscript_err_range; -2: CONCURRENCY's lease not found). The sixth is
 * delay_ms, except for CONCURRENCY, whose sixth is the lease id in hex (the caller's to read).
 * 0, or -EPROTO when it is not one. */
int sl_rscript_answer(const long long *v, size_t n, int64_t t, const sl_engine_config *cfg,
                      sl_response *resp);

#endif
