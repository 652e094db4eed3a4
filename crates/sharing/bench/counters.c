/* Benchmark: THREADS threads each incrementing its own counter ITERS times, the counters
 * either in one cache line (false sharing) or padded to a line each. Usage:
 *   counters together|padded [iters] [threads] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_THREADS 8

static struct {
    volatile long v;
} together[MAX_THREADS] __attribute__((aligned(64)));

static struct {
    volatile long v;
    char pad[56];
} padded[MAX_THREADS] __attribute__((aligned(64)));

static long iters;

static void *work(void *arg) {
    volatile long *c = arg;
    for (long i = 0; i < iters; i++)
        *c += 1;
    return NULL;
}

int main(int argc, char **argv) {
    int pad = argc > 1 && !strcmp(argv[1], "padded");
    iters = argc > 2 ? atol(argv[2]) : 20000000;
    int n = argc > 3 ? atoi(argv[3]) : 2;
    pthread_t t[MAX_THREADS];
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, work, pad ? (void *)&padded[i].v : (void *)&together[i].v);
    long sum = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        sum += pad ? padded[i].v : together[i].v;
    }
    printf("%ld\n", sum);
    return sum == iters * n ? 0 : 1;
}
