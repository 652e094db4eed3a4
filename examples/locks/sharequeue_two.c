/*
 * sharequeue_two: the thesis's Sharequeue micro-benchmark ("Queue-two", §4.1.3 and
 * §4.3.1.4), one mutex for the head and another for the tail.
 *
 * THREADS threads repeatedly remove a value from a shared FIFO queue, compute a new value
 * from it (WORK_NS of busy computation, outside any lock) and insert the new value at the
 * tail.  Here head_lock protects the head and tail_lock the tail, so a dequeue and an
 * enqueue can run at the same time (Michael & Scott's two-lock queue).  sharequeue_single.c
 * is the same program with one lock; `diff sharequeue_single.c sharequeue_two.c` shows
 * exactly what differs.  The number of lock operations is the same in both.
 * Each critical section also spends CS_NS of busy bookkeeping (standing in for copying an
 * item's payload), which sets how much of the time the lock is held.
 *
 * With the defaults on 2 CPUs each lock is needed 1 µs per operation while two CPUs
 * complete an operation every ~2 µs: each lock is busy about half the time.  In
 * sharequeue_single the one lock is needed 2 µs per operation, i.e. saturated, and the same
 * work waits several times longer.
 *
 * The queue is a singly linked list with a dummy node (Michael & Scott, PODC 1996): the
 * node a dequeue unlinks is reused by the same thread for its next enqueue, so nothing is
 * allocated while the threads run (malloc's own locks would add contention of their own).
 * With the dummy node, dequeue reads only head and enqueue writes only tail; the one
 * place they meet is the `next` field of the last node when the queue is nearly empty,
 * which is why `next` is atomic (release/acquire).
 * Each item counts how often it was processed: at the end the counts must add up to the
 * total number of operations, and the queue must again hold ITEMS items.
 *
 * Ground truth, measured in the program: per lock, the time from calling
 * pthread_mutex_lock to its return (wait) and from there to calling pthread_mutex_unlock
 * (hold), summed over all acquisitions; exact to about two CLOCK_MONOTONIC reads per
 * acquisition (~50 ns), which is small against the defaults' 1 µs critical sections but
 * not nothing: compare like with like (single vs two, or probe vs truth in one run).
 * `*.hold_ns_max`, the longest hold, is CS_NS plus the longest a holder was kept off the
 * CPU: a test's allowance for a preemption between the program's clock read and the lock
 * call moving that much wait across.
 *
 * usage: sharequeue_two [-t THREADS] [-n OPS] [-w WORK_NS] [-c CS_NS] [-q ITEMS]
 * defaults: -t 4 -n 20000 -w 2000 -c 1000 -q 64   (about 0.2 s on 2 CPUs)
 *
 * build: cc -O2 -g -pthread sharequeue_two.c -o sharequeue_two
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
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

#define PROGRAM "sharequeue_two"

struct node {
    _Atomic(struct node *) next; /* atomic: in the two-lock queue head and tail meet here */
    uint64_t value;
    long processed; /* how many times this item went through compute() */
};

struct queue {
    struct node *head; /* the dummy node: the first item is head->next */
    struct node *tail;
};

static struct queue q;
/* One mutex for the head, one for the tail. */
static pthread_mutex_t head_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t tail_lock = PTHREAD_MUTEX_INITIALIZER;

static int nthreads = 4, nitems = 64;
static long ops = 20000;
static int64_t work_ns = 2000, cs_ns = 1000;
static int dequeue_line, enqueue_line;
static atomic_int go;
static pthread_mutex_t warm_lock = PTHREAD_MUTEX_INITIALIZER; /* see worker_main */

struct sums {
    long acquisitions, waits_over_5us;
    int64_t wait_ns, hold_ns, max_hold_ns;
};

static void account(struct sums *s, int64_t t0, int64_t t1, int64_t t2)
{
    s->acquisitions++;
    s->wait_ns += t1 - t0;
    s->hold_ns += t2 - t1;
    if (t2 - t1 > s->max_hold_ns)
        s->max_hold_ns = t2 - t1;
    if (t1 - t0 > 5000)
        s->waits_over_5us++;
}

