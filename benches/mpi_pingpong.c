/*
 * The MPI wrapper's cost (scripts/bench-mpi.sh): per call, and on a ping-pong loop.
 *
 *   mpirun -np 1 mpi_pingpong calls N      N calls of MPI_Iprobe (a local call that returns at
 *                                          once, flag 0): ns per call
 *   mpirun -np 2 mpi_pingpong pingpong N   N round trips of an 8-byte message between ranks 0
 *                                          and 1 (MPI_Send/MPI_Recv): ns per round trip
 *   ... calls N ab, ... pingpong N ab      the same, in 200 blocks of N/200 alternating between
 *                                          the PMPI_ functions (a: never wrapped) and the MPI_
 *                                          ones (b: wrapped when the wrapper is preloaded), in
 *                                          the order ab ba ab ...: each pair sees the same
 *                                          stretch of a noisy machine. Adds a_ns, b_ns (medians
 *                                          of the blocks), ab_ratio and ab_diff (medians over
 *                                          the pairs of b/a and b - a)
 *   mpi_pingpong clock N                   (no MPI) N reads of CLOCK_MONOTONIC, as the
 *                                          wrapper reads it: ns per read
 *   mpi_pingpong parts N DIR               (no MPI) the parts of a recorded call, timed alone
 *                                          with the wrapper's own writer (mpi/cst_writer.h):
 *                                          see parts() below
 *
 * Each MPI mode runs a warm-up of N/10 first, then MPI_Barrier, then the timed loop
 * (CLOCK_MONOTONIC around it), then one MPI_Gather of what every rank saw. Rank 0 prints one
 * line of key=value pairs:
 *
 *   ns_per_op=X      the timed loop's time over its operations (N, or 200 blocks in ab mode)
 *   b_ops=X          operations of the timed loop made through MPI_ functions (N, or N/2 in
 *                    ab mode): a recorded run holds N/10 + b_ops groups of each function
 *   best_ns=X        the fastest of its 20 blocks of N/20 operations, per operation (on a
 *                    noisy VM the host's placement of the vCPUs changes the speed of a whole
 *                    stretch of the run: this is the speed of its best stretch); in ab mode
 *                    the fastest b block
 *   wrapper=a,b      per rank: 1 if libcontend-mpi is mapped into the process (preloaded)
 *   tracing=a,b      per rank: 1 if CONTEND_MPI_DIR is set
 *   allowed=a,b      per rank: the CPUs it may run on (hex mask, from sched_getaffinity)
 *   ran_on=a,b       per rank: the CPUs it was seen on (hex mask, sched_getcpu every 256
 *                    iterations of the timed loop)
 *   cs_per_op=X      context switches (voluntary + involuntary, all ranks) per operation in
 *                    the timed loop: near 0 when each rank has a CPU to itself
 *   off_cpu=a,b      per rank: the fraction of the timed loop's wall time it was not running
 *                    (1 - its CPU time, getrusage, over the wall time). MPI ranks poll while
 *                    they wait, so this is the time something else took their CPU: other
 *                    processes, mpirun's daemons, kernel threads (the sign of a disturbed run)
 *   steal_cpu=X      CPUs' worth of time the hypervisor ran something else during the loop
 *                    (steal in /proc/stat, 10 ms ticks: coarse on short loops)
 *
 * so that the script can check that a configuration is what it claims (bare, preloaded,
 * recording; pinned or not). The MPI calls in the loops are the only ones that scale with N:
 * a recorded run holds N/10 + b_ops MPI_Iprobe groups (calls) or N/10 + b_ops MPI_Send and
 * MPI_Recv groups per rank (pingpong).
 */
#define _GNU_SOURCE
#include <mpi.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../mpi/cst_writer.h"

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

#define BLOCKS 20
#define AB_PAIRS 100

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts a copy; n <= AB_PAIRS). */
static double median(const double *v, int n)
{
    double c[AB_PAIRS];
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    return n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
}

static uint64_t g_seen; /* CPUs this rank was seen on during the timed loop */

