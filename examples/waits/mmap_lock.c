/* Threads that hammer mmap/munmap on one process, so its mmap_lock (a kernel rwsem taken for
 * writing by both calls) is contended: a kernel lock the program never names, hit through
 * system calls. Each thread maps a private anonymous region, touches its pages (page faults:
 * the work the kernel does under the lock is then worth waiting for), and unmaps it.
 *
 * Build: cc -O2 -g -pthread examples/waits/mmap_lock.c -o mmap_lock
 * Options: -t THREADS (4), -n ROUNDS_PER_THREAD (2000), -p PAGES (16).
 *
 * Truth line (examples/README.md): per thread tN.tid, and for the mmap() calls and the
 * munmap() calls apart (tN.mmap_*, tN.munmap_*): calls, wall_ns (CLOCK_MONOTONIC inside the
 * calls), offcpu_ns (of that, the time the thread was not on a CPU: wall minus its own CPU
 * clock), blocked_ns (of that, the time it slept rather than waited for a CPU: see mark()
 * below), slow (calls over 50 us); and tN.edge_ns, what the readings alone add to blocked_ns
 * per call. Inside these calls the only
 * sleeps are waits for the process's memory-map locks (mmap_lock, a VMA's lock); the program
 * cannot tell which, nor see the waits of its page faults (outside the timed calls). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct calls {
	unsigned long calls, wall_ns, offcpu_ns, blocked_ns, slow;
};

struct thread {
	pthread_t handle;
	long tid;
	unsigned long edge_ns;
	struct calls map, unmap;
};

static int rounds = 2000, pages = 16;
static pthread_barrier_t start;

static unsigned long now(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (unsigned long)ts.tv_sec * 1000000000UL + (unsigned long)ts.tv_nsec;
}

/* The thread's run_delay (ns waiting on a run queue), from its open schedstat file. */
static unsigned long run_delay(int fd)
{
	char buf[128];
	unsigned long on_cpu = 0, delay = 0;
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	sscanf(buf, "%lu %lu", &on_cpu, &delay);
	return delay;
}

/* Readings before a call, and their accounting after it.
 *
 * The time a call slept (blocked, not runnable) is its time off CPU (wall minus the thread's
 * CPU clock) minus its time waiting for a CPU (schedstat's run_delay). The readings cannot be
 * taken at one instant, and the kernel preempts a thread where it returns from a system call
 * (the CPU clock's and the schedstat read's own, as well as the measured call's): the order
 * makes every such run-queue wait count in both spans or in neither. Before: the wall clock
 * (vDSO, no system call), run_delay, the CPU clock; after: the CPU clock, the wall clock,
 * run_delay. A wait at the return of the first run_delay read, of the first CPU clock read, of
 * the call or of the second CPU clock read lies inside the wall span and after the first
 * run_delay read and before the second: in both. What is left is CPU time the CPU clock's
 * span misses (the first run_delay read, the clock reads' own entries): the same in a call
 * that does nothing, which the program measures first (edge_ns, per call). */
struct mark {
	unsigned long wall, cpu, delay;
};

static struct mark mark(int fd)
{
	struct mark m;
	m.wall = now(CLOCK_MONOTONIC);
	m.delay = run_delay(fd);
	m.cpu = now(CLOCK_THREAD_CPUTIME_ID);
	return m;
}

static unsigned long minus(unsigned long a, unsigned long b)
{
	return a > b ? a - b : 0;
}

/* The time slept between m0 and now. */
static unsigned long account(struct calls *c, struct mark m0, int fd)
{
	unsigned long cpu = now(CLOCK_THREAD_CPUTIME_ID);
	unsigned long wall = now(CLOCK_MONOTONIC);
	unsigned long delay = run_delay(fd);
	unsigned long w = wall - m0.wall, off = minus(w, cpu - m0.cpu);
	unsigned long slept = minus(off, delay - m0.delay);
	if (c) {
		c->calls++;
		c->wall_ns += w;
		c->offcpu_ns += off;
		c->blocked_ns += slept;
		c->slow += w > 50000;
	}
	return slept;
}

static int by_value(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return x < y ? -1 : x > y;
}

static void *hammer(void *arg)
{
	struct thread *t = arg;
	size_t len = (size_t)pages * 4096;
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	t->tid = syscall(SYS_gettid);
	/* The readings' own share of "slept", around nothing (the median of 101 tries: one
	 * preempted try must not set it). */
	unsigned long edges[101];
	for (int i = 0; i < 101; i++)
		edges[i] = account(NULL, mark(fd), fd);
	qsort(edges, 101, sizeof edges[0], by_value);
	t->edge_ns = edges[50];
	pthread_barrier_wait(&start);
	for (int i = 0; i < rounds; i++) {
		struct mark m0 = mark(fd);
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		account(&t->map, m0, fd);
		if (p == MAP_FAILED) {
			perror("mmap_lock: mmap");
			exit(1);
		}
		for (size_t off = 0; off < len; off += 4096)
			p[off] = (char)i;
		m0 = mark(fd);
		int r = munmap(p, len);
		account(&t->unmap, m0, fd);
		if (r != 0) {
			perror("mmap_lock: munmap");
			exit(1);
		}
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int number(const char *flag, const char *v)
{
	char *end;
	long n = v ? strtol(v, &end, 10) : 0;
	if (!v || *end || n <= 0 || n > 1000000) {
		fprintf(stderr, "mmap_lock: %s takes a number from 1 to 1000000\n", flag);
		exit(2);
	}
	return (int)n;
}

static void print_calls(int i, const char *what, const struct calls *c)
{
	printf(" t%d.%s_calls=%lu t%d.%s_wall_ns=%lu t%d.%s_offcpu_ns=%lu", i, what, c->calls, i,
	       what, c->wall_ns, i, what, c->offcpu_ns);
	printf(" t%d.%s_blocked_ns=%lu t%d.%s_slow=%lu", i, what, c->blocked_ns, i, what, c->slow);
}

int main(int argc, char **argv)
{
	int threads = 4;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-t"))
			threads = number("-t", i + 1 < argc ? argv[++i] : NULL);
		else if (!strcmp(argv[i], "-n"))
			rounds = number("-n", i + 1 < argc ? argv[++i] : NULL);
		else if (!strcmp(argv[i], "-p"))
			pages = number("-p", i + 1 < argc ? argv[++i] : NULL);
		else {
			fprintf(stderr, "usage: mmap_lock [-t THREADS] [-n ROUNDS_PER_THREAD] [-p PAGES]\n");
			return 2;
		}
	}
	if (threads > 256) {
		fprintf(stderr, "mmap_lock: at most 256 threads\n");
		return 2;
	}
	struct thread *t = calloc((size_t)threads, sizeof *t);
	if (!t) {
		perror("mmap_lock");
		return 1;
	}
	pthread_barrier_init(&start, NULL, (unsigned)threads);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i].handle, NULL, hammer, &t[i]) != 0) {
			fprintf(stderr, "mmap_lock: pthread_create failed\n");
			return 1;
		}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i].handle, NULL);
	printf("truth program=mmap_lock threads=%d rounds_per_thread=%d pages=%d", threads, rounds,
	       pages);
	for (int i = 0; i < threads; i++) {
		printf(" t%d.tid=%ld t%d.edge_ns=%lu", i, t[i].tid, i, t[i].edge_ns);
		print_calls(i, "mmap", &t[i].map);
		print_calls(i, "munmap", &t[i].unmap);
	}
	printf("\n");
	free(t);
	return 0;
}
