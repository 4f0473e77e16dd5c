/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The option engine's shared internals (not for other modules: they use config/opt.h). The engine
 * is four files (see config/opt.c); what its sources (optsrc.c) and rendering (opthelp.c) need of
 * the table and target code in opt.c is declared here: where an option's field is, the list
 * helpers, the type's word for messages, the short-name lookup and sl_opt_apply, the one place a
 * value in text becomes a stored, range-checked value.
 */
#ifndef SLUICE_CONFIG_OPT_INT_H
#define SLUICE_CONFIG_OPT_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "config/opt.h"

/* The option's field in the target struct. */
static inline void *sl_opt_field(void *target, const sl_opt *o)
{
    return (char *)target + o->offset;
}

/* The option with this short name (-c), or NULL. */
const sl_opt *sl_opt_find_short(const sl_opt_table *t, char c);

/* Free a list's items and empty it. */
void sl_opt_list_clear(sl_opt_list *l);
/* Append a copy of s[0..n). 0 or -ENOMEM. */
int sl_opt_list_push(sl_opt_list *l, const char *s, size_t n);

/* "integer", "duration", ... for messages. */
const char *sl_opt_type_word(sl_opt_type t);

/*
 * Parse `text` for option `o` and store it. `append` adds to a list instead of replacing it.
 * `source` says where the text came from, for the message ("flag --x", "env X", "file f:3").
 */
int sl_opt_apply(void *target, const sl_opt *o, const char *text, bool append, const char *source,
                 char *err, size_t errlen);

/* sl_opt_apply, then the origin recorded (tr->origin) when it succeeded; a failure is added to
 * tr->diag when there is one. What the sources call. */
int sl_opt_store(const sl_opt_table *t, const sl_opt_track *tr, void *target, const sl_opt *o,
                 const char *text, bool append, const char *source, char *err, size_t errlen);


#endif
