/* Test program for the symbolize crate. It prints the addresses that the tests resolve
 * (functions, return addresses of calls, globals, heap and stack), copies /proc/self/maps
 * to argv[1] and, given a plugin (argv[3]), dlopens it and copies the maps again to argv[2].
 * Lines that the tests look for are marked with @name comments. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t hot_lock = PTHREAD_MUTEX_INITIALIZER;
struct queue {
    long pad[8];
    pthread_mutex_t lock;
};
struct queue queue;
static char big_bss[1 << 20];
volatile int sink;

__attribute__((noinline)) void *where_am_i(void) {
    void *ra = __builtin_return_address(0);
    sink++;
    return ra;
}

__attribute__((noinline)) void *worker(void) {
    pthread_mutex_lock(&hot_lock);
    void *ra = where_am_i(); /* @call_in_worker */
    pthread_mutex_unlock(&hot_lock);
    sink++;
    return ra;
}

static inline __attribute__((always_inline)) void *inner_helper(void) {
    void *ra = where_am_i(); /* @call_in_helper */
    sink++;
    return ra;
}

__attribute__((noinline)) void *outer(void) {
    void *ra = inner_helper(); /* @call_of_helper */
    sink++;
    return ra;
}

__attribute__((noinline)) static void *static_fn(void) {
    void *ra = where_am_i(); /* @call_in_static */
    sink++;
    return ra;
}

static int copy_maps(const char *dest) {
    FILE *in = fopen("/proc/self/maps", "r");
    FILE *out = fopen(dest, "w");
    if (!in || !out)
        return -1;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    fclose(in);
    return fclose(out);
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    big_bss[sink] = 1;
    printf("worker %p\n", (void *)worker);
    printf("call_in_worker %p\n", worker());
    printf("call_in_helper %p\n", outer());
    printf("call_in_static %p\n", static_fn());
    printf("global_lock %p\n", (void *)&global_lock);
    printf("hot_lock %p\n", (void *)&hot_lock);
    printf("queue_lock %p\n", (void *)&queue.lock);
    printf("big_bss_end %p\n", (void *)&big_bss[sizeof big_bss - 8]);
    void *heap = malloc(64);
    printf("heap %p\n", heap);
    int local = 0;
    printf("stack %p\n", (void *)&local);
    if (copy_maps(argv[1]) != 0)
        return 3;
    if (argc > 3) {
        void *h = dlopen(argv[3], RTLD_NOW);
        if (!h) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 4;
        }
        void *(*call)(void) = (void *(*)(void))dlsym(h, "plugin_call");
        void *(*lock_addr)(void) = (void *(*)(void))dlsym(h, "plugin_lock_addr");
        printf("plugin_call_site %p\n", call());
        printf("plugin_lock %p\n", lock_addr());
        if (copy_maps(argv[2]) != 0)
            return 3;
    }
    free(heap);
    return 0;
}
