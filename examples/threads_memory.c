/*
 * threads_memory: a small multithreaded program with memory of every kind, for `contend where`.
 *
 * It starts NTHREADS named threads ("spinner" burns CPU, the "sleeper-N" threads block) and
 * makes resident: heap (small mallocs by the main thread, which glibc serves from the brk heap),
 * per-thread buffers (8 MiB mallocs in each thread: glibc serves those from anonymous mmaps, so
 * they count as anonymous memory, not heap), a private anonymous mapping, a shared anonymous
 * mapping, a file-backed mapping of its own executable, and a touched stack array.
 * It prints "ready <pid>" once everything is resident, then runs until killed or for SECONDS.
 *
 * usage: threads_memory [SECONDS]     (default 60)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 3
#define HEAP_PER_THREAD (8u << 20)
#define ANON_BYTES (16u << 20)
#define SHARED_BYTES (4u << 20)
#define HEAP_CHUNKS 64
#define HEAP_CHUNK (64u << 10) /* below glibc's mmap threshold (128 KiB): served from brk */

static pthread_barrier_t ready;
static volatile int stop;

static void touch(char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 4096)
        p[i] = (char)i;
}

static void *spinner(void *arg)
{
    (void)arg;
    char *heap = malloc(HEAP_PER_THREAD);
    touch(heap, HEAP_PER_THREAD);
    pthread_barrier_wait(&ready);
    volatile unsigned long x = 0;
    while (!stop)
        x++;
    free(heap);
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    char *heap = malloc(HEAP_PER_THREAD);
    touch(heap, HEAP_PER_THREAD);
    pthread_barrier_wait(&ready);
    while (!stop)
        usleep(10000);
    free(heap);
    return NULL;
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 60;
    pthread_t tids[NTHREADS];
    char stack_array[256 * 1024];

    touch(stack_array, sizeof stack_array);
    static char *heap_chunks[HEAP_CHUNKS];
    for (int i = 0; i < HEAP_CHUNKS; i++) {
        heap_chunks[i] = malloc(HEAP_CHUNK);
        touch(heap_chunks[i], HEAP_CHUNK);
    }
    char *anon = mmap(NULL, ANON_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *shared = mmap(NULL, SHARED_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (anon == MAP_FAILED || shared == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    touch(anon, ANON_BYTES);
    touch(shared, SHARED_BYTES);

    /* A file-backed mapping: the program's own executable, read through. */
    int fd = open("/proc/self/exe", O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        perror("open /proc/self/exe");
        return 1;
    }
    const volatile char *file = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (file == MAP_FAILED) {
        perror("mmap file");
        return 1;
    }
    unsigned sum = 0;
    for (off_t i = 0; i < st.st_size; i += 4096)
        sum += (unsigned char)file[i];

    pthread_barrier_init(&ready, NULL, NTHREADS + 1);
    for (int i = 0; i < NTHREADS; i++) {
        char name[16];
        pthread_create(&tids[i], NULL, i == 0 ? spinner : sleeper, NULL);
        if (i == 0)
            snprintf(name, sizeof name, "spinner");
        else
            snprintf(name, sizeof name, "sleeper-%d", i);
        pthread_setname_np(tids[i], name);
    }
    pthread_barrier_wait(&ready);
    printf("ready %d (checksum %u)\n", (int)getpid(), sum + (unsigned)stack_array[4096]);
    fflush(stdout);

    struct timespec end, now;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += seconds;
    do {
        usleep(20000);
        clock_gettime(CLOCK_MONOTONIC, &now);
    } while (now.tv_sec < end.tv_sec || (now.tv_sec == end.tv_sec && now.tv_nsec < end.tv_nsec));
    stop = 1;
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(tids[i], NULL);
    return 0;
}
