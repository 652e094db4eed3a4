/*
 * ctor_dlopen: locks taken before main and while libraries load.
 *
 * In the order the dynamic linker runs them:
 *   1. a .preinit_array function of the executable: runs before every constructor of every
 *      shared object, the preloaded probe's included;
 *   2. the constructor of libctor_needed.so (ctor_lib.c), a DT_NEEDED library: initialised
 *      before the LD_PRELOAD library, but already calling into it;
 *   3. (the probe's own constructor, when preloaded)
 *   4. a constructor of the executable;
 *   5. main, which dlopens libctor_dl.so (ctor_lib.c again) -- its constructor runs under the
 *      loader lock and starts a thread -- twice (the second is only a reference count), then
 *      dlcloses it (its destructor takes a lock and prints), and a thread dlopens it again
 *      while other threads hammer a lock.
 * The needed library's destructor prints last, at exit.
 */
#include "common.h"
#include <dlfcn.h>
#include <libgen.h>
#include <stdint.h>

const char *ctor_results_needed(int *unexpected); /* from libctor_needed.so */

static struct logbuf pre, ctor;
static pthread_mutex_t exe_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t exe_ec = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_rwlock_t exe_rw = PTHREAD_RWLOCK_INITIALIZER;

static void take_locks(struct logbuf *b, const char *label)
{
    char w[128];
    pthread_spinlock_t sp;
#define W(s) (snprintf(w, sizeof w, "%s %s", label, s), w)
    RECORD(b, pthread_mutex_lock, W("static-normal/free"), 0, &exe_m);
    RECORD(b, pthread_mutex_trylock, W("static-normal/held-by-self"), EBUSY, &exe_m);
    RECORD(b, pthread_mutex_unlock, W("static-normal/by-owner"), 0, &exe_m);
    RECORD(b, pthread_mutex_lock, W("static-errorcheck/free"), 0, &exe_ec);
    RECORD(b, pthread_mutex_lock, W("static-errorcheck/relock"), EDEADLK, &exe_ec);
    RECORD(b, pthread_mutex_unlock, W("static-errorcheck/by-owner"), 0, &exe_ec);
    RECORD(b, pthread_mutex_unlock, W("static-errorcheck/unlocked"), EPERM, &exe_ec);
    RECORD(b, pthread_rwlock_rdlock, W("static/free"), 0, &exe_rw);
    RECORD(b, pthread_rwlock_trywrlock, W("static/read-held"), EBUSY, &exe_rw);
    RECORD(b, pthread_rwlock_unlock, W("static/read"), 0, &exe_rw);
    pthread_spin_init(&sp, PTHREAD_PROCESS_PRIVATE);
    RECORD(b, pthread_spin_lock, W("stack/free"), 0, &sp);
    RECORD(b, pthread_spin_trylock, W("stack/held"), EBUSY, &sp);
    RECORD(b, pthread_spin_unlock, W("stack/by-owner"), 0, &sp);
    pthread_spin_destroy(&sp);
#undef W
}

static void preinit(int argc, char **argv, char **envp)
{
    (void)argc, (void)argv, (void)envp;
    take_locks(&pre, "exe preinit");
}
__attribute__((section(".preinit_array"), used)) static void (*preinit_p)(int, char **,
                                                                          char **) = preinit;

__attribute__((constructor(101))) static void exe_ctor(void) { take_locks(&ctor, "exe ctor"); }

static void print_buf(const char *text, int unexpected)
{
    fputs(text, stdout);
    unexpected_count += unexpected;
}

static char dl_path[4096];

static int load_and_print(const char *what, void **handle)
{
    void *h = dlopen(dl_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        NOTE("dlopen %s failed: %s", what, dlerror());
        unexpected_count++;
        return -1;
    }
    const char *(*res)(int *) = (const char *(*)(int *))dlsym(h, "ctor_results_dl");
    if (!res) {
        NOTE("dlsym %s failed", what);
        unexpected_count++;
        return -1;
    }
    int u = 0;
    const char *text = res(&u);
    NOTE("dlopen %s: constructor results follow", what);
    print_buf(text, u);
    *handle = h;
    return 0;
}

/* While one thread dlopens, others keep taking a lock. */
static _Atomic int stop_hammer;
static void *hammer(void *arg)
{
    (void)arg;
    long bad = 0;
    while (!atomic_load(&stop_hammer))
        bad += (pthread_mutex_lock(&exe_m) | pthread_mutex_unlock(&exe_m)) != 0;
    return (void *)(intptr_t)bad;
}

static void *loader(void *arg)
{
    void **h = arg;
    void *x = dlopen(dl_path, RTLD_NOW | RTLD_LOCAL);
    *h = x;
    return NULL;
}

int main(void)
{
    int u = 0;
    NOTE("preinit_array results follow");
    print_buf(pre.text, pre.unexpected);
    NOTE("needed library constructor results follow");
    const char *text = ctor_results_needed(&u);
    print_buf(text, u);
    NOTE("executable constructor results follow");
    print_buf(ctor.text, ctor.unexpected);

    /* libctor_dl.so sits next to this executable. */
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        die("readlink", errno);
    exe[n] = 0;
    snprintf(dl_path, sizeof dl_path, "%s/libctor_dl.so", dirname(exe));

    void *h1 = NULL, *h2 = NULL;
    if (load_and_print("first", &h1) == 0) {
        /* second dlopen: no constructor, same buffer */
        h2 = dlopen(dl_path, RTLD_NOW | RTLD_LOCAL);
        NOTE("dlopen second: %s", h2 == h1 ? "same handle" : "different handle");
        dlclose(h2);
        NOTE("dlclose: destructor line follows");
        fflush(stdout);
        dlclose(h1);
        fflush(stdout);
    }

    /* dlopen on a thread while two others take locks. */
    pthread_t hm[2], ld;
    void *h3 = NULL;
    for (int i = 0; i < 2; i++)
        hm[i] = spawn(hammer, NULL);
    ld = spawn(loader, &h3);
    join(ld);
    atomic_store(&stop_hammer, 1);
    long bad = 0;
    for (int i = 0; i < 2; i++)
        bad += (intptr_t)join(hm[i]);
    NOTE("dlopen-on-thread loaded=%s hammer-failures=%ld", h3 ? "yes" : "no", bad);
    if (h3) {
        const char *(*res)(int *) = (const char *(*)(int *))dlsym(h3, "ctor_results_dl");
        NOTE("dlopen-on-thread: constructor results follow");
        if (res) {
            const char *t3 = res(&u);
            print_buf(t3, u);
        }
        fflush(stdout);
        dlclose(h3);
    }
    int rc = finish();
    NOTE("exit: needed library destructor line follows");
    return rc;
}
