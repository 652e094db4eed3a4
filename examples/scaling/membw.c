/*
 * membw: threads that share nothing but the memory bus.
 *
 * THREADS threads each stream `a[i] = b[i] * 1.5 + a[i]` over their own two arrays of
 * doubles (SIZE_MIB in all per thread, half each; the default 64 MiB is twice this
 * machine's 32 MiB last-level cache, so every pass comes from DRAM, and small enough that
 * filling it costs ~0.03 s: page faults at the start would show as blocking, not streaming): 16 bytes read and 8
 * written per element.  No lock, no shared data, no sleep: the threads never wait for each
 * other, and on more cores they only slow each other down by competing for memory
 * bandwidth.  That shows as more CPU time for the same work (a stalled load is on-CPU
 * time), which is what the Tudor & Teo model calls memory/hardware contention: the
 * expected cause is `memory`.
 *
 * The work is fixed: WORK_MS x ELEMS_PER_MS elements per thread (whole passes over its
 * arrays and a last partial one), the same on 1 or 2 cores and for any thread count.
 * ELEMS_PER_MS is calibrated at start (main streams over arrays of the same size alone and
 * measures elements per ms of its own CPU time, CLOCK_THREAD_CPUTIME_ID) unless given
 * with -e; `membw -C` prints the calibration and exits, so that a script calibrates once
 * and passes -e to every run (contend scale compares the same work across
 * configurations).
 *
 * Each worker maps and fills its arrays before the start barrier, so page faults and the
 * kernel's zeroing of new pages are not in the timed phase (they still are in the
 * process's CPU time, mostly as system time, ~0.1 s per thread here, which `contend scale`
 * reports apart).  No transparent-huge-page hint: it would make the faults fewer, but with
 * the page cache full the kernel compacts memory for huge pages on the spot, which cost
 * 0.03-0.6 s per thread here, varying from run to run, against a steady ~0.12 s for small
 * pages.  Workers are named worker-0, worker-1, ... and start together (a pthread
 * barrier with main).  It ends with one line, e.g.
 *   truth program=membw threads=2 work_ms=400 size_mib=64 elems_per_ms=... worker0.tid=...
 *     worker0.cpu_ns=... gb_per_s=... expect=memory elapsed_ns=...
 * Fields are documented in examples/README.md.
 *
 * usage: membw [-t THREADS] [-w WORK_MS] [-s SIZE_MIB] [-e ELEMS_PER_MS] [-C]
 * defaults: -t 2 -w 400 -s 64 -e 0 (calibrate)
 *
 * build: cc -O2 -g -pthread membw.c -o membw
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- helpers (the same in every scaling example: each file stands alone, to be built
 * by itself as `contend demo` builds independent.c and serialised.c) ------------------ */

/* Nanoseconds on CLOCK_MONOTONIC. */
static inline int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* CPU time of the calling thread, ns (what the kernel's schedstat calls on-CPU time). */
static inline int64_t thread_cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Parse an integer option value or exit with a usage message. */
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

static inline long gettid_long(void)
{
    return (long)syscall(SYS_gettid);
}

/* CPUs this process may run on (what `contend scale` pins it to), not the machine's. */
static inline int allowed_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return (int)sysconf(_SC_NPROCESSORS_ONLN);
    return CPU_COUNT(&set);
}
/* ----------------------------------------------------------------------------------- */

/* One pass of the stream over n elements.  noinline so that it has a name in a profile. */
__attribute__((noinline)) static void stream(double *restrict a, const double *restrict b,
                                             size_t n)
{
    for (size_t i = 0; i < n; i++)
        a[i] = b[i] * 1.5 + a[i];
}

/* Two arrays of n doubles each, mapped privately and filled: after this no page fault is
 * left for the stream.  Exits on failure. */
