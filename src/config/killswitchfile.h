/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The switchboard's sections of the quota file (config/quotafile.h holds the file's limit: and
 * factor: sections; both parsers read the same file and skip each other's sections):
 *
 *     killswitch:    {"*": off, search: on, new-limit: shadow}
 *     concurrency:   {default: {limit: 20, duration: 60s}, key: {search: {limit: 5, duration: 30s}}}
 *     fleet:         {capacity: 200, reserve: 0.2, duration: 60s}
 *
 * A switch is on, shadow or off (the words of sl_killswitch_parse_mode); a duration is
 * milliseconds or sluiced's duration syntax. Unknown fields are errors, naming the line.
 */
#ifndef SLUICE_CONFIG_KILLSWITCHFILE_H
#define SLUICE_CONFIG_KILLSWITCHFILE_H

#include <stddef.h>

#include "config/killswitch.h"

/* Parse the sections of a quota-file text into `b` (which should be empty). 0, or -EINVAL with
 * the line in err (b then holds a partial board: parse into a fresh one). */
int sl_killswitchfile_parse(const char *text, size_t len, sl_killswitch_board *b, char *err,
                            size_t errlen);
/* Read (at most SL_QUOTAFILE_MAX_BYTES) and parse a file: as above, with "<path>: " before the
 * reason, plus the errors of sl_file_read. */
int sl_killswitchfile_load(const char *path, sl_killswitch_board *b, char *err, size_t errlen);
/* Parse into a throw-away board (for tests and for checking a file): 0, or -EINVAL with the line
 * in err. */
int sl_killswitchfile_check_text(const char *text, size_t len, char *err, size_t errlen);

#endif
