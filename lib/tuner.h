/*
 * tuner.h - how many decode workers to run.
 *
 * The budget is the usable cores (CPU affinity mask, capped by the cgroup CPU
 * quota) divided among the training processes on the node.
 */
#ifndef RF_TUNER_H
#define RF_TUNER_H

#include <stddef.h>

/* Usable cores of this process: min(affinity mask, cgroup quota), >= 1.
 * why (optional) says where the number comes from. */
int rf__usable_cores(char *why, size_t whycap);

/* Worker budget: usable cores / local_world_size, at least 1. */
int rf__worker_budget(int local_world_size, char *why, size_t whycap);

#endif
