/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Redis store's scripts, sans-I/O: which algorithms have a server-side script, the Lua
 * sources (src/redis/lua/NAME.lua, embedded at build time), their SHA1s, the command that runs one
 * request (EVALSHA, or EVAL after a NOSCRIPT) and the reading of its answer. Everything here is
 * pure: the connection that sends the commands is rstore.c. Each script decides any number of
 * keys of its algorithm in one call, in order.
 *
 * A call is EVALSHA <sha> n key1..keyn arg1..argn: argk is item k's numbers (sl_rscript_args_of)
 * in decimal, separated by single spaces (text, so that an operator or redis-benchmark can call a
 * script by hand; CONCURRENCY's lease ids are hex fields of it), or the empty string when item k
 * is the same text as item k-1 (a call's items are often one item on many keys: Redis then
 * receives, and Lua interns, the text once); then, when no key is there twice, one more argument
 * "d" (distinct: the script need not look for a key repeated, which costs Redis a table insert
 * per key; a call by hand without it is decided the same). The answer is one bulk string,
 * the items' records one after the other, each sl_rscript_answer_size() bytes: six little-endian
 * IEEE doubles status limit remaining reset_time retry_after delay_ms (48 bytes), or for
 * CONCURRENCY five doubles then the lease taken as 16 hex digits, all '0' for none (56 bytes).
 *
 * A request is validated and its times computed in C exactly as the engine does (sl_alg_decide:
 * t = created_at or now; Gregorian expirations), so a script only does the arithmetic on the
 * key's state. Keys are "sl:{" <name length> ":" <name> ":" <unique_key> "}": the length keeps
 * ("a:b", "c") and ("a", "b:c") apart, and the braces make the key a Redis Cluster hash tag, so
 * that a key and the keys beside it (SLIDING_LOG's "<key>|log", CONCURRENCY's "<key>|leases")
 * share a slot whatever the name and key hold (the first "}" after the "{" is at the latest the
 * key's last byte).
 */
#ifndef SLUICE_REDIS_RSCRIPT_H
#define SLUICE_REDIS_RSCRIPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sluice/engine.h"

/* Longest key: "sl:{" + 4 digits + ":" + name + ":" + unique_key + "}". */
#define SL_RSCRIPT_KEY_MAX (4 + 4 + 1 + SL_MAX_NAME_LEN + 1 + SL_MAX_KEY_LEN + 1)
#define SL_RSCRIPT_ARGS 16 /* most numbers in one item's argument */

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

/* One request's script arguments (the fields of its item's ARGV), computed as the engine would. */
typedef struct sl_rscript_args {
    int n;
    char num[SL_RSCRIPT_ARGS][24];
    size_t len[SL_RSCRIPT_ARGS];
    int64_t t;         /* the decision time (created_at or now) */
} sl_rscript_args;

/*
 * The arguments deciding `req` at `now` (a request sl_request_validate() and
 * sl_request_check_time() accepted). margin_ms: how long after the state's own expiry Redis keeps
 * the key; lease: CONCURRENCY's id for the lease an acquire takes (sl_rscript_new_lease; 0 for
 * none). NULL, or a per-item error: no script for the algorithm (sl_rscript_err_unsupported),
 * or a Gregorian interval the calendar cannot give. a NULL: only the check, nothing formatted.
 */
const char *sl_rscript_args_of(sl_rscript_args *a, const sl_request *req, int64_t now,
                               const sl_engine_config *cfg, int64_t margin_ms, uint64_t lease);

/* The id of the lease req takes if it is a CONCURRENCY acquire (64 random bits, never 0: ids are
 * unguessable and, across every node on the same Redis, unique but for a 2^-64 chance per pair),
 * else 0. Drawn once per item, so that a script call sent again asks for the same lease. */
uint64_t sl_rscript_new_lease(const sl_request *req);

/* The key of req: writes at most SL_RSCRIPT_KEY_MAX bytes (no NUL) and returns the length. */
size_t sl_rscript_key(char *buf, const sl_request *req);

/*
 * One script call for many requests of one algorithm: EVALSHA <sha> n key1..keyn arg1..argn
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
    void *scratch;      /* the keys sorted, to find one repeated */
    size_t scratch_cap;
} sl_rscript_cmd;

/* One item of a script call: a request sl_rscript_args_of accepted, and its node time. */
typedef struct sl_rscript_item {
    const sl_request *req;
    int64_t now;
    uint64_t lease; /* sl_rscript_new_lease(req) */
} sl_rscript_item;

/* EVALSHA <sha> n key1..keyn arg1..argn (EVAL with `eval`): one call for items[0..n-1], all of
 * algorithm alg. 0, -EINVAL (no script for alg, n == 0), or -ENOMEM. */
int sl_rscript_cmd_build(sl_rscript_cmd *c, int32_t alg, bool eval, const sl_rscript_item *items,
                         size_t n, const sl_engine_config *cfg, int64_t margin_ms);
void sl_rscript_cmd_free(sl_rscript_cmd *c);

/* Bytes of one item's answer record in a script call's reply string (0: no script for alg). */
size_t sl_rscript_answer_size(int32_t alg);

/*
 * Item k's answer, read from the reply string `buf` of `len` bytes (a call of n items: len must be
 * n * sl_rscript_answer_size(alg); the caller checks), into *resp (lease_id set for CONCURRENCY);
 * t: the item's decision time. Numbers saturate to int64 (>= 2^63: INT64_MAX, <= -2^63:
 * INT64_MIN, NaN: 0, else truncated toward zero); status -1 is the error sl_rscript_err_range,
 * -2 CONCURRENCY's lease not found. 0, or -EPROTO (no record k, a status or lease id that is not
 * one).
 */
int sl_rscript_answer_read(int32_t alg, const char *buf, size_t len, size_t k, int64_t t,
                           const sl_engine_config *cfg, sl_response *resp);

#endif
