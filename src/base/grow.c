/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Room for more elements in a growable array (see grow.h): the one doubling-with-a-minimum,
 * overflow-checked, optionally capped realloc that the layers' arrays share.
 */
#include "base/grow.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

int sl_grow_reserve(void **arr, size_t *cap, size_t len, size_t more, size_t size, size_t min,
                    size_t max)
{
    if (more > SIZE_MAX - len)
        return max ? -E2BIG : -ENOMEM;
    size_t need = len + more;
    if (need <= *cap)
        return 0;
    if (max && need > max)
        return -E2BIG;
    size_t ncap = *cap ? *cap : min ? min : 1;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    if (max && ncap > max)
        ncap = max;
    if (size && ncap > SIZE_MAX / size)
        return -ENOMEM;
    void *p = realloc(*arr, ncap * size);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = ncap;
    return 0;
}
