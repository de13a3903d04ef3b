/*
 * util.h - what the layers above use of the engine's leaf helpers
 * (engine/util.c; the others are internal: eng_int.h).
 */
#ifndef ENGINE_UTIL_H
#define ENGINE_UTIL_H

#include "engine_types.h"

/* Returns "auto", "io_uring", "libaio", "pread" or "?". */
const char *eng_backend_name(int backend);  /* backends.c: "auto", a name, or "?" */
unsigned eng_backend_caps(int backend);      /* backends.c: ENG_CAP_*, 0 for none */
int eng_backend_id_at(size_t i);             /* backends.c: the i-th id in order, or -1 */
int eng_backend_max_id(void);                /* backends.c: the largest id */

#endif /* ENGINE_UTIL_H */
