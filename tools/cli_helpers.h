/*
 * cli_helpers.h - small helpers the ringload tools share (ringload's subcommands
 * and mkckpt). Needs nothing of the library.
 */
#ifndef TOOLS_UTIL_H
#define TOOLS_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Seconds on the monotonic clock. */
double cli_now(void);

/* s as a JSON string, quoted and escaped; a byte that is not part of
 * well-formed UTF-8 (a file name in another encoding) is written U+FFFD,
 * so that any JSON parser takes it (cli_json_path() keeps the bytes). */
void cli_json_str(FILE *f, const char *s);

/* buf (cap >= 4 bytes) holds a message snprintf cut: ends it with "..."
 * where it was cut, never inside a UTF-8 sequence. */
void cli_mark_cut(char *buf, size_t cap);

/* 1 when s is well-formed UTF-8 (RFC 3629), else 0. */
int cli_utf8_valid(const char *s);

/* "key":s as cli_json_str() writes it and, only when s is not UTF-8, a
 * lossless sibling "key_hex": its bytes in lowercase hex. */
void cli_json_path(FILE *f, const char *key, const char *s);

/* Writes all n bytes to fd (EINTR retried). Returns 0 or -errno. */
int cli_write_all(int fd, const void *p, size_t n);

/*
 * Removes path and, if it is a directory, everything below it (not
 * following links). Returns 0 (also when path does not exist) or -errno of
 * the first failure. One caller at a time.
 */
int cli_remove_tree(const char *path);

/* The same, asking stop() after every entry: 1 when it said stop (what is
 * left stays), else as cli_remove_tree(). */
int cli_remove_tree_until(const char *path, int (*stop)(void));

/* Removes path in a child process of its own session, which outlives the
 * caller (with none of its fds: stdio on /dev/null): for a tree too large
 * to wait for. 0, or -errno if no child. */
int cli_remove_tree_later(const char *path);

#endif
