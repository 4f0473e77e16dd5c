/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_member: the member status's names (see member.h), in one table so that the metrics' labels,
 * the gossip log lines and the tests all spell a status the same way.
 */
#include "base/member.h"

static const char *const names[SL_MEMBER_NSTATUS] = {"alive", "suspect", "dead", "left"};

const char *sl_member_status_name(sl_member_status st)
{
    return (unsigned)st < SL_MEMBER_NSTATUS ? names[st] : "unknown";
}