static void map_arrays(size_t n, double **a, double **b)
{
    size_t bytes = n * sizeof(double);
    for (int k = 0; k < 2; k++) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("membw: mmap");
            exit(1);
        }
        if (k == 0)
            *a = p;
        else
            *b = p;
    }
    for (size_t i = 0; i < n; i++) {
        (*a)[i] = 1.0;
        (*b)[i] = (double)(i & 1023) * 0.001;
    }
}

static void unmap_arrays(size_t n, double *a, double *b)
{
    munmap(a, n * sizeof(double));
    munmap(b, n * sizeof(double));
}

/* Elements streamed per ms of this thread's CPU time, over arrays of n elements: one pass
 * to warm up (TLB, prefetchers), then passes until >= 50 ms of CPU time. */
static long calibrate(size_t n)
{
    double *a, *b;
    map_arrays(n, &a, &b);
    stream(a, b, n);
    int64_t c0 = thread_cpu_ns();
    long passes = 0;
    int64_t c;
    do {
        stream(a, b, n);
        passes++;
        c = thread_cpu_ns() - c0;
    } while (c < 50000000);
    unmap_arrays(n, a, b);
    return (long)((double)n * (double)passes * 1e6 / (double)c) + 1;
}

static int nthreads = 2;
static long work_ms = 400, size_mib = 64, elems_per_ms = 0;
static size_t elems; /* per array */
static pthread_barrier_t start_line;

struct worker {
    pthread_t thread;
    int id;
    long tid;
    double *a, *b;
    int64_t fill_cpu_ns, cpu_ns, end_ns;
    double result;
} __attribute__((aligned(64))); /* one cache line each: no false sharing */

/* The work, in chunks of 1 ms of one thread's stream, shared by all threads: each takes the
 * next chunk until none is left, so the threads end within a chunk of each other.  With a
 * fixed share each, the thread that got less bandwidth ran on alone at the end while the
 * other had finished (40-80 ms here), which the scaling model rightly counts as waiting, not
 * memory contention.  One atomic per ms: no sharing to speak of. */
static atomic_long chunks_left;

