/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_grow: room for more elements in a growable array, written once. The layers keep arrays as
 * a pointer, a count and a capacity, and each used to grow its own by hand (double from a
 * minimum, realloc, keep the old array on failure). Here the doubling, the overflow checks of
 * len + more and of capacity * element size, and an optional hard cap are one function, so every
 * array an input can grow stays bounded the same way ("bounded memory, in bytes, everywhere an
 * input controls a size"): `max` is in elements; for a bound in bytes pass bytes / element size.
 *
 * Nothing is allocated while the array already has room, and a failure leaves the array and its
 * capacity as they were: the caller still owns the old array and its elements.
 */
#ifndef SLUICE_BASE_GROW_H
#define SLUICE_BASE_GROW_H

#include <stddef.h>

/*
 * Make room for `more` elements of `size` bytes after the first `len` in *arr, whose capacity is
 * *cap elements. When len + more > *cap: the new capacity is *cap (or `min` when *cap is 0)
 * doubled until it holds len + more, then at most `max` (0: no cap), and *arr is realloc'ed.
 * Returns 0; -E2BIG when len + more > max (max not 0); -ENOMEM when realloc fails or a size
 * overflows. On failure *arr and *cap are untouched.
 */
int sl_grow_reserve(void **arr, size_t *cap, size_t len, size_t more, size_t size, size_t min,
                    size_t max);

/*
 * The same for a typed array: `arrp` is a T ** (not void **: the element size is sizeof(T)),
 * `capp` a size_t *. Evaluates each argument once. For example, room for one more:
 *     if (sl_grow(&v->items, &v->cap, v->n, 1, 16, MAX_ITEMS))
 *         return -ENOMEM;
 */
#define sl_grow(arrp, capp, len, more, min, max)                                                  \
    __extension__({                                                                               \
        __typeof__(arrp) sl_grow_a_ = (arrp);                                                     \
        void *sl_grow_p_ = *sl_grow_a_;                                                           \
        int sl_grow_rc_ = sl_grow_reserve(&sl_grow_p_, (capp), (len), (more), sizeof **sl_grow_a_, \
                                          (min), (max));                                          \
        *sl_grow_a_ = sl_grow_p_;                                                                 \
        sl_grow_rc_;                                                                              \
    })

#endif
