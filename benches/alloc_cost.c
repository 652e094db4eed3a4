/*
 * alloc_cost: ns per malloc(64)+free pair, one thread. Run bare and under
 * `contend record --locks [--alloc-sites]` to get the probe's cost per allocation
 * (scripts/bench-alloc.sh).
 *
 * usage: alloc_cost [PAIRS]   (default 4 000 000); prints "ns_per_pair <value>"
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 4000000L;
    void *volatile sink;
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        long n = pairs / 5;
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            sink = malloc(64);
            free(sink);
        }
        double per = (now_ns() - t0) / n;
        if (per < best)
            best = per;
    }
    printf("ns_per_pair %.2f\n", best);
    return 0;
}
