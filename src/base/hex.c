/* SPDX-License-Identifier: Apache-2.0 */
/* Fixed-width hex formatting (the rest of sl_hex is inline in hex.h). */
#include "base/hex.h"

size_t sl_hex_format(uint64_t v, unsigned digits, bool upper, char *out)
{
    if (digits == 0 || digits > 16)
        digits = 16;
    for (unsigned i = digits; i-- > 0;) {
        out[i] = sl_hex_digit((unsigned)v, upper);
        v >>= 4;
    }
    out[digits] = '\0';
    return digits;
}
