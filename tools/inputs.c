/* inputs.c - opening checkpoints and specs the same way in every subcommand. */
#include <stdio.h>

#include "cli.h"

int cli_open_ckpt(const char *prog, const char *path, rl_ckpt **ckp)
{
	rl_ckpt *ck = rl_ckpt_create();
	int r;

	*ckp = NULL;
	if (!ck) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	r = rl_ckpt_open(ck, path);
	if (r < 0) {
		/* ringload's codes add their category; -errno text is in the message. */
		if (r <= RL_E_HEADER_TOO_SMALL)
			fprintf(stderr, "%s: %s (%s)\n", prog, rl_ckpt_errmsg(ck), rl_strerror(r));
		else
			fprintf(stderr, "%s: %s\n", prog, rl_ckpt_errmsg(ck));
		rl_ckpt_destroy(ck);
		return -1;
	}
	*ckp = ck;
	return 0;
}

int cli_load_spec(const char *prog, const char *path, rl_spec **specp)
{
	rl_spec *spec;
	int r;

	*specp = NULL;
	if (!path)
		return 0;
	spec = rl_spec_create();
	if (!spec) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	r = rl_spec_load(spec, path);
	if (r < 0) {
		/* the message names the file; a bare code does not */
		if (*rl_spec_errmsg(spec))
			fprintf(stderr, "%s: %s\n", prog, rl_spec_errmsg(spec));
		else
			fprintf(stderr, "%s: %s: %s\n", prog, path, rl_strerror(r));
		rl_spec_destroy(spec);
		return -1;
	}
	*specp = spec;
	return 0;
}

int cli_plan_bounds(int param, int64_t *lo, int64_t *hi)
{
	return rl_plan_param_bounds((rl_plan_param)param, lo, hi);
}

int cli_loader_bounds(int param, int64_t *lo, int64_t *hi)
{
	return rl_loader_param_bounds((rl_loader_param)param, lo, hi);
}