/* Streams chunks from the pool over the thread's own arrays, going on where it stopped. */
static void stream_from_pool(double *a, double *b)
{
    size_t at = 0;
    while (atomic_fetch_sub_explicit(&chunks_left, 1, memory_order_relaxed) > 0) {
        long left = elems_per_ms;
        while (left > 0) {
            size_t n = elems - at;
            if ((size_t)left < n)
                n = (size_t)left;
            stream(a + at, b + at, n);
            at = (at + n) % elems;
            left -= (long)n;
        }
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "worker-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    w->tid = gettid_long();
    map_arrays(elems, &w->a, &w->b);
    w->fill_cpu_ns = thread_cpu_ns();
    pthread_barrier_wait(&start_line);
    stream_from_pool(w->a, w->b);
    w->result = w->a[0] + w->a[elems / 2] + w->a[elems - 1];
    w->cpu_ns = thread_cpu_ns();
    w->end_ns = now_ns();
    return NULL;
}

static void usage(const char *prog, FILE *to, int code)
{
    fprintf(to,
            "usage: %s [-t THREADS] [-w WORK_MS] [-s SIZE_MIB] [-e ELEMS_PER_MS] [-C]\n"
            "  -t  worker threads (default 2)\n"
            "  -w  stream per thread, in ms of one thread's CPU time on this machine (default 400)\n"
            "  -s  MiB of arrays per thread, two arrays of half each (default 64)\n"
            "  -e  elements streamed per ms (default 0: calibrate at start)\n"
            "  -C  calibrate, print `calibration ... elems_per_ms=N` and exit\n"
            "Prints a `truth ...` line with each worker's CPU time and the wall time.\n",
            prog);
    exit(code);
}

int main(int argc, char **argv)
{
    int opt, calibrate_only = 0;
    while ((opt = getopt(argc, argv, "t:w:s:e:Ch")) != -1) {
        switch (opt) {
        case 't': nthreads = (int)parse_count(argv[0], 't', optarg, 1, 1024); break;
        case 'w': work_ms = parse_count(argv[0], 'w', optarg, 0, 100000000); break;
        case 's': size_mib = parse_count(argv[0], 's', optarg, 1, 1L << 20); break;
        case 'e': elems_per_ms = parse_count(argv[0], 'e', optarg, 0, 1000000000); break;
        case 'C': calibrate_only = 1; break;
        case 'h': usage(argv[0], stdout, 0); break;
        default: usage(argv[0], stderr, 2);
        }
    }
    if (optind != argc)
        usage(argv[0], stderr, 2);
    elems = (size_t)size_mib * 1024 * 1024 / 2 / sizeof(double);

    int64_t cal0 = now_ns();
    if (elems_per_ms == 0 || calibrate_only)
        elems_per_ms = calibrate(elems);
    int64_t calibration_ns = now_ns() - cal0;
    if (calibrate_only) {
        printf("calibration program=membw size_mib=%ld elems_per_ms=%ld calibration_ns=%lld\n",
               size_mib, elems_per_ms, (long long)calibration_ns);
        return 0;
    }

    struct worker *w = aligned_alloc(64, sizeof *w * (size_t)nthreads);
    if (!w)
        return 1;
    memset(w, 0, sizeof *w * (size_t)nthreads);
    atomic_store(&chunks_left, (long)nthreads * work_ms);
    pthread_barrier_init(&start_line, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        w[i].id = i;
        if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    pthread_barrier_wait(&start_line);
    int64_t start = now_ns();
    for (int i = 0; i < nthreads; i++)
        pthread_join(w[i].thread, NULL);
    int64_t wall = now_ns() - start;

    long per_thread = work_ms * elems_per_ms;
    double checksum = 0;
    int64_t cpu_min = INT64_MAX, cpu_max = 0, cpu_total = 0, stream_total = 0;
    for (int i = 0; i < nthreads; i++) {
        checksum += w[i].result;
        cpu_total += w[i].cpu_ns;
        stream_total += w[i].cpu_ns - w[i].fill_cpu_ns;
        if (w[i].cpu_ns < cpu_min)
            cpu_min = w[i].cpu_ns;
        if (w[i].cpu_ns > cpu_max)
            cpu_max = w[i].cpu_ns;
    }
    /* 24 bytes per element: a and b read, a written back. */
    double bytes = 24.0 * (double)per_thread * nthreads;
    printf("truth program=membw threads=%d cpus=%d work_ms=%ld size_mib=%ld elems_per_ms=%ld "
           "elems_per_thread=%ld passes_per_thread=%.2f calibration_ns=%lld",
           nthreads, allowed_cpus(), work_ms, size_mib, elems_per_ms, per_thread,
           (double)per_thread / (double)elems, (long long)calibration_ns);
    for (int i = 0; i < nthreads; i++)
        printf(" worker%d.tid=%ld worker%d.cpu_ns=%lld worker%d.fill_cpu_ns=%lld"
               " worker%d.busy_ns=%lld",
               i, w[i].tid, i, (long long)w[i].cpu_ns, i, (long long)w[i].fill_cpu_ns, i,
               (long long)(w[i].end_ns - start));
    printf(" cpu_ns_min=%lld cpu_ns_max=%lld cpu_ns_total=%lld stream_cpu_ns_total=%lld"
           " gb_per_s=%.2f expect=memory elapsed_ns=%lld checksum=%.6g\n",
           (long long)cpu_min, (long long)cpu_max, (long long)cpu_total, (long long)stream_total,
           wall > 0 ? bytes / (double)wall : 0.0, (long long)wall, checksum);
    for (int i = 0; i < nthreads; i++)
        unmap_arrays(elems, w[i].a, w[i].b);
    pthread_barrier_destroy(&start_line);
    free(w);
    return 0;
}
