/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gRPC's standard services, their messages: grpc.health.v1.Health (Check, Watch) and server
 * reflection (grpc.reflection.v1 and v1alpha ServerReflectionInfo, the same messages under two
 * package names). Pure codecs over wire/pbwire, and the index of the file descriptors reflection
 * serves: the serialized FileDescriptorSet that the build makes from proto/ with protoc-c
 * --descriptor_set_out --include_imports (sl_grpcstd_descriptor_set), read once into a table of
 * files, their dependencies and the symbols each defines.
 */
#ifndef SLUICE_API_GRPCSTD_H
#define SLUICE_API_GRPCSTD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

/* ---- grpc.health.v1 ---- */

#define SL_GRPCSTD_HEALTH_CHECK "/grpc.health.v1.Health/Check"
#define SL_GRPCSTD_HEALTH_WATCH "/grpc.health.v1.Health/Watch"

enum {
    SL_GRPCSTD_UNKNOWN = 0,
    SL_GRPCSTD_SERVING = 1,
    SL_GRPCSTD_NOT_SERVING = 2,
    SL_GRPCSTD_SERVICE_UNKNOWN = 3,
};

/* HealthCheckRequest: its service name (pointing into msg; "" when absent). 0 or -EINVAL. */
int sl_grpcstd_health_decode(const uint8_t *msg, size_t n, const char **svc, size_t *svc_len);
/* HealthCheckResponse{status}, appended unframed. 0 or -ENOMEM. */
int sl_grpcstd_health_encode(int status, sl_buf *out);

/* ---- server reflection ---- */

#define SL_GRPCSTD_REFLECTION_V1 "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
#define SL_GRPCSTD_REFLECTION_V1ALPHA \
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"

typedef enum sl_grpcstd_refl_kind {
    SL_REFL_NONE = 0,     /* no message_request set */
    SL_REFL_FILE_BY_NAME, /* file_by_filename */
    SL_REFL_SYMBOL,       /* file_containing_symbol */
    SL_REFL_EXTENSION,    /* file_containing_extension */
    SL_REFL_EXT_NUMBERS,  /* all_extension_numbers_of_type */
    SL_REFL_LIST,         /* list_services */
} sl_grpcstd_refl_kind;

typedef struct sl_grpcstd_refl_req {
    sl_grpcstd_refl_kind kind;
    const char *arg; /* the string argument (into the message), the extension's containing type */
    size_t arg_len;
    const char *host;
    size_t host_len;
} sl_grpcstd_refl_req;

/* ServerReflectionRequest. 0 or -EINVAL. */
int sl_grpcstd_refl_decode(const uint8_t *msg, size_t n, sl_grpcstd_refl_req *req);

/* The descriptors reflection serves (read-only once built; shared by every worker). */
typedef struct sl_grpcstd_refl sl_grpcstd_refl;

/* Index the serialized FileDescriptorSet set[0..n). 0, -EINVAL (malformed), -ENOMEM. */
int sl_grpcstd_refl_new(const uint8_t *set, size_t n, sl_grpcstd_refl **out);
void sl_grpcstd_refl_free(sl_grpcstd_refl *r);
/* The set built into sluiced (build/.../grpcstd_descriptors.c). */
extern const uint8_t sl_grpcstd_descriptor_set[];
extern const size_t sl_grpcstd_descriptor_set_len;

/* The ServerReflectionResponse to one request (`raw` its bytes, echoed as original_request),
 * appended unframed: the service list, a file and its transitive dependencies, or an
 * error_response (NOT_FOUND for an unknown file or symbol, UNIMPLEMENTED for an empty request).
 * 0 or -ENOMEM. */
int sl_grpcstd_refl_answer(const sl_grpcstd_refl *r, const sl_grpcstd_refl_req *req,
                           const uint8_t *raw, size_t raw_len, sl_buf *out);
/* Whether name[0..n) is one of the services (package.Service) its files define. */
bool sl_grpcstd_refl_serves(const sl_grpcstd_refl *r, const char *name, size_t n);
/* How many services and files it has (for tests and the log). */
size_t sl_grpcstd_refl_services(const sl_grpcstd_refl *r);
size_t sl_grpcstd_refl_files(const sl_grpcstd_refl *r);

#endif
