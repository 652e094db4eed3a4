/* Every atomic operation the instrumentation turns into a runtime call, at every width, with
 * its result checked against values computed by hand, and printed so that the instrumented
 * build's output can be compared with an uninstrumented build's. Plus copies, fills, errno
 * and threads racing on atomics. Exit status: the number of failed checks (0: all passed). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;
static int fails;

#define CHECK(c)                                                       \
    do {                                                               \
        if (!(c)) {                                                    \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);        \
            fails++;                                                   \
        }                                                              \
    } while (0)

static void show(const char *what, u128 v) {
    printf("%s %016llx%016llx\n", what, (unsigned long long)(v >> 64), (unsigned long long)v);
}

/* x starts at a; b, c are operands. T is the width's unsigned type. */
#define WIDTH(T, NAME, A, B, C)                                                           \
    static T NAME##_x;                                                                    \
    static void test_##NAME(void) {                                                       \
        T a = (T)(A), b = (T)(B), c = (T)(C), r, e;                                       \
        T *x = &NAME##_x;                                                                 \
        __atomic_store_n(x, a, __ATOMIC_RELEASE);                                         \
        r = __atomic_load_n(x, __ATOMIC_ACQUIRE); CHECK(r == a); show(#NAME " load", r);  \
        r = __atomic_load_n(x, __ATOMIC_RELAXED); CHECK(r == a);                          \
        r = __atomic_exchange_n(x, b, __ATOMIC_ACQ_REL); CHECK(r == a && *x == b);        \
        show(#NAME " exchange", r);                                                       \
        r = __atomic_fetch_add(x, c, __ATOMIC_RELAXED); CHECK(r == b && *x == (T)(b + c)); \
        show(#NAME " fetch_add", r);                                                      \
        r = __atomic_fetch_sub(x, c, __ATOMIC_SEQ_CST); CHECK(r == (T)(b + c) && *x == b); \
        r = __atomic_fetch_and(x, c, __ATOMIC_ACQUIRE); CHECK(r == b && *x == (T)(b & c)); \
        __atomic_store_n(x, b, __ATOMIC_SEQ_CST);                                         \
        r = __atomic_fetch_or(x, c, __ATOMIC_RELEASE); CHECK(r == b && *x == (T)(b | c)); \
        __atomic_store_n(x, b, __ATOMIC_RELAXED);                                         \
        r = __atomic_fetch_xor(x, c, __ATOMIC_CONSUME); CHECK(r == b && *x == (T)(b ^ c)); \
        __atomic_store_n(x, b, __ATOMIC_SEQ_CST);                                         \
        r = __atomic_fetch_nand(x, c, __ATOMIC_SEQ_CST);                                  \
        CHECK(r == b && *x == (T)~(b & c)); show(#NAME " fetch_nand", *x);                \
        __atomic_store_n(x, b, __ATOMIC_SEQ_CST);                                         \
        r = __atomic_add_fetch(x, c, __ATOMIC_SEQ_CST); CHECK(r == (T)(b + c));           \
        r = __atomic_sub_fetch(x, c, __ATOMIC_SEQ_CST); CHECK(r == b);                    \
        r = __atomic_and_fetch(x, c, __ATOMIC_SEQ_CST); CHECK(r == (T)(b & c));           \
        r = __atomic_or_fetch(x, b, __ATOMIC_SEQ_CST); CHECK(r == (T)((b & c) | b));      \
        r = __atomic_xor_fetch(x, c, __ATOMIC_SEQ_CST); CHECK(r == (T)(((b & c) | b) ^ c)); \
        __atomic_store_n(x, b, __ATOMIC_SEQ_CST);                                         \
        r = __atomic_nand_fetch(x, c, __ATOMIC_SEQ_CST); CHECK(r == (T)~(b & c));         \
        /* compare-exchange, strong and weak, success and failure */                      \
        __atomic_store_n(x, a, __ATOMIC_SEQ_CST);                                         \
        e = a;                                                                            \
        CHECK(__atomic_compare_exchange_n(x, &e, b, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)); \
        CHECK(e == a && *x == b);                                                         \
        e = c;                                                                            \
        CHECK(!__atomic_compare_exchange_n(x, &e, a, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)); \
        CHECK(e == b && *x == b); show(#NAME " cas-fail-seen", e);                        \
        e = b;                                                                            \
        while (!__atomic_compare_exchange_n(x, &e, c, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) \
            CHECK(e == b);                                                                \
        CHECK(*x == c);                                                                   \
        e = a;                                                                            \
        CHECK(!__atomic_compare_exchange_n(x, &e, b, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)); \
        CHECK(e == c && *x == c);                                                         \
        /* __sync builtins: full barriers, value and bool compare-and-swap */             \
        r = __sync_val_compare_and_swap(x, c, a); CHECK(r == c && *x == a);               \
        r = __sync_val_compare_and_swap(x, c, b); CHECK(r == a && *x == a);               \
        show(#NAME " sync-val-fail", r);                                                  \
        CHECK(__sync_bool_compare_and_swap(x, a, b) && *x == b);                          \
        CHECK(!__sync_bool_compare_and_swap(x, a, c) && *x == b);                         \
        r = __sync_fetch_and_add(x, c); CHECK(r == b && *x == (T)(b + c));                \
        r = __sync_sub_and_fetch(x, c); CHECK(r == b);                                    \
        r = __sync_fetch_and_or(x, c); CHECK(r == b);                                     \
        r = __sync_fetch_and_and(x, c); CHECK(r == (T)(b | c));                           \
        r = __sync_fetch_and_xor(x, a); CHECK(r == (T)((b | c) & c));                     \
        r = __sync_fetch_and_nand(x, a); CHECK(r == (T)(((b | c) & c) ^ a));              \
        r = __sync_lock_test_and_set(x, a); CHECK(*x == a);                               \
        __sync_lock_release(x); CHECK(*x == 0);                                           \
        __sync_synchronize();                                                             \
    }

WIDTH(uint8_t, u8, 0x81, 0xff, 0x7e)
WIDTH(uint16_t, u16, 0x8001, 0xffff, 0x7ffe)
WIDTH(uint32_t, u32, 0x80000001u, 0xffffffffu, 0x7ffffffeu)
WIDTH(uint64_t, u64, 0x8000000000000001ull, 0xffffffffffffffffull, 0x7ffffffffffffffeull)
WIDTH(u128, u128, (((u128)0x8000000000000001ull) << 64) | 0x123456789abcdef0ull,
      ~(u128)0, (((u128)0x7ffffffffffffffeull) << 64) | 0xfedcba9876543210ull)

/* C11 <stdatomic.h> on _Atomic objects, and fences. */
static _Atomic uint8_t c8 = 200;
static _Atomic uint16_t c16 = 60000;
static _Atomic uint32_t c32 = 4000000000u;
static _Atomic uint64_t c64 = 18000000000000000000ull;
static _Atomic int32_t s32 = -5;

static void test_c11(void) {
    CHECK(atomic_load(&c8) == 200);
    CHECK(atomic_fetch_add(&c8, 100) == 200 && atomic_load(&c8) == 44);
    CHECK(atomic_exchange_explicit(&c16, 1, memory_order_acq_rel) == 60000);
    uint16_t e16 = 2;
    CHECK(!atomic_compare_exchange_strong(&c16, &e16, 3) && e16 == 1);
    CHECK(atomic_compare_exchange_strong(&c16, &e16, 3) && atomic_load(&c16) == 3);
    CHECK(atomic_fetch_sub_explicit(&c32, 1, memory_order_relaxed) == 4000000000u);
    uint64_t e64 = 0;
    while (!atomic_compare_exchange_weak_explicit(&c64, &e64, e64 + 1, memory_order_seq_cst,
                                                  memory_order_relaxed))
        ;
    CHECK(atomic_load_explicit(&c64, memory_order_acquire) == 18000000000000000001ull);
    atomic_store_explicit(&c32, 7, memory_order_release);
    CHECK(atomic_fetch_or(&c32, 8) == 7 && atomic_load(&c32) == 15);
    CHECK(atomic_fetch_add(&s32, -10) == -5 && atomic_load(&s32) == -15);
    int32_t es = -15;
    CHECK(atomic_compare_exchange_strong(&s32, &es, -1) && atomic_load(&s32) == -1);
    atomic_thread_fence(memory_order_seq_cst);
    atomic_thread_fence(memory_order_acquire);
    atomic_thread_fence(memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
    atomic_flag f = ATOMIC_FLAG_INIT;
    CHECK(!atomic_flag_test_and_set(&f));
    CHECK(atomic_flag_test_and_set(&f));
    atomic_flag_clear(&f);
    CHECK(!atomic_flag_test_and_set(&f));
    show("c11 c64", atomic_load(&c64));
}

/* Threads racing: every increment must land. */
#define THREADS 4
#define ROUNDS 20000
static uint64_t counter64;
static uint32_t cas32;
static u128 cas128;
static uint8_t small8;

static void *racer(void *arg) {
    (void)arg;
    for (int i = 0; i < ROUNDS; i++) {
        __atomic_fetch_add(&counter64, 1, __ATOMIC_RELAXED);
        uint32_t e = __atomic_load_n(&cas32, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&cas32, &e, e + 1, 1, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED))
            ;
        u128 e2 = __atomic_load_n(&cas128, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&cas128, &e2, e2 + ((u128)1 << 64) + 1, 0,
                                            __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
        __atomic_fetch_add(&small8, 1, __ATOMIC_SEQ_CST);
    }
    return NULL;
}

static void test_threads(void) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, racer, NULL) == 0);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(counter64 == THREADS * ROUNDS);
    CHECK(cas32 == THREADS * ROUNDS);
    CHECK(cas128 == (((u128)(THREADS * ROUNDS)) << 64) + THREADS * ROUNDS);
    CHECK(small8 == (uint8_t)(THREADS * ROUNDS));
    show("threads counter64", counter64);
}

/* Copies and fills of every size around the line size, overlapping moves both ways. */
static void test_memory(void) {
    static unsigned char src[512], dst[512], ref[512];
    for (int i = 0; i < 512; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    for (size_t n = 0; n < 300; n += 7) {
        volatile size_t vn = n; /* a call, not an inlined copy */
        memset(dst, 0xee, sizeof dst);
        memcpy(dst + 3, src + 5, vn);
        for (size_t i = 0; i < 512; i++)
            ref[i] = (i >= 3 && i < 3 + n) ? src[i - 3 + 5] : 0xee;
        CHECK(memcmp(dst, ref, 512) == 0);
        memset(dst + 1, (int)n, vn);
        for (size_t i = 1; i < 1 + n; i++)
            CHECK(dst[i] == (unsigned char)n);
    }
    for (int i = 0; i < 512; i++)
        dst[i] = (unsigned char)i;
    volatile size_t n = 200;
    memmove(dst + 10, dst, n); /* forwards overlap */
    for (int i = 0; i < 200; i++)
        CHECK(dst[10 + i] == (unsigned char)i);
    memmove(dst, dst + 10, n); /* backwards overlap */
    for (int i = 0; i < 200; i++)
        CHECK(dst[i] == (unsigned char)i);
    struct big { long v[9]; } a = {{1, 2, 3, 4, 5, 6, 7, 8, 9}}, b;
    struct big *volatile pa = &a;
    b = *pa; /* a struct copy: a range access or a memcpy call */
    CHECK(b.v[0] == 1 && b.v[8] == 9);
    printf("memory ok\n");
}

/* errno as the program left it, around everything the runtime intercepts. */
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static void test_errno(void) {
    errno = 1234;
    void *p = malloc(100);
    CHECK(p != NULL && errno == 1234);
    p = realloc(p, 100000);
    CHECK(p != NULL && errno == 1234);
    free(p);
    CHECK(errno == 1234);
    pthread_mutex_lock(&mutex);
    pthread_mutex_unlock(&mutex);
    CHECK(errno == 1234);
    void *q = NULL;
    CHECK(posix_memalign(&q, 64, 256) == 0 && errno == 1234 && ((uintptr_t)q & 63) == 0);
    free(q);
    q = aligned_alloc(128, 512);
    CHECK(q != NULL && ((uintptr_t)q & 127) == 0);
    free(q);
    q = calloc(10, 10);
    CHECK(q != NULL && ((char *)q)[99] == 0 && errno == 1234);
    free(q);
    volatile size_t huge = SIZE_MAX / 2;
    /* The result escapes (LLVM otherwise elides the allocation and folds the test), and errno
     * is read through a pointer the compiler cannot see through (LLVM assumes malloc leaves
     * errno alone). */
    int *volatile err = &errno;
    void *volatile sink;
    *err = 0;
    sink = malloc(huge);
    CHECK(sink == NULL && *err == ENOMEM);
    *err = 0;
    sink = calloc(huge, 4);
    CHECK(sink == NULL && *err == ENOMEM);
    printf("errno ok\n");
}

int main(void) {
    test_u8();
    test_u16();
    test_u32();
    test_u64();
    test_u128();
    test_c11();
    test_threads();
    test_memory();
    test_errno();
    printf("fails %d\n", fails);
    return fails;
}
