/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sl_addr: who is at the other end, judged by address: whether a listen address is loopback (an
 * admin port bound elsewhere needs a token), and whether a connection's source IP is the IP of an
 * address in a list (how PeersV1 recognises a peer without TLS). Pure: no I/O, no resolving (the
 * addresses are numeric, or "localhost").
 */
#ifndef SLUICE_AUTH_ADDR_H
#define SLUICE_AUTH_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* The host part of "host:port" / "[v6]:port" / "host" into buf (NUL-terminated, brackets
 * removed, "localhost" as 127.0.0.1): 0 or -EINVAL. */
int sl_addr_host(const char *addr, char *buf, size_t buflen);

/* "host:port" or "[v6]:port" into host (as above) and port: 0 or -EINVAL. */
int sl_addr_split(const char *addr, char *host, size_t hostlen, unsigned short *port);

/* Whether the host of addr (as above) is a loopback IP: 127.0.0.0/8, ::1, ::ffff:127.x. */
bool sl_addr_is_loopback(const char *addr);

/* An IP as 16 bytes (IPv4 as v4-mapped IPv6), so that one memcmp compares two addresses. */
typedef struct sl_addr_ip {
    unsigned char b[16];
} sl_addr_ip;

/* The IP of addr ("host:port", numeric) / of sa (AF_INET, AF_INET6): 0 or -EINVAL. */
int sl_addr_ip_of(const char *addr, sl_addr_ip *ip);
int sl_addr_ip_of_sockaddr(const struct sockaddr *sa, sl_addr_ip *ip);

/* Whether sa (AF_INET or AF_INET6; a v4-mapped v6 counts as its v4) has the IP of addr
 * ("host:port", numeric). False for anything unparseable. */
bool sl_addr_same_ip(const struct sockaddr *sa, const char *addr);

/* Whether sa has the IP of one of addrs[0..n). */
bool sl_addr_in_list(const struct sockaddr *sa, const char *const *addrs, size_t n);

/* Whether a certificate names the host of addr ("host:port", "[v6]:port", "host"): names is a
 * list of NUL-terminated names ended by an empty one (sl_exchange_peer_identity's format: the
 * identity, then the DNS and IP subjectAltNames). A name that is an IP literal (or "localhost",
 * as 127.0.0.1) matches a host with the same IP; any other name matches a host spelled the same,
 * ASCII case ignored, one trailing dot on either side ignored. No wildcards: "*.example.com"
 * matches nothing (a peer list holds hosts, not patterns). At most 64 names are looked at. */
bool sl_addr_names_host(const char *names, const char *addr);

#endif
