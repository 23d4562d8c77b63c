/*
 * tuner.c - the worker budget from the cores this process may really use.
 *
 * sched_getaffinity gives the cores the scheduler allows (taskset, cpusets);
 * a cgroup v2 cpu.max quota (or v1 cfs_quota_us / cfs_period_us), rounded
 * up, caps it, as in containers the affinity mask often shows the whole host.
 */
#define _GNU_SOURCE
#include "tuner.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static double cgroup_quota_cores(void)
{
    FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
    if (f) {
        char max[32] = "";
        long long period = 0;
        int got = fscanf(f, "%31s %lld", max, &period);
        fclose(f);
        if (got == 2 && strcmp(max, "max") != 0 && period > 0) {
            long long quota = 0;
            if (sscanf(max, "%lld", &quota) == 1 && quota > 0)
                return (double)quota / (double)period;
        }
        return 0;
    }
    long long quota = 0, period = 0;
    f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "r");
    if (f) {
        if (fscanf(f, "%lld", &quota) != 1)
            quota = 0;
        fclose(f);
    }
    f = fopen("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "r");
    if (f) {
        if (fscanf(f, "%lld", &period) != 1)
            period = 0;
        fclose(f);
    }
    return quota > 0 && period > 0 ? (double)quota / (double)period : 0;
}

int rf__usable_cores(char *why, size_t whycap)
{
    cpu_set_t set;
    int cores = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cores = CPU_COUNT(&set);
    if (cores <= 0)
        cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cores <= 0)
        cores = 1;
    double quota = cgroup_quota_cores();
    int capped = cores;
    if (quota > 0) {
        int q = (int)quota;
        if (q < quota)
            q++;
        if (q < capped)
            capped = q;
    }
    if (capped < 1)
        capped = 1;
    if (why) {
        if (capped < cores)
            snprintf(why, whycap, "%d cores in the affinity mask, cgroup quota %.2f cores", cores,
                     quota);
        else
            snprintf(why, whycap, "%d cores in the affinity mask", cores);
    }
    return capped;
}

int rf__worker_budget(int local_world_size, char *why, size_t whycap)
{
    char cores_why[128];
    int cores = rf__usable_cores(cores_why, sizeof cores_why);
    if (local_world_size < 1)
        local_world_size = 1;
    int budget = cores / local_world_size;
    if (budget < 1)
        budget = 1;
    if (why)
        snprintf(why, whycap, "%s, %d training process%s on the node", cores_why,
                 local_world_size, local_world_size == 1 ? "" : "es");
    return budget;
}
