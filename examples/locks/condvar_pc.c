/*
 * condvar_pc: producer-consumer over a bounded buffer, one mutex and two condition
 * variables (not_full, not_empty).
 *
 * PRODUCERS threads each make ITEMS items, sleeping INTERVAL_US before each one (the
 * planted idle time: consumers have nothing to do meanwhile and wait on not_empty).
 * CONSUMERS threads take items and spend CONSUME_US of busy work on each.  With the
 * defaults (1 producer, 2 consumers, 1 ms between items, no consumer work) the consumers
 * spend almost the whole run inside pthread_cond_wait -- idle time, not lock contention,
 * which is how a lock report should classify it.  Make consumers slower than the producers
 * (e.g. -u 2000 -i 0) and the buffer fills, and the producers wait on not_full instead.
 *
 * Ground truth, measured in the program with CLOCK_MONOTONIC: for every condition wait the
 * time from calling pthread_cond_wait to its return (this includes glibc's re-acquisition
 * of the mutex inside the wait, which a probe cannot see as a separate lock call), summed
 * per side; for every pthread_mutex_lock call its duration (the lock wait).  Exact to
 * about two clock reads (~50 ns) per call.  The producers' sleeps are nanosleep, which
 * overshoots by tens of microseconds per call: the measured sums are the truth, the
 * interval is only the plan.
 *
 * usage: condvar_pc [-p PRODUCERS] [-c CONSUMERS] [-n ITEMS] [-i INTERVAL_US] [-b CAPACITY]
 *                   [-u CONSUME_US]
 * defaults: -p 1 -c 2 -n 200 -i 1000 -b 8 -u 0   (about 0.22 s)
 *
 * build: cc -O2 -g -pthread condvar_pc.c -o condvar_pc
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <unistd.h>

/* ---- timing helpers (the same in every lock example; each file stands alone so that
 * `contend demo` can build it from its embedded source) ---------------------------- */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
static inline int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Busy-wait (on the CPU, not asleep) until CLOCK_MONOTONIC reaches `deadline`; returns the
 * time it read last, which is >= deadline.  Exact to one clock read (tens of ns). */
static inline int64_t spin_until(int64_t deadline)
{
    int64_t t;
    while ((t = now_ns()) < deadline)
        ;
    return t;
}

/* Parse a non-negative integer option value or exit with a usage message. */
static inline long parse_count(const char *prog, char opt, const char *s, long min, long max)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < min || v > max) {
        fprintf(stderr, "%s: -%c wants an integer in [%ld, %ld], got '%s'\n", prog, opt, min,
                max, s);
        exit(2);
    }
    return v;
}

/* The source file's base name, for "site=file:line:function" fields. */
static inline const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}
/* ----------------------------------------------------------------------------------- */

static pthread_mutex_t buffer_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER;

/* The bounded buffer, protected by buffer_lock. */
static long *ring;
static int capacity = 8, count, head;
static int producers_left;

static int nproducers = 1, nconsumers = 2;
static long items_per_producer = 200;
static int64_t interval_ns = 1000000, consume_ns = 0;
static int put_wait_line, take_wait_line;

struct sums {
    long items, cond_waits, lock_calls;
    int64_t cond_wait_ns, lock_wait_ns;
    long long value_sum;
};

static void timed_lock(struct sums *s)
{
    int64_t t0 = now_ns();
    pthread_mutex_lock(&buffer_lock);
    s->lock_calls++;
    s->lock_wait_ns += now_ns() - t0;
}

__attribute__((noinline)) static void put_item(struct sums *s, long value)
{
    timed_lock(s);
    while (count == capacity) {
        int64_t t0 = now_ns();
        pthread_cond_wait(&not_full, &buffer_lock); put_wait_line = __LINE__;
        s->cond_wait_ns += now_ns() - t0;
        s->cond_waits++;
    }
    ring[(head + count) % capacity] = value;
    count++;
    pthread_cond_signal(&not_empty);
    pthread_mutex_unlock(&buffer_lock);
    s->items++;
    s->value_sum += value;
}

/* Returns 0 and the item, or -1 when the producers are done and the buffer is empty. */
__attribute__((noinline)) static int take_item(struct sums *s, long *value)
{
    timed_lock(s);
    while (count == 0 && producers_left > 0) {
        int64_t t0 = now_ns();
        pthread_cond_wait(&not_empty, &buffer_lock); take_wait_line = __LINE__;
        s->cond_wait_ns += now_ns() - t0;
        s->cond_waits++;
    }
    if (count == 0) {
        pthread_mutex_unlock(&buffer_lock);
        return -1;
    }
    *value = ring[head];
    head = (head + 1) % capacity;
    count--;
    pthread_cond_signal(&not_full);
    pthread_mutex_unlock(&buffer_lock);
    s->items++;
    s->value_sum += *value;
    return 0;
}

struct worker {
    pthread_t thread;
    int id;
    struct sums s;
};

static void *producer(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "producer-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    for (long i = 0; i < items_per_producer; i++) {
        struct timespec t = {interval_ns / 1000000000, interval_ns % 1000000000};
        while (nanosleep(&t, &t) == -1 && errno == EINTR)
            ;
        put_item(&w->s, (long)w->id * items_per_producer + i + 1);
    }
    /* The last producer out wakes every consumer so they can see the end. */
    timed_lock(&w->s);
    if (--producers_left == 0)
        pthread_cond_broadcast(&not_empty);
    pthread_mutex_unlock(&buffer_lock);
    return NULL;
}

