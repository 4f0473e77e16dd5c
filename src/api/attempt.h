/*
 * Levee's POST /attempt and POST /release under sluice's protections (protect/protect.h,
 * docs/protection.md): the Levee dialect of the protection service. Header values in, one
 * sl_answer out (api/answer.h), rendered by node/service.c.
 *
 *   POST /attempt   X-Resource, X-Prefix, X-Method, X-Req-Id as for Levee (api/levee.h), plus
 *                   X-Priority: critical | post | get | test  (absent: GET/HEAD/OPTIONS -> get,
 *                               another X-Method -> post, no method -> the configured default)
 *                   X-Concurrency: acquire  -> a lease: 200 carries X-Lease-Id
 *   POST /release   X-Lease-Id (X-Resource when the id does not carry it) -> 200, 404, 400
 *
 * The checks run in this order, each through the kill -> shadow -> enforce ladder
 * (protect/ladder.h): the global kill switch "*" (nothing else runs); the worker shedder (503; it
 * protects sluiced itself, so it must cost the least); the fleet shedder (503, acquire of a
 * non-critical call); the resource's concurrency limit (429, acquire); then Levee's rate quotas
 * (429). A rejection by a later check gives back the leases of the earlier ones (one engine call
 * each), and a rate quota is never charged for a call that does not run. Answers that reject say
 * so with Retry-After, the RateLimit header fields and a one-line reason; X-Sluice-Shadow and
 * X-Sluice-Killswitch name the limiters a switch admitted through.
 *
 * Switch names: "levee" (all rate quotas; the Levee namespace) or a quota's name, "concurrency",
 * "fleet", "shed", "*". On /attempt the limits are the server's: no client flag asks for shadow.
 */
#ifndef SLUICE_API_ATTEMPT_H
#define SLUICE_API_ATTEMPT_H

#include <stddef.h>
#include <stdint.h>

#include "api/answer.h"
#include "api/levee.h"
#include "protect/protect.h"

typedef struct sl_attempt_req {
    sl_levee_request levee;   /* X-Resource, X-Prefix, X-Method, X-Req-Id */
    const char *priority;     /* X-Priority; NULL = absent */
    size_t priority_len;
    const char *concurrency;  /* X-Concurrency; NULL = absent */
    size_t concurrency_len;
    const char *lease_id;     /* X-Lease-Id, for X-Concurrency: renew; NULL = absent */
    size_t lease_id_len;
} sl_attempt_req;

typedef struct sl_attempt_release_req {
    const char *lease_id;     /* X-Lease-Id */
    size_t lease_id_len;
    const char *resource;     /* X-Resource (optional when the lease id carries it) */
    size_t resource_len;
    const char *req_id;       /* X-Req-Id (echoed) */
    size_t req_id_len;
} sl_attempt_release_req;

/*
 * Decide one /attempt on `worker`'s thread. `lcfg` and `snap` as for sl_levee_attempt(); the rate
 * quotas and the leases are decided by the protection service's engine. The answer may point
 * into req (X-Req-Id) and into itself.
 */
void sl_attempt_decide(sl_protect *p, int worker, const sl_levee_config *lcfg,
                       const sl_quota_snap *snap, const sl_attempt_req *req, int64_t now_ms,
                       sl_answer *out);
void sl_attempt_release(sl_protect *p, const sl_attempt_release_req *req, int64_t now_ms,
                        sl_answer *out);

#endif
