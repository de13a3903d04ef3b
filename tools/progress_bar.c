/* progress_bar.c - see progress_bar.h. */
#include <stdio.h>

#include "progress_bar.h"
#include "cli_helpers.h"

#define BAR 40

enum { NOTE = 1, BAR_LINE = 2 };  /* what progress.drawn says is on the screen */

void progress_init(struct progress_bar *p, int enabled)
{
	p->enabled = enabled;
	p->label = "";
	p->last = 0;
	p->drawn = 0;
}

static void clear_line(struct progress_bar *p)
{
	if (p->drawn)
		fputs("\r\033[K", stderr);
	p->drawn = 0;
}

void progress_note(struct progress_bar *p, const char *text)
{
	if (!p->enabled)
		return;
	clear_line(p);
	fprintf(stderr, "%s", text);
	p->drawn = NOTE;
}

void progress_begin(struct progress_bar *p, const char *label)
{
	if (!p->enabled)
		return;
	clear_line(p);
	p->label = label;
	p->last = 0;
	p->shown = UINT64_MAX;
}

void progress_update(struct progress_bar *p, uint64_t done, uint64_t total)
{
	double t, frac;
	int fill;

	if (!p->enabled || !total)
		return;
	t = cli_now();
	if ((t - p->last < 0.1 && done != total) || (done == p->shown && p->drawn == BAR_LINE))
		return;
	p->shown = done;
	p->last = t;
	frac = (double)done / (double)total;
	fill = (int)(BAR * frac);
	fprintf(stderr, "\r%-6s [%.*s%*s] %3d%% %.2f/%.2f GB", p->label, fill,
		"########################################", BAR - fill, "", (int)(100 * frac),
		(double)done / 1e9, (double)total / 1e9);
	p->drawn = BAR_LINE;
}

void progress_done(struct progress_bar *p)
{
	/* A finished bar stays on the screen; a status note is cleared. */
	if (p->drawn == BAR_LINE)
		fputc('\n', stderr);
	else
		clear_line(p);
	p->drawn = 0;
}
