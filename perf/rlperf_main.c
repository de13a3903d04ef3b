/*
 * rlperf_main.c - a fio-like benchmark running on ringload's own engine, so that
 * "what can this drive do" (fio) and "what does ringload get" (rlperf) are
 * measured the same way. Raw mode (fio's options and job files) drives the
 * engine through its raw-read interface (engine/raw.h); checkpoint mode (--checkpoint)
 * loads through the public API only and reports the phases of a load.
 *
 * main only sequences the parts (rlperf.h lists them): parse, then either
 * the checkpoint mode or set-up, run and report. Exit status: 0, or 1 for
 * any error (options included), as fio's.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rlperf.h"

static void on_signal(int sig)
{
	int saved = errno;  /* the interrupted code may be reading errno */

	(void)sig;
	rp_stop();  /* jobs stop submitting, drain, and the report follows */
	errno = saved;
}

/* Where the status line goes: stdout when it is a terminal (fio's
 * --eta=auto) or always, but never into a JSON or terse report on stdout. */
static FILE *eta_file(const struct rp_conf *c)
{
	int json_on_stdout = c->format != RP_FMT_NORMAL && !c->output;

	if (c->eta == RP_ETA_NEVER || (c->eta == RP_ETA_AUTO && !isatty(STDOUT_FILENO)))
		return NULL;
	if (json_on_stdout)
		return c->eta == RP_ETA_ALWAYS ? stderr : NULL;
	return stdout;
}

/* Set-up, run, report; returns the exit status. */
static int run_jobs(const struct rp_conf *c, FILE *out)
{
	struct rp_plan plan;
	struct rp_result res;
	struct rp_unit *units = NULL;
	struct rp_report rep;
	struct rp_disks disks;
	struct rp_eta *eta, *status;
	char err[RP_ERRMSG_MAX];
	long n;
	int rc;

	if (rp_setup(c, &plan, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (plan.notes[0])
		fprintf(stderr, "%s\n", plan.notes);
	rp_disks_start(&plan, &disks);
	eta = eta_file(c) ? rp_eta_start(eta_file(c), plan.ntasks, RP_ETA_NS) : NULL;
	status = c->status_interval_ns ? rp_status_start(out, c, &plan) : NULL;
	rc = rp_run(&plan, eng_raw_run, &res);
	rp_eta_stop(status);
	rp_eta_stop(eta);
	rp_disks_stop(&disks);
	if (res.notes[0])
		fprintf(stderr, "%s\n", res.notes);
	if (rc < 0)
		fprintf(stderr, "%s\n", res.errmsg);
	n = rp_units(&plan, &res, &units);
	if (n < 0) {
		fprintf(stderr, "rlperf: out of memory\n");
	} else if (rc == 0 || res.elapsed_s > 0) {
		/* a run that failed part way still reports what it measured */
		rep = (struct rp_report){ c, &plan, &res, units, (size_t)n, &disks };
		rp_print_report(out, &rep);
	}
	rp_units_free(units, n > 0 ? (size_t)n : 0);
	rp_disks_free(&disks);
	rp_result_free(&res);
	rp_plan_free(&plan);
	return rc < 0 || n < 0 ? 1 : 0;
}

/* --output=FILE, opened once the options are known good (fio opens it
 * while parsing; a bad option then leaves FILE alone here) */
static FILE *open_output(const struct rp_conf *c)
{
	FILE *f;

	if (!c->output)
		return stdout;
	f = fopen(c->output, "w");
	if (!f)
		fprintf(stderr, "rlperf: output file open error: %s: %s\n", c->output,
			strerror(errno));
	return f;
}

int main(int argc, char **argv)
{
	struct rp_conf c;
	struct sigaction sa;
	char err[1024];
	FILE *out;
	int rc = rp_parse_args(argc, argv, &c, err, sizeof(err));

	if (rc == RP_PARSE_ERROR) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	if (rc == RP_PARSE_HELP || rc == RP_PARSE_VERSION) {
		if (rc == RP_PARSE_HELP)
			rp_usage(stdout);
		else
			printf("%s\n", RP_VERSION);
		return 0;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	out = open_output(&c);
	rc = !out ? 1 : c.checkpoint ? rp_checkpoint(&c, out) : run_jobs(&c, out);
	if (out && out != stdout && fclose(out)) {
		fprintf(stderr, "rlperf: %s: %s\n", c.output, strerror(errno));
		rc = 1;
	}
	rp_conf_free(&c);
	return rc;
}