/* Remove the first item; returns the node that carried it (free for reuse) or NULL. */
__attribute__((noinline)) static struct node *dequeue(struct sums *s, uint64_t *value,
                                                      long *processed)
{
    int64_t t0 = now_ns();
    pthread_mutex_lock(&head_lock); dequeue_line = __LINE__;
    int64_t t1 = now_ns();
    struct node *dummy = q.head;
    struct node *first = atomic_load_explicit(&dummy->next, memory_order_acquire);
    if (first) {
        *value = first->value;
        *processed = first->processed;
        q.head = first; /* first becomes the dummy; the old dummy is ours */
    }
    int64_t t2 = spin_until(t1 + cs_ns); /* bookkeeping inside the critical section */
    pthread_mutex_unlock(&head_lock);
    account(s, t0, t1, t2);
    return first ? dummy : NULL;
}

/* Append a node at the tail. */
__attribute__((noinline)) static void enqueue(struct sums *s, struct node *n)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    int64_t t0 = now_ns();
    pthread_mutex_lock(&tail_lock); enqueue_line = __LINE__;
    int64_t t1 = now_ns();
    atomic_store_explicit(&q.tail->next, n, memory_order_release);
    q.tail = n;
    int64_t t2 = spin_until(t1 + cs_ns);
    pthread_mutex_unlock(&tail_lock);
    account(s, t0, t1, t2);
}

/* The new value: WORK_NS of arithmetic on the old one, outside any lock. */
__attribute__((noinline)) static uint64_t compute(uint64_t v)
{
    int64_t end = now_ns() + work_ns;
    do {
        for (int i = 0; i < 16; i++) { /* xorshift64 */
            v ^= v << 13;
            v ^= v >> 7;
            v ^= v << 17;
        }
    } while (now_ns() < end);
    return v;
}

