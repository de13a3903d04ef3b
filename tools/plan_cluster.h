/* plan_cluster.h - `ringload plan`'s cluster summary (transfers, read shares, files). */
#ifndef TOOLS_PLAN_CLUSTER_H
#define TOOLS_PLAN_CLUSTER_H

#include "ringload.h"

/* One line per fact after the per-process table; nothing when the plan
 * has no statistics of every process. */
void plan_cluster_text(const rl_plan *plan);
/* `,"cluster":{...}` to append to the plan's JSON object. */
void plan_cluster_json(const rl_plan *plan);

#endif
