/* SPDX-License-Identifier: Apache-2.0 */
/*
 * --state-dir's file I/O (see statedir.h): the snapshot written atomically, read through mmap and
 * validated whole before loading, and the optional periodic writer thread.
 */
#include "node/statedir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auth/secret.h"
#include "core/snapshot.h"
#include "core/store.h"
#include "sluice/clock.h"

#define SNAP_NAME "sluice.snapshot"
#define CHUNK (1u << 20)

/* CPU time of the calling thread (ns): the figure that means something on a shared machine. */
static int64_t cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int path_of(char *out, size_t cap, const char *dir, const char *suffix)
{
    int n = snprintf(out, cap, "%s/%s%s", dir, SNAP_NAME, suffix);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static bool has_key(const sl_statedir_key *key)
{
    return key && key->p && key->n;
}

static bool has_trailer(const uint8_t *p, size_t len)
{
    return len >= SL_SNAPSHOT_HEADER + SL_STATEDIR_TRAILER &&
           memcmp(p + len - SL_STATEDIR_TRAILER, SL_STATEDIR_MAC_MAGIC, 8) == 0;
}

/* Whether the trailer of p[0..len) holds the tag of its body and header under key k[0..kn). */
static bool tag_verifies_under(const uint8_t *p, size_t len, const uint8_t *k, size_t kn)
{
    if (!has_trailer(p, len) || !k || !kn)
        return false;
    size_t body = len - SL_STATEDIR_TRAILER;
    sl_secret_mac *m;
    uint8_t tag[SL_SECRET_MAC_LEN];
    if (sl_secret_mac_new(k, kn, &m))
        return false;
    bool ok = !sl_secret_mac_update(m, p + SL_SNAPSHOT_HEADER, body - SL_SNAPSHOT_HEADER) &&
              !sl_secret_mac_update(m, p, SL_SNAPSHOT_HEADER) && !sl_secret_mac_final(m, tag) &&
              sl_secret_mac_equal(tag, p + body + 8);
    sl_secret_mac_free(m);
    return ok;
}

/* ... under the key, or the old one. */
static bool tag_verifies(const uint8_t *p, size_t len, const sl_statedir_key *key)
{
    return tag_verifies_under(p, len, key->p, key->n) ||
           tag_verifies_under(p, len, key->old, key->old_n);
}

bool sl_statedir_read(const char *dir, const sl_alg_config *cfg, const sl_statedir_key *key,
                      sl_logger *log, sl_statedir_snap *snap)
{
    memset(snap, 0, sizeof *snap);
    int64_t t0 = sl_mono_ns(), c0 = cpu_ns();
    char path[4096];
    if (path_of(path, sizeof path, dir, "")) {
        sl_log_warn(log, "state-dir: path too long, starting empty");
        return false;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT)
            sl_log_warn(log, "snapshot %s skipped, starting empty: %s", path, strerror(errno));
        return false;
    }
    struct stat sb;
    const char *why = NULL;
    void *map = NULL;
    if (fstat(fd, &sb) || !S_ISREG(sb.st_mode))
        why = "not a regular file";
    else if (sb.st_size == 0)
        why = "empty file";
    else if ((map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
        map = NULL;
        why = strerror(errno);
    }
    close(fd);
    sl_snapshot_info info;
    size_t len = why ? 0 : (size_t)sb.st_size;
    if (!why && has_key(key)) {
        if (!tag_verifies(map, len, key))
            why = "not authenticated by the cluster secret (written without it, with another, "
                  "or altered)";
        len -= SL_STATEDIR_TRAILER;
    } else if (!why && has_trailer(map, len)) {
        len -= SL_STATEDIR_TRAILER; /* authenticated, but no key to check it with */
    }
    if (!why)
        sl_snapshot_check(map, len, cfg, &info, &why); /* sets why if invalid */
    if (why) {
        sl_log_warn(log, "snapshot %s skipped, starting empty: %s", path, why);
        if (map)
            munmap(map, (size_t)sb.st_size);
        return false;
    }
    snap->map = map;
    snap->map_len = (size_t)sb.st_size;
    snap->len = len;
    snap->seed = info.seed;
    snap->keys = info.keys;
    snap->flags = info.flags;
    snap->start_ns = t0;
    snap->start_cpu_ns = c0;
    return true;
}

void sl_statedir_load(sl_statedir_snap *snap, sl_engine *e, const sl_alg_config *cfg,
                      int64_t now, sl_logger *log)
{
    if (!snap->map)
        return;
    if (!e) {
        munmap(snap->map, snap->map_len);
        snap->map = NULL;
        return;
    }
    int64_t t0 = snap->start_ns, c0 = snap->start_cpu_ns;
    size_t loaded = 0, dropped = 0;
    int rc = sl_snapshot_load(snap->map, snap->len, cfg, sl_engine_store(e), now, &loaded,
                              &dropped);
    int64_t t1 = sl_mono_ns(), c1 = cpu_ns();
    if (rc)
        sl_log_error(log, "snapshot load stopped after %zu keys: %s", loaded, strerror(-rc));
    /* ms, cpu_ms: from opening the file (validation included) to the last key imported */
    sl_log_info(log, "snapshot loaded keys=%zu expired=%zu bytes=%zu ms=%.1f cpu_ms=%.1f", loaded,
                dropped, snap->len, (double)(t1 - t0) / 1e6, (double)(c1 - c0) / 1e6);
    munmap(snap->map, snap->map_len);
    snap->map = NULL;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int write_snapshot(int fd, sl_engine *e, unsigned flags, const sl_statedir_key *key,
                          int64_t now, sl_snapshot_writer *w)
{
    int rc = sl_snapshot_writer_init(w, sl_engine_store(e), sl_engine_hash_seed(e), flags, now);
    if (rc)
        return rc;
    sl_secret_mac *m = NULL;
    if (has_key(key) && (rc = sl_secret_mac_new(key->p, key->n, &m)))
        return rc;
    uint8_t *buf = malloc(CHUNK);
    if (!buf) {
        sl_secret_mac_free(m);
        return -ENOMEM;
    }
    uint8_t hdr[SL_SNAPSHOT_HEADER] = {0};
    rc = write_all(fd, hdr, sizeof hdr); /* the real header once the body is known */
    long n;
    while (!rc && (n = sl_snapshot_writer_next(w, buf, CHUNK)) != 0) {
        rc = n < 0 ? (int)n : write_all(fd, buf, (size_t)n);
        if (!rc && m)
            rc = sl_secret_mac_update(m, buf, (size_t)n);
    }
    free(buf);
    if (!rc) {
        sl_snapshot_writer_header(w, hdr);
        if (pwrite(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr)
            rc = -EIO;
    }
    if (!rc && m) {
        uint8_t trailer[SL_STATEDIR_TRAILER];
        memcpy(trailer, SL_STATEDIR_MAC_MAGIC, 8);
        rc = sl_secret_mac_update(m, hdr, sizeof hdr);
        if (!rc)
            rc = sl_secret_mac_final(m, trailer + 8);
        if (!rc)
            rc = write_all(fd, trailer, sizeof trailer); /* the offset is at the body's end */
    }
    sl_secret_mac_free(m);
    if (!rc && fsync(fd))
        rc = -errno;
    return rc;
}

/* The temporary file, created anew: never through a link planted at its name, never an old file
 * (one left by a crash is removed first: unlink removes a link, not its target). */
static int open_tmp(const char *tmp)
{
    const int fl = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(tmp, fl, 0600);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0)
        fd = open(tmp, fl, 0600);
    return fd;
}

int sl_statedir_write(const char *dir, sl_engine *e, unsigned flags, const sl_statedir_key *key,
                      int64_t now, sl_logger *log)
{
    char path[4096], tmp[4096];
    int rc = path_of(path, sizeof path, dir, "");
    if (!rc)
        rc = path_of(tmp, sizeof tmp, dir, ".tmp");
    if (rc) {
        sl_log_error(log, "snapshot not written: state-dir path too long");
        return rc;
    }
    int64_t t0 = sl_mono_ns(), c0 = cpu_ns();
    int fd = open_tmp(tmp);
    if (fd < 0) {
        rc = -errno;
        sl_log_error(log, "snapshot not written: %s: %s", tmp, strerror(-rc));
        return rc;
    }
    sl_snapshot_writer w;
    rc = write_snapshot(fd, e, flags, key, now, &w);
    if (close(fd) && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path))
        rc = -errno;
    if (!rc) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd); /* the rename itself durable; best effort */
            close(dfd);
        }
        sl_log_info(log, "snapshot written keys=%llu bytes=%llu ms=%.1f cpu_ms=%.1f path=%s",
                    (unsigned long long)w.keys,
                    (unsigned long long)(w.body_len + SL_SNAPSHOT_HEADER +
                                         (has_key(key) ? SL_STATEDIR_TRAILER : 0)),
                    (double)(sl_mono_ns() - t0) / 1e6, (double)(cpu_ns() - c0) / 1e6, path);
    } else {
        unlink(tmp);
        sl_log_error(log, "snapshot not written: %s: %s", path, strerror(-rc));
    }
    sl_snapshot_writer_free(&w);
    return rc;
}

