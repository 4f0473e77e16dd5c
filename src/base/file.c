/* SPDX-License-Identifier: Apache-2.0 */
/* Whole-file reading with a byte cap (see file.h). */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/grow.h"

__attribute__((format(printf, 4, 5))) static int fail(char *err, size_t errlen, int rc,
                                                      const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* read(2), retried when a signal interrupts it. */
static ssize_t read_some(int fd, void *p, size_t n)
{
    ssize_t r;
    do
        r = read(fd, p, n);
    while (r < 0 && errno == EINTR);
    return r;
}

/* The refusal of a secret file with mode m, worded with the fix. */
static int secret_mode_fail(const char *path, mode_t m, char *err, size_t errlen)
{
    return fail(err, errlen, -EACCES, "%s: readable by group or others (mode %04o): chmod 600 %s "
                "(a token, key or secret file must be its owner's alone)", path,
                (unsigned)(m & 07777), path);
}

/* Whether a secret file's mode keeps it to this process's user: no access for others, none for
 * the group either, but for one case: a file root gave to this process's own (non-root) group to
 * read, root:<our group> 0440, which is how Kubernetes mounts a Secret for a pod with fsGroup
 * (the group is the pod's; a non-root container could not read a root:root 0400 file at all). */
static bool secret_mode_ok(const struct stat *st)
{
    mode_t m = st->st_mode;
    if (m & S_IRWXO)
        return false;
    if (!(m & S_IRWXG))
        return true;
    gid_t g = getegid();
    return !(m & (S_IWGRP | S_IXGRP)) && st->st_uid == 0 && g != 0 && st->st_gid == g;
}

int sl_file_check_secret(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st)) {
        int e = errno;
        return fail(err, errlen, -e, "%s: %s", path, strerror(e));
    }
    return secret_mode_ok(&st) ? 0 : secret_mode_fail(path, st.st_mode, err, errlen);
}

int sl_file_read(const char *path, size_t max, unsigned flags, char **out, size_t *len, char *err,
                 size_t errlen)
{
    if (max >= SIZE_MAX / 2)
        max = SIZE_MAX / 2 - 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == EACCES) /* which permission is missing, for whom */
            return fail(err, errlen, -e, "%s: permission denied: uid %ld cannot read it", path,
                        (long)getuid());
        return fail(err, errlen, -e, "%s: %s", path, strerror(e));
    }
    struct stat st;
    bool have_st = fstat(fd, &st) == 0;
    if ((flags & SL_FILE_REGULAR) && (!have_st || !S_ISREG(st.st_mode))) {
        close(fd);
        return fail(err, errlen, -EINVAL, "%s: not a regular file", path);
    }
    if ((flags & SL_FILE_SECRET) && (!have_st || !secret_mode_ok(&st))) {
        close(fd);
        return have_st ? secret_mode_fail(path, st.st_mode, err, errlen)
                       : fail(err, errlen, -EIO, "%s: cannot stat", path);
    }
    /* a regular file's size is a hint for the first allocation; the read loop is the truth */
    size_t cap = 4096;
    if (have_st && S_ISREG(st.st_mode) && st.st_size > 0) {
        if ((uint64_t)st.st_size > max) {
            close(fd);
            return fail(err, errlen, -EFBIG, "%s: larger than %zu bytes", path, max);
        }
        cap = (size_t)st.st_size + 1;
    }
    if (cap > max + 1)
        cap = max + 1;
    char *buf = malloc(cap);
    size_t n = 0;
    int rc = buf ? 0 : fail(err, errlen, -ENOMEM, "%s: out of memory", path);
    while (!rc) {
        /* when full (one byte is kept for the NUL), read one byte to learn whether there is more */
        bool full = n + 1 == cap;
        char extra;
        ssize_t r = read_some(fd, full ? &extra : buf + n, full ? 1 : cap - 1 - n);
        if (r < 0)
            rc = fail(err, errlen, -EIO, "%s: read error", path);
        if (r <= 0)
            break;
        if (!full) {
            n += (size_t)r;
            continue;
        }
        if (n >= max) {
            rc = fail(err, errlen, -EFBIG, "%s: larger than %zu bytes", path, max);
            break;
        }
        if (sl_grow(&buf, &cap, n + 1, 1, 0, max + 1)) { /* x2, at most max + 1 */
            rc = fail(err, errlen, -ENOMEM, "%s: out of memory", path);
            break;
        }
        buf[n++] = extra;
    }
    close(fd);
    if (!rc && n > max)
        rc = fail(err, errlen, -EFBIG, "%s: larger than %zu bytes", path, max);
    if (rc) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = n;
    return 0;
}
