/*
 * util.h - what the layers above use of the engine's leaf helpers
 * (engine/util.c; the others are internal: eng_int.h).
 */
#ifndef ENGINE_UTIL_H
#define ENGINE_UTIL_H

#include "engine_types.h"

/* Returns "auto", "io_uring", "libaio", "pread" or "?". */
const char *eng_backend_name(int backend);

#endif /* ENGINE_UTIL_H */