/* ---------------------------------------------------------------- periodic writer */

static void *timer_main(void *arg)
{
    sl_statedir_timer *t = arg;
    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += t->period_ms / 1000;
        until.tv_nsec += (t->period_ms % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        int rc = 0;
        while (!t->stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&t->cv, &t->mu, &until);
        if (t->stop)
            break;
        pthread_mutex_unlock(&t->mu);
        sl_statedir_write(t->dir, t->engine, t->flags, t->key, sl_wall_ms(), t->log);
        pthread_mutex_lock(&t->mu);
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

int sl_statedir_timer_start(sl_statedir_timer *t, const char *dir, sl_engine *e, unsigned flags,
                            const sl_statedir_key *key, int64_t period_ms, sl_logger *log)
{
    memset(t, 0, sizeof *t);
    if (period_ms <= 0)
        return 0;
    t->dir = dir;
    t->engine = e;
    t->flags = flags;
    t->key = key;
    t->period_ms = period_ms;
    t->log = log;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&t->mu, NULL);
    int rc = pthread_create(&t->thread, NULL, timer_main, t);
    if (rc) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        return -rc;
    }
    t->running = true;
    return 0;
}

void sl_statedir_timer_stop(sl_statedir_timer *t)
{
    if (!t->running)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    t->running = false;
}
