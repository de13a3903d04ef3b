/*
 * progress_bar.h - the progress line of `ringload load` on stderr: one bar per
 * long phase (read, verify, write), redrawn at most every 100 ms, and a
 * status text for phases without a byte count (planning). Shown only on a
 * terminal and without --quiet; otherwise every call does nothing.
 */
#ifndef TOOLS_PROGRESS_BAR_H
#define TOOLS_PROGRESS_BAR_H

#include <stdint.h>

struct progress_bar {
	int enabled;
	const char *label;
	double last;
	uint64_t shown; /* the bytes the bar shows */
	int drawn;  /* 0, or what is on the screen: a note or a bar */
};

/* enabled: 1 to draw (the caller checks isatty and --quiet). */
void progress_init(struct progress_bar *p, int enabled);

/* A phase without a byte count: its text stays until the next call. */
void progress_note(struct progress_bar *p, const char *text);

/* A phase with a bar: label ("read"), then updates, then progress_done(). */
void progress_begin(struct progress_bar *p, const char *label);
void progress_update(struct progress_bar *p, uint64_t done, uint64_t total);
void progress_done(struct progress_bar *p);

#endif