static void *consumer(void *arg)
{
    struct worker *w = arg;
    char name[16];
    long v;
    snprintf(name, sizeof name, "consumer-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    while (take_item(&w->s, &v) == 0)
        if (consume_ns)
            spin_until(now_ns() + consume_ns);
    return NULL;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-p PRODUCERS] [-c CONSUMERS] [-n ITEMS] [-i INTERVAL_US] [-b CAPACITY]"
            " [-u CONSUME_US]\n"
            "  -p  producer threads (default 1)\n"
            "  -c  consumer threads (default 2)\n"
            "  -n  items per producer (default 200)\n"
            "  -i  producer sleep before each item, microseconds (default 1000)\n"
            "  -b  buffer capacity (default 8)\n"
            "  -u  consumer busy work per item, microseconds (default 0)\n",
            prog);
    exit(2);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "p:c:n:i:b:u:h")) != -1) {
        switch (opt) {
        case 'p': nproducers = (int)parse_count(argv[0], 'p', optarg, 1, 1024); break;
        case 'c': nconsumers = (int)parse_count(argv[0], 'c', optarg, 1, 1024); break;
        case 'n': items_per_producer = parse_count(argv[0], 'n', optarg, 0, 100000000); break;
        case 'i': interval_ns = parse_count(argv[0], 'i', optarg, 0, 10000000) * 1000; break;
        case 'b': capacity = (int)parse_count(argv[0], 'b', optarg, 1, 1000000); break;
        case 'u': consume_ns = parse_count(argv[0], 'u', optarg, 0, 10000000) * 1000; break;
        default: usage(argv[0]);
        }
    }
    if (optind != argc)
        usage(argv[0]);
    ring = calloc((size_t)capacity, sizeof *ring);
    struct worker *p = calloc((size_t)nproducers, sizeof *p);
    struct worker *c = calloc((size_t)nconsumers, sizeof *c);
    if (!ring || !p || !c)
        return 1;
    producers_left = nproducers;

    int64_t start = now_ns();
    for (int i = 0; i < nconsumers; i++) {
        c[i].id = i;
        pthread_create(&c[i].thread, NULL, consumer, &c[i]);
    }
    for (int i = 0; i < nproducers; i++) {
        p[i].id = i;
        pthread_create(&p[i].thread, NULL, producer, &p[i]);
    }
    for (int i = 0; i < nproducers; i++)
        pthread_join(p[i].thread, NULL);
    for (int i = 0; i < nconsumers; i++)
        pthread_join(c[i].thread, NULL);
    int64_t elapsed = now_ns() - start;

    struct sums ps = {0}, cs = {0};
    for (int i = 0; i < nproducers; i++) {
        ps.items += p[i].s.items;
        ps.cond_waits += p[i].s.cond_waits;
        ps.cond_wait_ns += p[i].s.cond_wait_ns;
        ps.lock_calls += p[i].s.lock_calls;
        ps.lock_wait_ns += p[i].s.lock_wait_ns;
        ps.value_sum += p[i].s.value_sum;
    }
    for (int i = 0; i < nconsumers; i++) {
        cs.items += c[i].s.items;
        cs.cond_waits += c[i].s.cond_waits;
        cs.cond_wait_ns += c[i].s.cond_wait_ns;
        cs.lock_calls += c[i].s.lock_calls;
        cs.lock_wait_ns += c[i].s.lock_wait_ns;
        cs.value_sum += c[i].s.value_sum;
    }
    if (ps.items != cs.items || ps.value_sum != cs.value_sum) {
        fprintf(stderr, "condvar_pc: items lost: produced %ld, consumed %ld\n", ps.items,
                cs.items);
        return 1;
    }
    /* A site is known only if a wait happened there ("none" otherwise). */
    const char *file = base_name(__FILE__);
    char put_site[128] = "none", take_site[128] = "none";
    if (put_wait_line)
        snprintf(put_site, sizeof put_site, "%s:%d:put_item", file, put_wait_line);
    if (take_wait_line)
        snprintf(take_site, sizeof take_site, "%s:%d:take_item", file, take_wait_line);
    printf("truth program=condvar_pc producers=%d consumers=%d items=%ld interval_ns=%lld "
           "capacity=%d consume_ns=%lld buffer_lock.addr=%p not_empty.addr=%p "
           "not_full.addr=%p "
           "consumer.cond_waits=%ld consumer.cond_wait_ns_total=%lld "
           "consumer.cond_wait_site=%s "
           "producer.cond_waits=%ld producer.cond_wait_ns_total=%lld "
           "producer.cond_wait_site=%s "
           "buffer_lock.lock_calls=%ld buffer_lock.wait_ns_total=%lld elapsed_ns=%lld\n",
           nproducers, nconsumers, cs.items, (long long)interval_ns, capacity,
           (long long)consume_ns, (void *)&buffer_lock, (void *)&not_empty, (void *)&not_full,
           cs.cond_waits, (long long)cs.cond_wait_ns, take_site, ps.cond_waits,
           (long long)ps.cond_wait_ns, put_site, ps.lock_calls + cs.lock_calls,
           (long long)(ps.lock_wait_ns + cs.lock_wait_ns), (long long)elapsed);
    free(ring);
    free(p);
    free(c);
    return 0;
}
