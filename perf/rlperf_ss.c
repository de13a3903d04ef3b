/*
 * rlperf_ss.c - fio's steadystate: the criterion (iops or bw, mean
 * deviation or slope, absolute or a percentage of the mean) over a window
 * of one-second samples, and when it is met.
 */
#include <math.h>
#include <string.h>

#include "rlperf.h"

int rp_parse_ss(const char *s, int *state, double *limit)
{
	static const struct {
		const char *name;
		int state;
	} kinds[] = {
		{ "iops:", RP_SS_IOPS }, { "iops_slope:", RP_SS_IOPS | RP_SS_SLOPE },
		{ "bw:", 0 }, { "bw_slope:", RP_SS_SLOPE },
	};
	char *end;

	for (size_t i = 0; i < RP_ARRAY_SIZE(kinds); i++) {
		size_t n = strlen(kinds[i].name);

		if (strncmp(s, kinds[i].name, n))
			continue;
		*limit = strtod(s + n, &end);
		if (end == s + n || *limit < 0 || !isfinite(*limit) ||
		    (*end && strcmp(end, "%")))
			return -1;
		*state = kinds[i].state | (*end ? RP_SS_PCT : 0);
		return 0;
	}
	return -1;
}

/* The window's samples of the measured metric, oldest first, into y. */
static void window(const struct rp_ss *ss, double *y)
{
	const uint64_t *v = ss->state & RP_SS_IOPS ? ss->iops : ss->bw;

	for (unsigned i = 0; i < ss->dur; i++)
		y[i] = (double)v[(ss->head + i) % ss->dur];
}

/* fio's steadystate_slope: the least-squares slope over x = 0 .. dur - 1. */
static void judge_slope(struct rp_ss *ss, const double *y, double mean)
{
	double n = ss->dur, sx = n * (n - 1) / 2, sxx = (n - 1) * n * (2 * n - 1) / 6;
	double sxy = 0;

	for (unsigned i = 0; i < ss->dur; i++)
		sxy += i * y[i];
	ss->slope = ss->dur > 1 ? (sxy - sx * mean) / (sxx - sx * sx / n) : 0;
	ss->criterion = ss->state & RP_SS_PCT ? (mean ? 100.0 * ss->slope / mean : 0) :
			ss->slope;
	ss->attained = fabs(ss->criterion) < ss->limit;
}

/* fio's steadystate_deviation: the largest distance from the mean. */
static void judge_deviation(struct rp_ss *ss, const double *y, double mean)
{
	ss->deviation = 0;
	for (unsigned i = 0; i < ss->dur; i++)
		if (fabs(y[i] - mean) > ss->deviation)
			ss->deviation = fabs(y[i] - mean);
	ss->criterion = ss->state & RP_SS_PCT ? (mean ? 100.0 * ss->deviation / mean : 0) :
			ss->deviation;
	ss->attained = ss->criterion < ss->limit;
}

int rp_ss_add(struct rp_ss *ss, uint64_t iops, uint64_t bw)
{
	double y[RP_SS_MAX_DUR], mean = 0;

	ss->iops[(ss->head + ss->n) % ss->dur] = iops;
	ss->bw[(ss->head + ss->n) % ss->dur] = bw;
	if (ss->n < ss->dur)
		ss->n++;
	else
		ss->head = (ss->head + 1) % ss->dur;
	if (ss->n < ss->dur)
		return 0;
	window(ss, y);
	for (unsigned i = 0; i < ss->dur; i++)
		mean += y[i] / ss->dur;
	if (ss->state & RP_SS_SLOPE)
		judge_slope(ss, y, mean);
	else
		judge_deviation(ss, y, mean);
	return ss->attained;
}

uint64_t rp_ss_mean(const struct rp_ss *ss, int bw)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < ss->dur; i++)
		sum += bw ? ss->bw[i] : ss->iops[i];
	return ss->dur ? sum / ss->dur : 0;
}
