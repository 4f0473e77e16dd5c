/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Little-endian fixed-width integers in byte buffers, for the binary formats sluice writes itself
 * (core/keystate.h records, core/snapshot.h headers): the same bytes on every host, read and
 * written one byte at a time (compilers turn these into single loads and stores).
 */
#ifndef SLUICE_BASE_LE_H
#define SLUICE_BASE_LE_H

#include <stdint.h>

static inline void sl_le_put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t sl_le_get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void sl_le_put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t sl_le_get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif
