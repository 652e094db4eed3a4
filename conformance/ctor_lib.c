/*
 * ctor_lib: a shared library whose constructor and destructor take locks.  Built twice by
 * run.sh from this one source:
 *   -DTAG=needed  libctor_needed.so, linked into ctor_dlopen (DT_NEEDED).  The dynamic
 *                 linker initialises it *before* an LD_PRELOAD library (the preloaded object
 *                 comes earlier in the load order, and initialisation runs in reverse), yet
 *                 its calls already bind to the preloaded definitions: a probe is called
 *                 before its own constructor has run.
 *   -DTAG=dl      libctor_dl.so, loaded with dlopen: its constructor runs with the dynamic
 *                 linker's lock held, and starts a thread that takes locks (so a probe
 *                 that resolves symbols lazily with dlsym on a new thread must not need that
 *                 lock) and joins it.
 * The constructor records its checks in a buffer that the program prints; the destructor
 * takes a lock and prints one line itself (at dlclose, or at exit).
 */
#include "common.h"

#ifndef TAG
#error build with -DTAG=needed or -DTAG=dl
#endif
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define STR_(a) #a
#define STR(a) STR_(a)

static struct logbuf buf, thread_buf; /* the thread's lines are appended after the join */
static pthread_mutex_t lib_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lib_rec = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_rwlock_t lib_rw = PTHREAD_RWLOCK_INITIALIZER;

static void *lib_thread(void *arg)
{
    struct logbuf *b = arg;
    const char *label = "lib-" STR(TAG) " ctor-thread";
    char w[128];
#define W(s) (snprintf(w, sizeof w, "%s %s", label, s), w)
    RECORD(b, pthread_mutex_lock, W("static-normal/free"), 0, &lib_m);
    RECORD(b, pthread_mutex_unlock, W("static-normal/by-owner"), 0, &lib_m);
    RECORD(b, pthread_rwlock_rdlock, W("static/read-shared-with-ctor"), 0, &lib_rw);
    RECORD(b, pthread_rwlock_trywrlock, W("static/read-held"), EBUSY, &lib_rw);
    RECORD(b, pthread_rwlock_unlock, W("static/read"), 0, &lib_rw);
    return NULL;
}

__attribute__((constructor)) static void lib_ctor(void)
{
    const char *label = "lib-" STR(TAG) " ctor";
    char w[128];
    pthread_mutex_t dyn;
    pthread_spinlock_t sp;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    struct timespec t;

    RECORD(&buf, pthread_mutex_lock, W("static-normal/free"), 0, &lib_m);
    RECORD(&buf, pthread_mutex_trylock, W("static-normal/held-by-self"), EBUSY, &lib_m);
    t = abs_in(CLOCK_REALTIME, -1);
    RECORD(&buf, pthread_cond_timedwait, W("static-cond/past"), ETIMEDOUT, &c, &lib_m, &t);
    RECORD(&buf, pthread_mutex_unlock, W("static-normal/by-owner"), 0, &lib_m);
    RECORD(&buf, pthread_mutex_lock, W("static-recursive/free"), 0, &lib_rec);
    RECORD(&buf, pthread_mutex_lock, W("static-recursive/depth2"), 0, &lib_rec);
    RECORD(&buf, pthread_mutex_unlock, W("static-recursive/depth2"), 0, &lib_rec);
    RECORD(&buf, pthread_mutex_unlock, W("static-recursive/depth1"), 0, &lib_rec);
    RECORD(&buf, pthread_mutex_unlock, W("static-recursive/unlocked"), EPERM, &lib_rec);
    pthread_mutex_init(&dyn, NULL);
    RECORD(&buf, pthread_mutex_lock, W("dynamic/free"), 0, &dyn);
    RECORD(&buf, pthread_mutex_unlock, W("dynamic/by-owner"), 0, &dyn);
    pthread_mutex_destroy(&dyn);
    RECORD(&buf, pthread_rwlock_wrlock, W("static/free"), 0, &lib_rw);
    RECORD(&buf, pthread_rwlock_tryrdlock, W("static/write-held"), EBUSY, &lib_rw);
    RECORD(&buf, pthread_rwlock_unlock, W("static/write"), 0, &lib_rw);
    pthread_spin_init(&sp, PTHREAD_PROCESS_PRIVATE);
    RECORD(&buf, pthread_spin_lock, W("stack/free"), 0, &sp);
    RECORD(&buf, pthread_spin_trylock, W("stack/held"), EBUSY, &sp);
    RECORD(&buf, pthread_spin_unlock, W("stack/by-owner"), 0, &sp);
    pthread_spin_destroy(&sp);

    /* A thread started and joined inside the constructor, while it holds a lock itself. */
    pthread_t th;
    RECORD(&buf, pthread_rwlock_rdlock, W("static/read-while-thread-runs"), 0, &lib_rw);
    RECORD(&buf, pthread_create, W("thread"), 0, &th, NULL, lib_thread, &thread_buf);
    RECORD(&buf, pthread_join, W("thread"), 0, th, NULL);
    logbuf_printf(&buf, "%s", thread_buf.text);
    buf.unexpected += thread_buf.unexpected;
    RECORD(&buf, pthread_rwlock_unlock, W("static/read-while-thread-runs"), 0, &lib_rw);
#undef W
}

__attribute__((destructor)) static void lib_dtor(void)
{
    int a = pthread_mutex_lock(&lib_m);
    int b = pthread_mutex_unlock(&lib_m);
    printf("lib-%s dtor lock=%s unlock=%s\n", STR(TAG), err_name(a), err_name(b));
}

/* The results, for the program to print. */
const char *CAT(ctor_results_, TAG)(int *unexpected)
{
    *unexpected = buf.unexpected;
    return buf.text;
}
