/*
 * lock_loop: many short, mostly uncontended lock acquisitions, for as long as asked; the
 * recording it gives measures how fast `contend report` reads a long run
 * (scripts/bench-report.sh, docs/benchmarks.md).
 *
 * THREADS threads (-p, default 2) each take their own `private_lock` in a tight loop, a
 * critical section of a few instructions that no other thread contends; every SHARE-th
 * acquisition (-k, default 64) takes `shared_lock` instead, which all threads take, so a
 * small part of the acquisitions wait and the report has a critical path.  Each thread
 * stops after ITERS acquisitions (-n) or SECONDS seconds (-t, default 5), whichever comes
 * first (the clock is read every 4096 acquisitions).  -w N adds N steps of busy work between
 * acquisitions (default 0), to let a recorder's drain keep up without dropping events.
 *
 * It ends with one line, e.g.
 *   truth program=lock_loop threads=2 acquisitions=40000000 shared_acquisitions=625000 elapsed_ns=...
 * (acquisitions counts both locks; a probe that records every acquisition writes two events,
 * acquired and released, for each, plus a wait for each contended one).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t shared_counter;

struct worker {
    pthread_t thread;
    pthread_mutex_t private_lock;
    uint64_t private_counter;
    uint64_t acquisitions;
    uint64_t shared_acquisitions;
    /* Own cache lines: the private locks must not share one. */
    char pad[64];
};

static uint64_t iters = UINT64_MAX;
static double seconds = 5.0;
static unsigned share = 64;
static unsigned busy = 0;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static __attribute__((noinline)) void bump_private(struct worker *w) {
    pthread_mutex_lock(&w->private_lock);
    w->private_counter++;
    pthread_mutex_unlock(&w->private_lock);
}

static __attribute__((noinline)) void bump_shared(void) {
    pthread_mutex_lock(&shared_lock);
    shared_counter++;
    pthread_mutex_unlock(&shared_lock);
}

static void *work(void *arg) {
    struct worker *w = arg;
    uint64_t deadline = now_ns() + (uint64_t)(seconds * 1e9);
    for (uint64_t i = 0; i < iters; i++) {
        if (share && i % share == share - 1) {
            bump_shared();
            w->shared_acquisitions++;
        } else {
            bump_private(w);
        }
        w->acquisitions++;
        for (volatile unsigned j = 0; j < busy; j++)
            ;
        if ((i & 4095) == 4095 && now_ns() >= deadline)
            break;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = 2, opt;
    while ((opt = getopt(argc, argv, "p:n:t:k:w:")) != -1) {
        switch (opt) {
        case 'p': threads = atoi(optarg); break;
        case 'n': iters = strtoull(optarg, NULL, 10); break;
        case 't': seconds = atof(optarg); break;
        case 'k': share = (unsigned)atoi(optarg); break;
        case 'w': busy = (unsigned)atoi(optarg); break;
        default:
            fprintf(stderr, "usage: %s [-p threads] [-n acquisitions per thread] [-t seconds] [-k share] [-w busy]\n", argv[0]);
            return 2;
        }
    }
    if (threads < 1)
        threads = 1;
    struct worker *ws = calloc((size_t)threads, sizeof *ws);
    if (!ws)
        return 1;
    uint64_t start = now_ns();
    for (int i = 0; i < threads; i++) {
        pthread_mutex_init(&ws[i].private_lock, NULL);
        pthread_create(&ws[i].thread, NULL, work, &ws[i]);
    }
    uint64_t total = 0, shared = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ws[i].thread, NULL);
        total += ws[i].acquisitions;
        shared += ws[i].shared_acquisitions;
    }
    printf("truth program=lock_loop threads=%d acquisitions=%llu shared_acquisitions=%llu elapsed_ns=%llu\n",
           threads, (unsigned long long)total, (unsigned long long)shared,
           (unsigned long long)(now_ns() - start));
    free(ws);
    return 0;
}
