/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_file: read a whole file into memory, with a byte cap (a configuration file is input the
 * process does not control, and must not be able to exhaust its memory).
 */
#ifndef SLUICE_BASE_FILE_H
#define SLUICE_BASE_FILE_H

#include <stddef.h>

/* flags for sl_file_read */
#define SL_FILE_REGULAR 1u /* refuse anything but a regular file (a directory, a FIFO, a device) */
#define SL_FILE_SECRET 2u  /* a token, key or secret: refuse a file group or others may read or
                              write (sl_file_check_secret) */

/*
 * Read the file at path: 0 and a malloc'd buffer in *out holding its *len bytes followed by a NUL
 * (free() it), or a negative errno with a message "<path>: <reason>" in err (when errlen > 0):
 *   -<errno of open()>   the file cannot be opened ("<path>: No such file or directory")
 *   -EINVAL              SL_FILE_REGULAR was given and it is not a regular file
 *   -EACCES              SL_FILE_SECRET was given and group or others may read or write it
 *   -EFBIG               it holds more than max bytes ("<path>: larger than <max> bytes")
 *   -EIO                 a read failed ("<path>: read error")
 *   -ENOMEM
 */
int sl_file_read(const char *path, size_t max, unsigned flags, char **out, size_t *len, char *err,
                 size_t errlen);

/* Whether the file at path may hold a secret: 0, or -EACCES when group or others have any access
 * to it (one exception: root:<this process's non-root group> with group read only, 0440, the
 * mode Kubernetes gives a Secret mounted for a pod with fsGroup) ("<path>: readable by group or others (mode 0644): chmod 600 <path> (...)"), or -errno of
 * stat(). For the files read by another library (TLS keys); sl_file_read's SL_FILE_SECRET checks
 * the opened file itself. */
int sl_file_check_secret(const char *path, char *err, size_t errlen);

#endif