struct worker {
    pthread_t thread;
    int id;
    long empty; /* dequeues that found the queue empty (cannot happen when ITEMS > THREADS) */
    struct sums head, tail;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "sq-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    /* Once before the measured phase: a probe's one-time set-up on a thread's first record
     * (its ring, milliseconds on a loaded machine) is not inside a measured wait. */
    pthread_mutex_lock(&warm_lock);
    pthread_mutex_unlock(&warm_lock);
    while (!atomic_load(&go))
        ;
    for (long i = 0; i < ops;) {
        uint64_t v;
        long processed;
        struct node *n = dequeue(&w->head, &v, &processed);
        if (!n) {
            w->empty++;
            continue;
        }
        n->value = compute(v);
        n->processed = processed + 1;
        enqueue(&w->tail, n);
        i++;
    }
    return NULL;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-t THREADS] [-n OPS] [-w WORK_NS] [-c CS_NS] [-q ITEMS]\n"
            "  -t  threads (default 4)\n"
            "  -n  remove+compute+insert operations per thread (default 20000)\n"
            "  -w  busy computation per operation, outside the locks, ns (default 2000)\n"
            "  -c  busy bookkeeping inside each critical section, ns (default 1000)\n"
            "  -q  items in the queue, more than THREADS (default 64)\n",
            prog);
    exit(2);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "t:n:w:c:q:h")) != -1) {
        switch (opt) {
        case 't': nthreads = (int)parse_count(argv[0], 't', optarg, 1, 1024); break;
        case 'n': ops = parse_count(argv[0], 'n', optarg, 1, 1000000000); break;
        case 'w': work_ns = parse_count(argv[0], 'w', optarg, 0, 1000000000); break;
        case 'c': cs_ns = parse_count(argv[0], 'c', optarg, 0, 1000000000); break;
        case 'q': nitems = (int)parse_count(argv[0], 'q', optarg, 1, 10000000); break;
        default: usage(argv[0]);
        }
    }
    if (optind != argc)
        usage(argv[0]);
    if (nitems <= nthreads) {
        fprintf(stderr, "%s: -q must exceed -t so that the queue is never empty\n", argv[0]);
        return 2;
    }

    /* nitems items plus the dummy node. */
    struct node *nodes = calloc((size_t)nitems + 1, sizeof *nodes);
    struct worker *w = calloc((size_t)nthreads, sizeof *w);
    if (!nodes || !w)
        return 1;
    q.head = q.tail = &nodes[0];
    for (int i = 1; i <= nitems; i++) {
        nodes[i].value = (uint64_t)i * 0x9E3779B97F4A7C15ull;
        atomic_store(&q.tail->next, &nodes[i]);
        q.tail = &nodes[i];
    }

    for (int i = 0; i < nthreads; i++) {
        w[i].id = i;
        if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    int64_t start = now_ns();
    atomic_store(&go, 1);
    for (int i = 0; i < nthreads; i++)
        pthread_join(w[i].thread, NULL);
    int64_t elapsed = now_ns() - start;

    /* Integrity: nitems items left, their counts add up to every operation done. */
    long items = 0, processed = 0;
    uint64_t checksum = 0;
    for (struct node *n = atomic_load(&q.head->next); n; n = atomic_load(&n->next)) {
        items++;
        processed += n->processed;
        checksum ^= n->value;
    }
    struct sums head = {0}, tail = {0};
    long empty = 0;
    for (int i = 0; i < nthreads; i++) {
        struct sums *ss[2] = {&w[i].head, &w[i].tail}, *to[2] = {&head, &tail};
        for (int k = 0; k < 2; k++) {
            to[k]->acquisitions += ss[k]->acquisitions;
            to[k]->waits_over_5us += ss[k]->waits_over_5us;
            to[k]->wait_ns += ss[k]->wait_ns;
            to[k]->hold_ns += ss[k]->hold_ns;
            if (ss[k]->max_hold_ns > to[k]->max_hold_ns)
                to[k]->max_hold_ns = ss[k]->max_hold_ns;
        }
        empty += w[i].empty;
    }
    long total_ops = (long)nthreads * ops;
    if (items != nitems || processed != total_ops) {
        fprintf(stderr, "%s: queue corrupted: %ld items, %ld operations counted, want %d, %ld\n",
                PROGRAM, items, processed, nitems, total_ops);
        return 1;
    }
    const char *file = base_name(__FILE__);
    printf("truth program=" PROGRAM " threads=%d ops_per_thread=%ld ops=%ld work_ns=%lld "
           "cs_ns=%lld items=%d locks=2 "
           "head_lock.addr=%p head_lock.sites=%s:%d:dequeue "
           "head_lock.acquisitions=%ld head_lock.wait_ns_total=%lld "
           "head_lock.hold_ns_total=%lld head_lock.hold_ns_max=%lld "
           "head_lock.waits_over_5us=%ld "
           "tail_lock.addr=%p tail_lock.sites=%s:%d:enqueue "
           "tail_lock.acquisitions=%ld tail_lock.wait_ns_total=%lld "
           "tail_lock.hold_ns_total=%lld tail_lock.hold_ns_max=%lld "
           "tail_lock.waits_over_5us=%ld "
           "wait_ns_total=%lld hold_ns_total=%lld empty_dequeues=%ld elapsed_ns=%lld "
           "checksum=%016llx\n",
           nthreads, ops, total_ops, (long long)work_ns, (long long)cs_ns, nitems,
           (void *)&head_lock, file, dequeue_line, head.acquisitions, (long long)head.wait_ns,
           (long long)head.hold_ns, (long long)head.max_hold_ns, head.waits_over_5us,
           (void *)&tail_lock, file, enqueue_line, tail.acquisitions, (long long)tail.wait_ns,
           (long long)tail.hold_ns, (long long)tail.max_hold_ns, tail.waits_over_5us,
           (long long)(head.wait_ns + tail.wait_ns), (long long)(head.hold_ns + tail.hold_ns),
           empty, (long long)elapsed,
           (unsigned long long)checksum);
    free(nodes);
    free(w);
    return 0;
}
