/*
 * lock_pair_cost: ns per uncontended pthread_mutex_lock + unlock pair, one thread, one mutex.
 * Run bare and under the probe to get the probe's cost per pair (scripts/bench-probe.sh).
 *
 * usage: lock_pair_cost [PAIRS]   (default 20 000 000); prints "ns_per_pair <value>"
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter;

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 20000000L;
    /* Warm-up: the probe's ring and tables for this thread are created here. */
    for (long i = 0; i < 1000; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        long n = pairs / 5;
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            pthread_mutex_lock(&m);
            counter++;
            pthread_mutex_unlock(&m);
        }
        double per = (now_ns() - t0) / n;
        if (per < best)
            best = per;
    }
    printf("ns_per_pair %.2f\n", best);
    return 0;
}