static inline void note_cpu(long i)
{
    if ((i & 255) == 0) {
        int c = sched_getcpu();
        if (c >= 0 && c < 64)
            g_seen |= 1ull << c;
    }
}

/* `pmpi`: call the library's PMPI_ functions, which no wrapper intercepts. */
static void probes(long n, int timed, int pmpi)
{
    int flag;
    MPI_Status st;
    for (long i = 0; i < n; i++) {
        if (pmpi)
            PMPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, &st);
        else
            MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_WORLD, &flag, &st);
        if (timed)
            note_cpu(i);
    }
}

static void pingpong(int rank, long n, int timed, int pmpi)
{
    char buf[8] = {0};
    for (long i = 0; i < n; i++) {
        if (pmpi) {
            if (rank == 0) {
                PMPI_Send(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
                PMPI_Recv(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                PMPI_Recv(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                PMPI_Send(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
            }
        } else if (rank == 0) {
            MPI_Send(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
        if (timed)
            note_cpu(i);
    }
}

/* 1 if the contend MPI wrapper is mapped into this process. */
static int wrapper_mapped(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f)
        return -1;
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, "libcontend-mpi") != NULL;
    fclose(f);
    return found;
}

static uint64_t allowed_cpus(void)
{
    cpu_set_t s;
    uint64_t m = 0;
    if (sched_getaffinity(0, sizeof s, &s) == 0)
        for (int c = 0; c < 64; c++)
            if (CPU_ISSET(c, &s))
                m |= 1ull << c;
    return m;
}

/* The machine's stolen time so far, in ns (from clock ticks). */
static double machine_steal(void)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8)
        return 0;
    /* user nice system idle iowait irq softirq steal */
    return (double)v[7] * 1e9 / (double)sysconf(_SC_CLK_TCK);
}

static double own_cpu_ns(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return ((double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec) * 1e9 +
           ((double)u.ru_utime.tv_usec + (double)u.ru_stime.tv_usec) * 1e3;
}

static long switches(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_nvcsw + u.ru_nivcsw;
}

static int clock_reads(long n)
{
    struct timespec t;
    long long sum = 0;
    for (long i = 0; i < n / 10; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        sum += t.tv_nsec;
    }
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        sum += t.tv_nsec;
    }
    double t1 = now_ns();
    printf("ns_per_op=%.1f (checksum %lld)\n", (t1 - t0) / (double)n, sum & 1);
    return 0;
}

/* N call groups of 5 records (an MPI_Iprobe that found nothing: enter, source, tag, flag,
 * exit), written as the wrapper writes them (call-site lookup, encoding, the group never split
 * between chunks, a chunk of 4096 records flushed when full: CRC-32 and one write(2)) into
 * `fd`; ns per group. No clock read: the timestamps are the loop counter. */
static double groups_into(int fd, long n)
{
    cst_writer w;
    cst_header h = {CST_STREAM_RANK, CST_CLOCK_MONOTONIC, 1000000000u, 1, 0, 0, 0};
    if (cst_open(&w, fd, &h, CST_DEFAULT_CHUNK_EVENTS) != 0)
        return -1;
    uint8_t r[16];
    double t0 = now_ns();
    for (long i = 0; i < n; i++) {
        uint64_t ts = (uint64_t)i;
        if (w.buffered > 0 && w.buffered + 5 > w.chunk_events)
            (void)cst_flush(&w);
        uint16_t site = cst_intern_site(&w, 0x401234);
        cst_mpi_enter(r, ts, 51, site, 0);
        cst_push_encoded(&w, r);
        cst_mpi_arg(r, ts, 4, cst_mpi_signed48(-1));
        cst_push_encoded(&w, r);
        cst_mpi_arg(r, ts, 5, cst_mpi_signed48(12345));
        cst_push_encoded(&w, r);
        cst_mpi_arg(r, ts, 16, cst_mpi_unsigned48(0));
        cst_push_encoded(&w, r);
        cst_mpi_exit(r, ts + 1, 51, 0);
        cst_push_encoded(&w, r);
        if (w.buffered >= w.chunk_events)
            (void)cst_flush(&w);
    }
    (void)cst_finish(&w, (uint64_t)n);
    double t1 = now_ns();
    cst_free(&w);
    return (t1 - t0) / (double)n;
}

static volatile uint32_t crc_sink;

/* The parts of the wrapper's cost per recorded call, each timed alone (best of 5):
 *   clock_ns         one CLOCK_MONOTONIC read (the wrapper makes two per call)
 *   mutex_ns         an uncontended pthread_mutex_lock + unlock (one per call)
 *   crc_ns_per_byte  cst_crc32 over 64 KiB (the chunk's payload; 80 bytes per group)
 *   group_null_ns    a 5-record group written into /dev/null: encoding, buffering, the CRC,
 *                    and a write(2) per 64 KiB that copies nothing
 *   group_file_ns    the same into a new file in DIR: the write(2) copies into the page cache
 *   off_cpu          the fraction of the measurement's wall time this process was not running
 *                    (as for the MPI modes: above 0.05, something else took the CPU)
 */
static int parts(long n, const char *dir)
{
    double best[5] = {-1, -1, -1, -1, -1};
    static uint8_t buf[65536];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (uint8_t)(i * 2654435761u >> 13);
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    char path[4096];
    snprintf(path, sizeof path, "%s/parts-%d.cst", dir, (int)getpid());
    double wall0 = now_ns(), own0 = own_cpu_ns();
    for (int round = 0; round < 5; round++) {
        struct timespec t;
        double v[5], t0 = now_ns();
        for (long i = 0; i < n; i++)
            clock_gettime(CLOCK_MONOTONIC, &t);
        v[0] = (now_ns() - t0) / (double)n;
        t0 = now_ns();
        for (long i = 0; i < n; i++) {
            pthread_mutex_lock(&m);
            __asm__ volatile("" ::: "memory");
            pthread_mutex_unlock(&m);
        }
        v[1] = (now_ns() - t0) / (double)n;
        uint32_t crc = 0;
        long chunks = n / 800 + 1; /* the bytes of n groups */
        t0 = now_ns();
        for (long i = 0; i < chunks; i++)
            crc = cst_crc32(crc, buf, sizeof buf);
        v[2] = (now_ns() - t0) / ((double)chunks * sizeof buf);
        crc_sink = crc;
        int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        v[3] = groups_into(fd, n);
        close(fd);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) {
            perror(path);
            return 1;
        }
        v[4] = groups_into(fd, n);
        close(fd);
        unlink(path);
        for (int k = 0; k < 5; k++)
            if (best[k] < 0 || v[k] < best[k])
                best[k] = v[k];
    }
    double wall = now_ns() - wall0, own = own_cpu_ns() - own0;
    printf("clock_ns=%.1f mutex_ns=%.1f crc_ns_per_byte=%.3f group_null_ns=%.1f "
           "group_file_ns=%.1f off_cpu=%.4f\n",
           best[0], best[1], best[2], best[3], best[4], (wall - own) / wall);
    return 0;
}

/* One rank's observations, gathered to rank 0. */
typedef struct seen {
    long long wrapper, tracing, allowed, ran_on, switches, cpu_ns, wall_ns;
} seen;

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "clock"))
        return clock_reads(atol(argv[2]));
    if (argc == 4 && !strcmp(argv[1], "parts"))
        return parts(atol(argv[2]), argv[3]);
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int ab = argc == 4 && !strcmp(argv[3], "ab");
    if ((argc != 3 && !ab) || (strcmp(argv[1], "calls") && strcmp(argv[1], "pingpong"))) {
        if (rank == 0)
            fprintf(stderr, "usage: mpi_pingpong calls|pingpong N [ab] | clock N | parts N DIR\n");
        MPI_Finalize();
        return 2;
    }
    long n = atol(argv[2]);
    int pp = !strcmp(argv[1], "pingpong");
    if (pp && size < 2) {
        if (rank == 0)
            fprintf(stderr, "mpi_pingpong pingpong needs 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    if (pp)
        pingpong(rank, n / 10, 0, 0);
    else
        probes(n / 10, 0, 0);
    MPI_Barrier(MPI_COMM_WORLD);
    double steal0 = machine_steal();
    double own0 = own_cpu_ns();
    long cs0 = switches();
    double t0 = now_ns(), best = -1;
    long timed = n, b_ops = n;
    static double a_ns[AB_PAIRS], b_ns[AB_PAIRS];
    if (!ab) {
        long block = n / BLOCKS > 0 ? n / BLOCKS : n;
        for (long done = 0; done < n;) {
            long k = n - done < block ? n - done : block;
            double b0 = now_ns();
            if (pp)
                pingpong(rank, k, 1, 0);
            else
                probes(k, 1, 0);
            double per = (now_ns() - b0) / (double)k;
            if (k == block && (best < 0 || per < best))
                best = per;
            done += k;
        }
    } else {
        /* Pairs of blocks, one through PMPI_ (a), one through MPI_ (b), in the order ab, ba,
         * ab, ...: both see the same stretch of the machine. */
        long block = n / (2 * AB_PAIRS) > 0 ? n / (2 * AB_PAIRS) : 1;
        for (int k = 0; k < AB_PAIRS; k++)
            for (int h = 0; h < 2; h++) {
                int pmpi = (k & 1) ? h == 1 : h == 0;
                double b0 = now_ns();
                if (pp)
                    pingpong(rank, block, 1, pmpi);
                else
                    probes(block, 1, pmpi);
                double per = (now_ns() - b0) / (double)block;
                (pmpi ? a_ns : b_ns)[k] = per;
                if (!pmpi && (best < 0 || per < best))
                    best = per;
            }
        timed = 2 * AB_PAIRS * block;
        b_ops = AB_PAIRS * block;
    }
    double t1 = now_ns();
    long cs1 = switches();
    double own1 = own_cpu_ns();
    double steal1 = machine_steal();

    seen mine = {wrapper_mapped(), getenv("CONTEND_MPI_DIR") != NULL, (long long)allowed_cpus(),
                 (long long)g_seen, cs1 - cs0, (long long)(own1 - own0), (long long)(t1 - t0)};
    seen *all = rank == 0 ? calloc((size_t)size, sizeof *all) : NULL;
    MPI_Gather(&mine, 7, MPI_LONG_LONG, all, 7, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        long long cs = 0;
        printf("ns_per_op=%.1f best_ns=%.1f b_ops=%ld", (t1 - t0) / (double)timed, best, b_ops);
        if (ab) {
            double ratio[AB_PAIRS], diff[AB_PAIRS];
            for (int k = 0; k < AB_PAIRS; k++) {
                ratio[k] = b_ns[k] / a_ns[k];
                diff[k] = b_ns[k] - a_ns[k];
            }
            printf(" a_ns=%.1f b_ns=%.1f ab_ratio=%.4f ab_diff=%.1f", median(a_ns, AB_PAIRS),
                   median(b_ns, AB_PAIRS), median(ratio, AB_PAIRS), median(diff, AB_PAIRS));
        }
        const char *key[] = {"wrapper", "tracing", "allowed", "ran_on"};
        for (int k = 0; k < 4; k++) {
            printf(" %s=", key[k]);
            for (int r = 0; r < size; r++) {
                long long v = ((long long *)&all[r])[k];
                printf(k >= 2 ? "%s%llx" : "%s%lld", r ? "," : "", v);
            }
        }
        printf(" off_cpu=");
        for (int r = 0; r < size; r++) {
            cs += all[r].switches;
            double wall = (double)all[r].wall_ns;
            printf("%s%.4f", r ? "," : "", wall > 0 ? (wall - (double)all[r].cpu_ns) / wall : 0);
        }
        printf(" cs_per_op=%.4f steal_cpu=%.3f\n", (double)cs / (double)timed,
               (steal1 - steal0) / (t1 - t0));
        free(all);
    }
    MPI_Finalize();
    return 0;
}
