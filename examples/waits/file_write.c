/* Threads that overwrite the start of one file, each through its own descriptor, so the
 * file's inode lock (i_rwsem, taken for writing by every write(2) to a regular file) is
 * contended: a kernel lock the program never names. Each write copies -k KiB into the page
 * cache under the lock; the file stays that long (pwrite at offset 0), so nothing but the
 * page cache's periodic writeback reaches the disk.
 *
 * Build: cc -O2 -g -pthread examples/waits/file_write.c -o file_write
 * Options: -t THREADS (4), -n WRITES_PER_THREAD (5000), -k KIB_PER_WRITE (64),
 * -d DIRECTORY (the file is created new there, mkstemp, and removed at exit; $TMPDIR or /tmp).
 *
 * Truth line (examples/README.md): per thread tN.tid, tN.edge_ns, and for its pwrite() calls
 * tN.write_calls, _wall_ns, _offcpu_ns, _blocked_ns, _slow, measured as
 * examples/waits/mmap_lock.c measures its calls (see mark() there and below). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	struct calls write;
};

static int writes = 5000, kib = 64;
static char path[4096];
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

/* Readings before a call, and their accounting after it (as in examples/waits/mmap_lock.c).
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

static void *writer(void *arg)
{
	struct thread *t = arg;
	size_t len = (size_t)kib * 1024;
	char *buf = malloc(len);
	int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	int file = open(path, O_WRONLY | O_CLOEXEC);
	if (!buf || file < 0) {
		perror("file_write");
		exit(1);
	}
	memset(buf, 'x', len);
	t->tid = syscall(SYS_gettid);
	unsigned long edges[101];
	for (int i = 0; i < 101; i++)
		edges[i] = account(NULL, mark(fd), fd);
	qsort(edges, 101, sizeof edges[0], by_value);
	t->edge_ns = edges[50];
	pthread_barrier_wait(&start);
	for (int i = 0; i < writes; i++) {
		struct mark m0 = mark(fd);
		ssize_t n = pwrite(file, buf, len, 0);
		account(&t->write, m0, fd);
		if (n < 0) {
			perror("file_write: pwrite");
			exit(1);
		}
	}
	close(file);
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

static int number(const char *flag, const char *v)
{
	char *end;
	long n = v ? strtol(v, &end, 10) : 0;
	if (!v || *end || n <= 0 || n > 1000000) {
		fprintf(stderr, "file_write: %s takes a number from 1 to 1000000\n", flag);
		exit(2);
	}
	return (int)n;
}

int main(int argc, char **argv)
{
	int threads = 4;
	const char *dir = getenv("TMPDIR");
	if (!dir || !*dir)
		dir = "/tmp";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-t"))
			threads = number("-t", i + 1 < argc ? argv[++i] : NULL);
		else if (!strcmp(argv[i], "-n"))
			writes = number("-n", i + 1 < argc ? argv[++i] : NULL);
		else if (!strcmp(argv[i], "-k"))
			kib = number("-k", i + 1 < argc ? argv[++i] : NULL);
		else if (!strcmp(argv[i], "-d") && i + 1 < argc)
			dir = argv[++i];
		else {
			fprintf(stderr, "usage: file_write [-t THREADS] [-n WRITES_PER_THREAD] [-k KIB_PER_WRITE] [-d DIRECTORY]\n");
			return 2;
		}
	}
	if (threads > 256 || kib > 65536) {
		fprintf(stderr, "file_write: at most 256 threads and 65536 KiB a write\n");
		return 2;
	}
	if (snprintf(path, sizeof path, "%s/file_write.XXXXXX", dir) >= (int)sizeof path) {
		fprintf(stderr, "file_write: directory name too long\n");
		return 2;
	}
	/* A new file of our own (O_EXCL, mode 0600), never a name someone else prepared. */
	int made = mkstemp(path);
	if (made < 0) {
		perror("file_write: mkstemp");
		return 1;
	}
	close(made);
	struct thread *t = calloc((size_t)threads, sizeof *t);
	if (!t) {
		perror("file_write");
		unlink(path);
		return 1;
	}
	pthread_barrier_init(&start, NULL, (unsigned)threads);
	for (int i = 0; i < threads; i++)
		if (pthread_create(&t[i].handle, NULL, writer, &t[i]) != 0) {
			fprintf(stderr, "file_write: pthread_create failed\n");
			unlink(path);
			return 1;
		}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i].handle, NULL);
	unlink(path);
	printf("truth program=file_write threads=%d writes_per_thread=%d kib=%d", threads, writes,
	       kib);
	for (int i = 0; i < threads; i++) {
		const struct calls *c = &t[i].write;
		printf(" t%d.tid=%ld t%d.edge_ns=%lu t%d.write_calls=%lu t%d.write_wall_ns=%lu", i,
		       t[i].tid, i, t[i].edge_ns, i, c->calls, i, c->wall_ns);
		printf(" t%d.write_offcpu_ns=%lu t%d.write_blocked_ns=%lu t%d.write_slow=%lu", i,
		       c->offcpu_ns, i, c->blocked_ns, i, c->slow);
	}
	printf("\n");
	free(t);
	return 0;
}
