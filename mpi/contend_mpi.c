/*
 * contend_mpi.c - the PMPI wrapper that records MPI calls for `contend record --mpi`.
 *
 * Build it with the program's own MPI compiler wrapper and preload it into every rank:
 *
 *   mpicc -O2 -fPIC -shared -o libcontend-mpi.so mpi/contend_mpi.c
 *   CONTEND_MPI_DIR=run-dir LD_PRELOAD=$PWD/libcontend-mpi.so mpirun ... ./program
 *
 * (contend_mpi_fortran.c, the Fortran entry points, is #included at the end: one file builds
 * everything.) docs/formats.md §2.4 specifies what it writes; mpi/cst_writer.h writes it.
 *
 * Nothing is recorded unless CONTEND_MPI_DIR is set: every wrapper is then a pure
 * pass-through. With it set, each rank writes $CONTEND_MPI_DIR/streams/rank-R.cst and copies
 * /proc/self/maps to $CONTEND_MPI_DIR/maps/rank-R.maps at MPI_Init and at MPI_Finalize (a
 * second job in the same directory writes rank-R.2.cst and rank-R.2.maps on all its ranks,
 * ...: the number is the job's, agreed at MPI_Init).
 * A rank started without CONTEND_MPI_DIR or without the preload runs unrecorded and does not
 * hold up the others: the start-up agreement makes no collective call over MPI_COMM_WORLD
 * (see join()); the clock comparison at MPI_Init and MPI_Finalize is collective over the
 * ranks that joined only.
 *
 * How calls reach the wrapper. On x86-64 every intercepted MPI_X is a one-instruction
 * assembly stub, `jmp *contend_tgt_MPI_X`, exported under the MPI name. The target is the C
 * wrapper w_MPI_X while recording, and the MPI library's own MPI_X (dlsym RTLD_NEXT) when
 * not: without CONTEND_MPI_DIR, after MPI_Finalize, in a forked child, and when the wrapper
 * refuses a library it was not built for. A jump forwards every register and the stack
 * untouched, so pass-through is exact even when this file was compiled against another MPI's
 * mpi.h (MPI_Comm is a pointer in Open MPI and an int in MPICH: a C function compiled for one
 * cannot forward the other's arguments), and __builtin_return_address(0) in the C wrapper is
 * still the program's call site. Other architectures export the C wrappers directly (exact
 * while the library matches; a refused library's calls are forwarded through C prototypes,
 * which is only safe when both MPIs share an ABI).
 *
 * Guarantees: never changes a return value, errno, or what the program sees (statuses and
 * request arrays are the library's; the wrapper substitutes its own status array when the
 * program passes MPI_STATUS(ES)_IGNORE, and copies request arrays before Wait* and Test* change
 * them); never aborts or blocks the job beyond a write(2) of a 64 KiB chunk (and MPI_Abort,
 * which waits at most 100 ms for the lock to write its mark); failures to write are counted
 * as dropped events in the stream. Pointer arguments are read only when not NULL, outputs
 * only after the call succeeded; handles are queried only after a successful call and only
 * where the call makes them significant. The wrapper's own memory is bounded by what is live
 * (communicators, requests, messages) plus 12 bytes per 256 communicators ever created.
 * The wrapper's own MPI calls use PMPI_* and never reach the wrappers; a wrapper entered
 * from inside another (the library calling MPI_* internally) passes through unrecorded.
 *
 * Threads: one mutex serialises the writer and the tables. A call group is written in one
 * critical section after the call returns, so groups from different threads of one rank are
 * in the order their calls *returned* (exited), not entered; each group's records are
 * consecutive. Communicator definitions are written in their own critical section before the
 * group that first uses them. No MPI function is called while the mutex is held except local
 * status queries (MPI_Get_count, MPI_Test_cancelled); the attribute-delete callback that
 * notices freed communicators takes no lock. The stream's writer is never freed: a call that
 * returns after the stream was closed (MPI_Finalize, or exit() without it, while another
 * thread is in a call) writes into a writer that discards it. A thread's scratch arrays are
 * freed when it ends.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include "cst_writer.h"

#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

/* ---------------------------------------------------------------- the MPI it was built for */

#if defined(OMPI_MAJOR_VERSION)
#define CONTEND_STR2(x) #x
#define CONTEND_STR(x) CONTEND_STR2(x)
#define BUILT_FOR                                                                              \
    "Open MPI " CONTEND_STR(OMPI_MAJOR_VERSION) "." CONTEND_STR(OMPI_MINOR_VERSION) "." CONTEND_STR( \
        OMPI_RELEASE_VERSION)
#define BUILT_FAMILY 1
#define BUILT_MAJOR OMPI_MAJOR_VERSION
#elif defined(MPICH_VERSION)
#define BUILT_FOR "MPICH " MPICH_VERSION
#define BUILT_FAMILY 2
#define BUILT_MAJOR (atoi(MPICH_VERSION))
#else
#define BUILT_FOR "an unknown MPI"
#define BUILT_FAMILY 0
#define BUILT_MAJOR 0
#endif

_Static_assert(sizeof(MPI_Comm) <= 8 && sizeof(MPI_Request) <= 8 && sizeof(MPI_Message) <= 8,
               "MPI handles are stored as up to 8 opaque bytes");

/* ---------------------------------------------------------------- codes (formats.md §2.4) */

enum {
    FC_INIT = 1, FC_INIT_THREAD = 2, FC_FINALIZE = 3,
    FC_SEND = 10, FC_SSEND, FC_BSEND, FC_RSEND, FC_RECV, FC_SENDRECV, FC_SENDRECV_REPLACE,
    FC_ISEND = 20, FC_ISSEND, FC_IBSEND, FC_IRSEND, FC_IRECV,
    FC_SEND_INIT = 30, FC_SSEND_INIT, FC_BSEND_INIT, FC_RSEND_INIT, FC_RECV_INIT, FC_START, FC_STARTALL,
    FC_REQUEST_FREE,
    FC_WAIT = 40, FC_WAITALL, FC_WAITANY, FC_WAITSOME, FC_TEST, FC_TESTALL, FC_TESTANY, FC_TESTSOME,
    FC_CANCEL,
    FC_PROBE = 50, FC_IPROBE, FC_MPROBE, FC_IMPROBE, FC_MRECV, FC_IMRECV,
    FC_BARRIER = 60, FC_BCAST, FC_SCATTER, FC_SCATTERV, FC_GATHER, FC_GATHERV, FC_REDUCE, FC_ALLREDUCE,
    FC_ALLGATHER, FC_ALLGATHERV, FC_ALLTOALL, FC_ALLTOALLV, FC_ALLTOALLW, FC_REDUCE_SCATTER,
    FC_REDUCE_SCATTER_BLOCK, FC_SCAN, FC_EXSCAN,
    FC_COMM_DUP = 80, FC_COMM_DUP_WITH_INFO, FC_COMM_SPLIT, FC_COMM_SPLIT_TYPE, FC_COMM_CREATE,
    FC_CART_CREATE, FC_COMM_FREE,
};

enum {
    AC_DEST = 1, AC_SEND_TAG, AC_BYTES_SENT, AC_SOURCE, AC_RECV_TAG, AC_ROOT, AC_REQUEST_CREATED,
    AC_REQUEST_STARTED, AC_REQUEST_COMPLETED, AC_STATUS_SOURCE, AC_STATUS_TAG, AC_STATUS_BYTES,
    AC_STATUS_CANCELLED, AC_REQUEST_FREED, AC_REQUEST_CANCELLED, AC_FLAG, AC_MESSAGE,
    AC_CREATED_COMM, AC_POLLS, AC_REQUEST_POLLED,
};

#define NO_COMM 0xFFFFFFFFu    /* calls without a communicator; MPI_COMM_NULL */
#define INTER_COMM 0xFFFFFFFEu /* intercommunicators are not resolved */
#define CHUNK_RECORDS 4096u
#define FLUSH_INTERVAL_NS 50000000ull
#define FLUSHER_MIN_SLEEP_NS 1000000ull /* the flusher thread (below) never looks more often */

/* Request flags in the request table. */
#define RQ_RECV 1u
#define RQ_PERSISTENT 2u
#define RQ_ACTIVE 4u
#define RQ_PROC_NULL 8u /* a receive posted with MPI_PROC_NULL (or MPI_MESSAGE_NO_PROC) */
#define RQ_QUEUE 16u    /* the entry's val indexes g_rq: a handle shared by several requests */
#define RQ_QUEUE_MAX 65536u /* a shared handle's queue drops its oldest request beyond this */

/* How long rank 0's agreement in MPI_Init (at most JOIN_WAIT_NS for the announcements, then
 * the members' communicator) may take before the wrapper says what may be wrong. */
#define INIT_WAIT_HINT_NS 10000000000ull

#define TLS_IE __attribute__((tls_model("initial-exec")))
#define RA0() __builtin_return_address(0)

/* The call site of the wrapper that calls it: the program's return address. SITE() is
 * evaluated in the wrapper itself. MPICH's Fortran bindings call the C functions, so a
 * Fortran call's return address is inside the binding: the Fortran entry stubs of an MPICH
 * build (contend_mpi_fortran.c) leave the program's return address in contend_fsite, and a
 * wrapper entered from the Fortran library takes that instead. */
#if defined(__x86_64__) && defined(__ELF__) && defined(MPICH_VERSION)
#define CONTEND_MPICH_FORTRAN_SITES 1
__attribute__((visibility("hidden"), used)) __thread void *contend_fsite TLS_IE;
static uintptr_t g_fort_lo, g_fort_len; /* the Fortran library's code, when it is loaded */
static inline void *caller_site(void *ra)
{
    void *f = contend_fsite;
    if (__builtin_expect(f != NULL, 0)) {
        contend_fsite = NULL;
        if ((uintptr_t)ra - g_fort_lo < g_fort_len)
            return f;
    }
    return ra;
}
#define SITE() caller_site(RA0())
#else
#define CONTEND_MPICH_FORTRAN_SITES 0
#define SITE() RA0()
#endif

/* ---------------------------------------------------------------- state */

typedef void (*contend_fn)(void);

typedef struct comm_info {
    char *ident;     /* global identity: "world", "self.R", "P/N:L", "met#K"; NULL once freed */
    int size;        /* members */
    int *world;      /* world rank of each member; NULL for MPI_COMM_WORLD (identity) and once
                      * the communicator is freed and no request or message names it */
    uint32_t births; /* communicator-creating calls made on it (for its children's "N") */
    uint32_t refs;   /* requests and messages in the tables that name it */
    int freed;
} comm_info;

/* The requests that hold one handle, oldest first (see shared_request()): a ring of `cap`
 * items from `head`. */
typedef struct req_item {
    uint64_t id;
    uint32_t comm;
    uint16_t flags;
} req_item;

typedef struct req_queue {
    req_item *items;
    uint32_t head, len, cap;
} req_queue;

typedef struct freed_node {
    struct freed_node *next;
    uint64_t key;
    uint64_t ts;
} freed_node;

static int g_want;              /* CONTEND_MPI_DIR is set */
static int g_started;           /* MPI_Init / Init_thread seen */
static volatile int g_recording; /* the stream is open and calls are recorded */
static int g_synced;            /* took part in the clock comparison at Init */
static int g_alone;             /* records on its own: not a member of the agreement */
static int g_poll_runs = 1;     /* polling runs (see below); CONTEND_MPI_POLL_RUNS=0: off */
static pid_t g_pid;             /* the process that owns the stream (not a forked child) */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t g_deflock = PTHREAD_MUTEX_INITIALIZER; /* defining new communicators */
static cst_writer g_w;
static int g_fd = -1;
static char g_dir[PATH_MAX];
static int g_rank, g_size;
static uint64_t g_last_flush;
static volatile int g_flusher_stop; /* the flusher thread ends at its next look */
static MPI_Group g_world_group;
static MPI_Comm g_sync_comm; /* the recording ranks' (WORLD's members that joined) */
static int g_keyval;
static int g_have_keyval;

/* Communicators by local id, in chunks of COMM_CHUNK: a chunk is freed once every
 * communicator in it is freed and named by no request or message (local ids are never
 * reused, so a job that creates and frees communicators for ever keeps only 12 bytes per
 * COMM_CHUNK of them). */
#define COMM_CHUNK 256u
static comm_info **g_comm_chunks; /* NULL entries: chunks freed */
static uint32_t *g_chunk_gone;    /* per chunk: communicators freed and no longer named */
static uint32_t g_nchunks, g_capchunks;
static uint32_t g_ncomms; /* local ids given */
static cst_map g_comm_map;    /* comm handle -> local id (or INTER_COMM); live comms only */
static cst_map g_req_map;     /* request handle -> id, aux = comm local id, flags RQ_*; or,
                               * with RQ_QUEUE, val = index of its queue in g_rq */
static req_queue *g_rq;       /* queues of handles held by several requests */
static uint32_t g_nrq;
static uint32_t *g_rq_free;   /* free slots of g_rq */
static uint32_t g_nrq_free;
#if BUILT_FAMILY == 1
static uint64_t g_shared_req; /* the handle of Open MPI's ompi_request_empty (0: unknown) */
#endif
static cst_map g_msg_map;     /* message handle -> id, aux = comm local id */
static cst_map g_met_counts;  /* hash of a member list -> communicators met with it */
static uint64_t g_next_req = 1, g_next_msg = 1;
static freed_node *volatile g_freed_head; /* pushed by the delete callback, lock-free */
static uint32_t *g_freed_ids;             /* freed local ids to write after the next group */
static uint64_t *g_freed_ts;
static size_t g_nfreed, g_capfreed;
static uint64_t g_cur_ts; /* the current group's enter time (args carry it) */
static int g_suffix;      /* the stream is rank-R.N.cst (N >= 2), 0 for rank-R.cst */
static volatile uint64_t g_init_wait; /* when the wrapper's first collective at Init began */
static pthread_key_t g_scratch_key;   /* frees a thread's scratch arrays when it ends */
static int g_have_scratch_key;

static __thread int tl_depth TLS_IE; /* > 0 inside a wrapper: nested calls pass through */

typedef struct scratch {
    size_t cap;
    MPI_Request *req;
    MPI_Status *st;
    int registered; /* the thread-exit destructor will free it */
} scratch;
static __thread scratch tl_scr TLS_IE;

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define ACTIVE() (g_recording && tl_depth == 0)

static inline uint64_t comm_key(MPI_Comm c)
{
    uint64_t k = 0;
    memcpy(&k, &c, sizeof c);
    return k;
}

static inline uint64_t req_key(MPI_Request r)
{
    uint64_t k = 0;
    memcpy(&k, &r, sizeof r);
    return k;
}

static inline uint64_t msg_key(MPI_Message m)
{
    uint64_t k = 0;
    memcpy(&k, &m, sizeof m);
    return k;
}

/* ---------------------------------------------------------------- trampolines */

/* Every function the wrapper intercepts. */
#define CONTEND_FUNCS(X)                                                                       \
    X(MPI_Init) X(MPI_Init_thread) X(MPI_Finalize) X(MPI_Abort) X(MPI_Send) X(MPI_Ssend)        \
    X(MPI_Bsend) X(MPI_Rsend) X(MPI_Recv) X(MPI_Sendrecv) X(MPI_Sendrecv_replace) X(MPI_Isend) \
    X(MPI_Issend) X(MPI_Ibsend) X(MPI_Irsend) X(MPI_Irecv) X(MPI_Send_init) X(MPI_Ssend_init)  \
    X(MPI_Bsend_init) X(MPI_Rsend_init) X(MPI_Recv_init) X(MPI_Start) X(MPI_Startall)          \
    X(MPI_Request_free) X(MPI_Wait) X(MPI_Waitall) X(MPI_Waitany) X(MPI_Waitsome) X(MPI_Test)  \
    X(MPI_Testall) X(MPI_Testany) X(MPI_Testsome) X(MPI_Cancel) X(MPI_Probe) X(MPI_Iprobe)     \
    X(MPI_Mprobe) X(MPI_Improbe) X(MPI_Mrecv) X(MPI_Imrecv) X(MPI_Barrier) X(MPI_Bcast)        \
    X(MPI_Scatter) X(MPI_Scatterv) X(MPI_Gather) X(MPI_Gatherv) X(MPI_Reduce) X(MPI_Allreduce) \
    X(MPI_Allgather) X(MPI_Allgatherv) X(MPI_Alltoall) X(MPI_Alltoallv) X(MPI_Alltoallw)       \
    X(MPI_Reduce_scatter) X(MPI_Reduce_scatter_block) X(MPI_Scan) X(MPI_Exscan)                \
    X(MPI_Comm_dup) X(MPI_Comm_dup_with_info) X(MPI_Comm_split) X(MPI_Comm_split_type)         \
    X(MPI_Comm_create) X(MPI_Cart_create) X(MPI_Comm_free)

#if defined(__x86_64__) && defined(__ELF__)
#define CONTEND_TRAMPOLINES 1
/* The C wrapper of MPI_X is w_MPI_X, reached only through the stub. */
#define FN(name) __attribute__((noinline, used)) static int w_##name
#ifdef __CET__
#define CONTEND_ENDBR "endbr64\n"
#else
#define CONTEND_ENDBR ""
#endif
#define DECLARE_TGT(name)                                                                      \
    __attribute__((visibility("hidden"), used)) contend_fn contend_tgt_##name;                \
    static contend_fn real_##name;                                                             \
    __asm__(".pushsection .text\n"                                                             \
            ".globl " #name "\n"                                                               \
            ".type " #name ", @function\n"                                                     \
            ".p2align 4\n" #name ":\n" CONTEND_ENDBR "jmp *contend_tgt_" #name "(%rip)\n"       \
            ".size " #name ", .-" #name "\n"                                                   \
            ".popsection\n");
CONTEND_FUNCS(DECLARE_TGT)
#define REAL(name, type) ((type)(real_##name ? real_##name : (contend_fn)P##name))
#else
#define CONTEND_TRAMPOLINES 0
#define FN(name) int name
#define REAL(name, type) ((type)P##name)
#endif

static void fortran_resolve(void);
static void fortran_switch_to_real(int keep_finalize);

/* Resolves the library's own functions (once, in the constructor: never in a forked child). */
static void resolve_reals(void)
{
    fortran_resolve();
#if CONTEND_TRAMPOLINES
#define RESOLVE(name)                                                                          \
    {                                                                                          \
        void *p = dlsym(RTLD_NEXT, #name);                                                     \
        if (!p)                                                                                \
            p = dlsym(RTLD_DEFAULT, "P" #name);                                                \
        memcpy(&real_##name, &p, sizeof p);                                                    \
    }
    CONTEND_FUNCS(RESOLVE)
#undef RESOLVE
#endif
}

/* Points every stub at the library (pass-through). MPI_Finalize keeps its wrapper when
 * `keep_finalize` (a rank that must still take part in the clock comparison). */
static void switch_to_real(int keep_finalize)
{
#if CONTEND_TRAMPOLINES
#define SWITCH(name)                                                                           \
    if (real_##name && !(keep_finalize && strcmp(#name, "MPI_Finalize") == 0))               \
        __atomic_store_n(&contend_tgt_##name, real_##name, __ATOMIC_RELEASE);
    CONTEND_FUNCS(SWITCH)
#undef SWITCH
#endif
    fortran_switch_to_real(keep_finalize);
}

/* ---------------------------------------------------------------- small helpers */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    char line[PATH_MAX + 1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}

/* Replaces bytes that are not printable ASCII with '?' (tabs become spaces), so that any text
 * is valid UTF-8 for the string table. */
static void sanitize(char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\t')
            *s = ' ';
        else if (c < 0x20 || c >= 0x7F)
            *s = '?';
    }
}

/* Writes `data` to a new temporary file beside `path`: created with O_EXCL|O_NOFOLLOW under a
 * name no other process can predict (pid, time, address), so that nothing planted in the run
 * directory is written through. Returns the open descriptor's result: 0, or -1 (nothing
 * left behind). */
static int write_temporary(const char *path, const char *data, size_t len, char *tmp,
                           size_t cap)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(tmp, cap, "%s.tmp.%d.%lx%lx", path, (int)getpid(), (unsigned long)now.tv_nsec,
             (unsigned long)(uintptr_t)&now);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int rc = cst_write_all(fd, (const uint8_t *)data, len);
    if (close(fd) != 0)
        rc = -1;
    if (rc != 0)
        unlink(tmp);
    return rc;
}

/* Replaces `path` with `data` in one step (temporary file, then rename). */
static int write_file_atomically(const char *path, const char *data, size_t len)
{
    char tmp[PATH_MAX + 64];
    if (write_temporary(path, data, len, tmp, sizeof tmp) != 0)
        return -1;
    int rc = rename(tmp, path);
    if (rc != 0)
        unlink(tmp);
    return rc;
}

/* Creates `path` holding `data` in one step unless it exists (a hard link does not replace):
 * 0 when this call created it, 1 when it existed, -1 on error. Several processes racing to
 * publish one decision: exactly one wins, the others read the winner's. */
static int publish_once(const char *path, const char *data, size_t len)
{
    char tmp[PATH_MAX + 64];
    if (write_temporary(path, data, len, tmp, sizeof tmp) != 0)
        return -1;
    int rc = link(tmp, path) == 0 ? 0 : errno == EEXIST ? 1 : -1;
    unlink(tmp);
    return rc;
}

/* Copies /proc/self/maps to maps/rank-R.maps, or rank-R.N.maps beside a stream rank-R.N.cst
 * (temporary name, then rename). */
static void copy_maps(void)
{
    int in = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return;
    size_t cap = 65536, len = 0;
    char *buf = (char *)malloc(cap);
    while (buf) {
        if (len == cap) {
            char *n = (char *)realloc(buf, cap * 2);
            if (!n) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = n;
            cap *= 2;
        }
        ssize_t r = read(in, buf + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(in);
    if (!buf)
        return;
    char path[PATH_MAX + 64];
    if (g_suffix > 1)
        snprintf(path, sizeof path, "%s/maps/rank-%d.%d.maps", g_dir, g_rank, g_suffix);
    else
        snprintf(path, sizeof path, "%s/maps/rank-%d.maps", g_dir, g_rank);
    (void)write_file_atomically(path, buf, len);
    free(buf);
}

static void fortran_scratch_free(void);
static void runs_thread_end(void);
static void runs_write_locked(uint64_t end);

/* A thread's scratch arrays, freed when it ends (pthread key destructor), and its polling
 * runs, written. */
static void scratch_free(void *arg)
{
    (void)arg;
    int err = errno;
    runs_thread_end();
    free(tl_scr.req);
    free(tl_scr.st);
    memset(&tl_scr, 0, sizeof tl_scr);
    fortran_scratch_free();
    errno = err;
}

/* Makes the thread's scratch arrays hold at least `n` requests and statuses. Leaves errno
 * as it was. */
static int scratch_reserve(size_t n)
{
    if (n <= tl_scr.cap)
        return 0;
    int err = errno;
    size_t cap = tl_scr.cap ? tl_scr.cap : 16;
    while (cap < n)
        cap *= 2;
    int rc = -1;
    MPI_Request *r = (MPI_Request *)realloc(tl_scr.req, cap * sizeof *r);
    if (r) {
        tl_scr.req = r;
        MPI_Status *s = (MPI_Status *)realloc(tl_scr.st, cap * sizeof *s);
        if (s) {
            tl_scr.st = s;
            tl_scr.cap = cap;
            rc = 0;
        }
    }
    if (!tl_scr.registered && g_have_scratch_key &&
        pthread_setspecific(g_scratch_key, &tl_scr) == 0)
        tl_scr.registered = 1;
    errno = err;
    return rc;
}

/* count x size of `type`, saturated at 2^48 - 1; 0 for count <= 0 or an unknown size. Only
 * called with datatypes that a successful call just accepted. */
static uint64_t type_bytes(long long count, MPI_Datatype type)
{
    if (count <= 0)
        return 0;
    MPI_Count size = 0;
    if (PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size <= 0)
        return 0;
    if ((uint64_t)size > CST_MPI_VALUE_MAX / (uint64_t)count)
        return CST_MPI_VALUE_MAX;
    return (uint64_t)count * (uint64_t)size;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > CST_MPI_VALUE_MAX - b ? CST_MPI_VALUE_MAX : a + b;
}

/* The number of ranks a collective on `comm` addresses (the remote group's for an
 * intercommunicator), and this rank's rank in it (-1 for an intercommunicator). */
static int comm_shape(MPI_Comm comm, int *rank)
{
    int inter = 0, n = 0;
    *rank = -1;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        return 0;
    if (inter) {
        PMPI_Comm_remote_size(comm, &n);
    } else {
        PMPI_Comm_size(comm, &n);
        PMPI_Comm_rank(comm, rank);
    }
    return n;
}

/* ---------------------------------------------------------------- locking, groups */

static void drain_freed(void);

static void rlock(void)
{
    pthread_mutex_lock(&g_lock);
    if (g_freed_head)
        drain_freed();
}

static void runlock(void)
{
    pthread_mutex_unlock(&g_lock);
}

static void flush_locked(uint64_t now)
{
    (void)cst_flush(&g_w);
    g_last_flush = now;
}

/* The flusher thread. Calls flush at their exit when FLUSH_INTERVAL_NS has passed, but a rank
 * that blocks for good (its peer died: it waits in MPI_Recv until the launcher kills it) or
 * is killed while computing would lose what it buffered since. This thread wakes when the
 * oldest buffered record can be FLUSH_INTERVAL_NS old (at the latest FLUSH_INTERVAL_NS after
 * its last look) and writes out what has waited that long, so whatever a rank did up to
 * about 50 ms before it was killed is on disk. It costs the calls nothing (they never wait
 * for it: it only try-locks, and holds the lock only for a write(2) of records that have sat
 * for 50 ms, which the calls themselves would otherwise have written), wakes about 20 times a
 * second, never calls MPI (MPI_THREAD_SINGLE holds), runs with every signal blocked, and ends
 * at MPI_Finalize. A forked child has no flusher (and records nothing). It starts in MPI_Init
 * before the start-up agreement, and on rank 0 says once if the agreement has taken
 * INIT_WAIT_HINT_NS (see start()). */
static void *flusher_main(void *arg)
{
    (void)arg;
    uint64_t wait = FLUSH_INTERVAL_NS;
    int hinted = 0;
    for (;;) {
        if (wait < FLUSHER_MIN_SLEEP_NS)
            wait = FLUSHER_MIN_SLEEP_NS;
        struct timespec ts = {(time_t)(wait / 1000000000u), (long)(wait % 1000000000u)};
        nanosleep(&ts, NULL);
        if (__atomic_load_n(&g_flusher_stop, __ATOMIC_ACQUIRE))
            break;
        wait = FLUSH_INTERVAL_NS;
        uint64_t since = __atomic_load_n(&g_init_wait, __ATOMIC_ACQUIRE);
        if (since && !hinted && now_ns() - since >= INIT_WAIT_HINT_NS) {
            hinted = 1;
            say("contend: rank 0 has waited %llu s in MPI_Init for the ranks that announced "
                "themselves to make their communicator; one of them may have stopped\n",
                (unsigned long long)(INIT_WAIT_HINT_NS / 1000000000ull));
        }
        if (pthread_mutex_trylock(&g_lock) != 0) {
            wait = FLUSHER_MIN_SLEEP_NS; /* a call is writing its group: look again soon */
            continue;
        }
        if (g_fd >= 0 && g_w.buffered > 0) {
            uint64_t now = now_ns(), since = now - g_last_flush;
            if (since >= FLUSH_INTERVAL_NS)
                flush_locked(now);
            else
                wait = FLUSH_INTERVAL_NS - since; /* when the oldest record is due */
        }
        pthread_mutex_unlock(&g_lock);
    }
    return NULL;
}

/* Returns 0 when the thread was started. */
static int start_flusher(void)
{
    int rc = -1;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 64 * 1024);
        pthread_t t;
        if (pthread_create(&t, &attr, flusher_main, NULL) == 0) {
            pthread_setname_np(t, "contend-flush");
            rc = 0;
        }
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* Starts a call group of at most `n` records. A group that fits a chunk is never split
 * between two chunks (a rank killed at any moment leaves whole groups), so the buffer is
 * flushed first when the group would not fit. */
static void g_begin(unsigned n, uint64_t t0, int fn, void *site, uint32_t comm)
{
    if (g_w.buffered > 0 && g_w.buffered + n > g_w.chunk_events)
        flush_locked(g_last_flush);
    g_cur_ts = t0;
    uint16_t s = cst_intern_site(&g_w, (uint64_t)(uintptr_t)site);
    uint8_t r[16];
    cst_mpi_enter(r, t0, (uint8_t)fn, s, comm);
    cst_push_encoded(&g_w, r);
}

static inline void g_arg(int code, uint64_t bits48)
{
    uint8_t r[16];
    cst_mpi_arg(r, g_cur_ts, (uint8_t)code, bits48);
    cst_push_encoded(&g_w, r);
}

static inline void g_arg_s(int code, int64_t v)
{
    g_arg(code, cst_mpi_signed48(v));
}

static inline void g_arg_u(int code, uint64_t v)
{
    g_arg(code, cst_mpi_unsigned48(v));
}

/* Ends the group; writes the communicators freed meanwhile; flushes a full buffer, or when
 * 50 ms have passed since the last flush. */
static void g_end(uint64_t t1, int fn, int rc)
{
    uint8_t r[16];
    cst_mpi_exit(r, t1, (uint8_t)fn, rc);
    cst_push_encoded(&g_w, r);
    for (size_t i = 0; i < g_nfreed; i++) {
        cst_mpi_comm(r, g_freed_ts[i] > t1 ? g_freed_ts[i] : t1, 1, g_freed_ids[i]);
        cst_push_encoded(&g_w, r);
    }
    g_nfreed = 0;
    if (g_w.buffered >= g_w.chunk_events || t1 - g_last_flush >= FLUSH_INTERVAL_NS)
        flush_locked(t1);
}

/* ---------------------------------------------------------------- communicators */

/* MPI calls this (inside MPI_Comm_free or any other call that frees a communicator we put
 * our attribute on). Takes no lock: the handle is queued and removed from the table at the
 * next locked section, before any lookup, so a reused handle is never mistaken for the
 * freed communicator. */
static int comm_deleted(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)keyval;
    (void)value;
    (void)extra;
    int saved = errno;
    freed_node *n = (freed_node *)malloc(sizeof *n);
    if (n) {
        n->key = comm_key(comm);
        n->ts = now_ns();
        n->next = __atomic_load_n(&g_freed_head, __ATOMIC_RELAXED);
        while (!__atomic_compare_exchange_n(&g_freed_head, &n->next, n, 1, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED)) {
        }
    }
    errno = saved;
    return MPI_SUCCESS;
}

/* Under the lock: communicator `id`, NULL if unknown or gone. */
static inline comm_info *comm_at(uint32_t id)
{
    if (id >= g_ncomms)
        return NULL;
    comm_info *chunk = g_comm_chunks[id / COMM_CHUNK];
    return chunk ? &chunk[id % COMM_CHUNK] : NULL;
}

/* Under the lock: communicator `id` is freed and nothing names it any more. */
static void comm_gone(uint32_t id, comm_info *c)
{
    free(c->world);
    c->world = NULL;
    c->size = 0;
    uint32_t k = id / COMM_CHUNK;
    if (++g_chunk_gone[k] == COMM_CHUNK) {
        free(g_comm_chunks[k]);
        g_comm_chunks[k] = NULL;
    }
}

/* Under the lock: a request or message naming communicator `id` enters (ref) or leaves
 * (unref) the tables. A freed communicator's member list is kept while any names it: a
 * receive posted on it may complete after MPI_Comm_free, and its status is translated with
 * it. */
static inline void comm_ref(uint32_t id)
{
    comm_info *c = comm_at(id);
    if (c)
        c->refs++;
}

static void comm_unref(uint32_t id)
{
    comm_info *c = comm_at(id);
    if (c && c->refs > 0 && --c->refs == 0 && c->freed)
        comm_gone(id, c);
}

/* Under the lock: communicator `id` was freed. Its identity is freed, and its member list
 * once nothing names it. */
static void comm_release(uint32_t id)
{
    comm_info *c = id < 2 ? NULL : comm_at(id);
    if (!c || c->freed)
        return;
    c->freed = 1;
    free(c->ident);
    c->ident = NULL;
    if (c->refs == 0)
        comm_gone(id, c);
}

static void queue_freed(uint32_t id, uint64_t ts)
{
    comm_release(id);
    if (g_nfreed == g_capfreed) {
        size_t cap = g_capfreed ? g_capfreed * 2 : 16;
        uint32_t *a = (uint32_t *)realloc(g_freed_ids, cap * sizeof *a);
        if (!a)
            return;
        g_freed_ids = a;
        uint64_t *b = (uint64_t *)realloc(g_freed_ts, cap * sizeof *b);
        if (!b)
            return;
        g_freed_ts = b;
        g_capfreed = cap;
    }
    g_freed_ids[g_nfreed] = id;
    g_freed_ts[g_nfreed] = ts;
    g_nfreed++;
}

/* Under the lock: forgets the handles freed since the last call. */
static void drain_freed(void)
{
    freed_node *n = __atomic_exchange_n(&g_freed_head, NULL, __ATOMIC_ACQUIRE);
    freed_node *rev = NULL;
    while (n) {
        freed_node *next = n->next;
        n->next = rev;
        rev = n;
        n = next;
    }
    while (rev) {
        freed_node *next = rev->next;
        cst_map_entry *e = cst_map_get(&g_comm_map, rev->key);
        if (e) {
            uint32_t id = (uint32_t)e->val;
            cst_map_del(&g_comm_map, rev->key);
            if (id < INTER_COMM)
                queue_freed(id, rev->ts);
        }
        free(rev);
        rev = next;
    }
}

/* "IDENT r0 r1 ..." */
static char *members_string(const char *ident, int size, const int *world)
{
    size_t cap = strlen(ident) + (size_t)(size > 0 ? size : 0) * 12 + 1;
    char *s = (char *)malloc(cap);
    if (!s)
        return NULL;
    size_t len = (size_t)snprintf(s, cap, "%s", ident);
    for (int i = 0; i < size; i++)
        len += (size_t)snprintf(s + len, cap - len, " %d", world ? world[i] : i);
    return s;
}

/* Under the lock: gives the next local id to a communicator and writes its definition.
 * Takes ownership of `ident` and `world`. */
static uint32_t define_comm(char *ident, int size, int *world, uint64_t ts)
{
    uint32_t k = g_ncomms / COMM_CHUNK;
    if (k == g_capchunks) {
        uint32_t cap = g_capchunks ? g_capchunks * 2 : 16;
        comm_info **n = (comm_info **)realloc(g_comm_chunks, cap * sizeof *n);
        if (n)
            g_comm_chunks = n;
        uint32_t *gone = n ? (uint32_t *)realloc(g_chunk_gone, cap * sizeof *gone) : NULL;
        if (gone)
            g_chunk_gone = gone;
        if (!n || !gone || g_ncomms >= INTER_COMM - COMM_CHUNK) {
            free(ident);
            free(world);
            return NO_COMM;
        }
        g_capchunks = cap;
    }
    if (k == g_nchunks) {
        comm_info *chunk = (comm_info *)calloc(COMM_CHUNK, sizeof *chunk);
        if (!chunk) {
            free(ident);
            free(world);
            return NO_COMM;
        }
        g_comm_chunks[k] = chunk;
        g_chunk_gone[k] = 0;
        g_nchunks++;
    }
    uint32_t id = g_ncomms++;
    comm_info *c = &g_comm_chunks[k][id % COMM_CHUNK];
    c->ident = ident;
    c->size = size;
    c->world = world;
    /* A members string is not asked for again (its identity makes it unique): the writer
     * keeps no copy of it. */
    char *m = members_string(ident, size, world);
    uint32_t sid = m ? cst_add_string(&g_w, m, strlen(m)) : CST_NO_STRING;
    free(m);
    uint8_t r[16];
    cst_mpi_comm(r, ts, 0, id);
    cst_push_encoded(&g_w, r);
    cst_mpi_comm_members(r, ts, sid);
    cst_push_encoded(&g_w, r);
    return id;
}

typedef struct comm_query {
    int inter;
    int size;
    int *world; /* malloc'd, size entries */
} comm_query;

/* Not under the lock: what a communicator is (intercommunicator, or its members' world
 * ranks), and our attribute set on it so that its freeing is noticed. */
static int query_comm(MPI_Comm c, comm_query *q)
{
    memset(q, 0, sizeof *q);
    int inter = 0;
    if (PMPI_Comm_test_inter(c, &inter) != MPI_SUCCESS)
        return -1;
    if (g_have_keyval)
        PMPI_Comm_set_attr(c, g_keyval, NULL);
    if (inter) {
        q->inter = 1;
        return 0;
    }
    int size = 0;
    MPI_Group g;
    if (PMPI_Comm_size(c, &size) != MPI_SUCCESS || size <= 0)
        return -1;
    if (PMPI_Comm_group(c, &g) != MPI_SUCCESS)
        return -1;
    int *ranks = (int *)malloc((size_t)size * sizeof(int));
    int *world = (int *)malloc((size_t)size * sizeof(int));
    if (!ranks || !world) {
        free(ranks);
        free(world);
        PMPI_Group_free(&g);
        return -1;
    }
    for (int i = 0; i < size; i++)
        ranks[i] = i;
    int rc = PMPI_Group_translate_ranks(g, size, ranks, g_world_group, world);
    PMPI_Group_free(&g);
    free(ranks);
    if (rc != MPI_SUCCESS) {
        free(world);
        return -1;
    }
    q->size = size;
    q->world = world;
    return 0;
}

/* Under the lock: defines an intracommunicator met without having seen it created as
 * "met#K", the Kth communicator with this member list met on this rank. Takes q->world. */
static uint32_t define_met(comm_query *q, uint64_t ts)
{
    char *list = members_string("", q->size, q->world);
    uint64_t h = list ? cst_fnv1a(list, strlen(list)) : 0;
    free(list);
    cst_map_entry *m = cst_map_get(&g_met_counts, h);
    uint64_t k = (m ? m->val : 0) + 1;
    cst_map_put(&g_met_counts, h, k, 0);
    char *ident = (char *)malloc(32);
    if (!ident) {
        free(q->world);
        q->world = NULL;
        return NO_COMM;
    }
    snprintf(ident, 32, "met#%llu", (unsigned long long)k);
    uint32_t id = define_comm(ident, q->size, q->world, ts);
    q->world = NULL;
    return id;
}

/* Under the lock: the local id of `c`, defining it first (`met#K`) if it was never seen.
 * May release and retake the lock (so call it before g_begin). Queries MPI only when
 * `may_query` (the handle is known valid: the call succeeded). */
static uint32_t comm_id(MPI_Comm c, int may_query, uint64_t ts)
{
    if (c == MPI_COMM_NULL)
        return NO_COMM;
    if (c == MPI_COMM_WORLD)
        return 0;
    if (c == MPI_COMM_SELF)
        return 1;
    uint64_t key = comm_key(c);
    cst_map_entry *e = cst_map_get(&g_comm_map, key);
    if (e)
        return (uint32_t)e->val;
    if (!may_query)
        return NO_COMM;
    /* Definitions are made holding g_deflock (taken before g_lock, never inside it), so a
     * communicator is queried, and our attribute set on it, once. */
    runlock();
    pthread_mutex_lock(&g_deflock);
    rlock();
    e = cst_map_get(&g_comm_map, key);
    runlock();
    comm_query q;
    int ok = !e && query_comm(c, &q) == 0;
    rlock();
    pthread_mutex_unlock(&g_deflock);
    e = cst_map_get(&g_comm_map, key);
    if (e) {
        if (ok)
            free(q.world);
        return (uint32_t)e->val;
    }
    if (!ok)
        return NO_COMM;
    uint32_t id = q.inter ? INTER_COMM : define_met(&q, ts);
    if (id != NO_COMM)
        cst_map_put(&g_comm_map, key, id, 0);
    return id;
}

/* World rank of rank `r` of communicator `id`; -1 ANY_SOURCE, -2 PROC_NULL; ranks of
 * intercommunicators (and out-of-range ranks) as given. */
static int64_t to_world(uint32_t id, int r)
{
    if (r == MPI_PROC_NULL)
        return -2;
    if (r == MPI_ANY_SOURCE)
        return -1;
    comm_info *c = r < 0 ? NULL : comm_at(id);
    if (!c || !c->world || r >= c->size)
        return r;
    return c->world[r];
}

static inline int64_t tag_value(int tag)
{
    return tag == MPI_ANY_TAG ? -1 : tag;
}

/* ---------------------------------------------------------------- statuses, requests */

/* Under the lock, inside a group: source, tag and bytes of a receive's status. A receive
 * posted with MPI_PROC_NULL (`proc_null`) writes what MPI defines for it (source
 * MPI_PROC_NULL, tag MPI_ANY_TAG, 0 bytes) whatever the library left in the status (MPICH's
 * Waitall leaves source 0, tag 0). */
static void g_status(const MPI_Status *st, uint32_t comm, int proc_null)
{
    if (proc_null) {
        g_arg_s(AC_STATUS_SOURCE, -2);
        g_arg_s(AC_STATUS_TAG, -1);
        g_arg_u(AC_STATUS_BYTES, 0);
        return;
    }
    if (!st)
        return;
    int count = 0;
    uint64_t bytes = 0;
    if (PMPI_Get_count(st, MPI_BYTE, &count) == MPI_SUCCESS && count != MPI_UNDEFINED) {
        bytes = count > 0 ? (uint64_t)count : 0;
    } else {
        MPI_Count big = 0;
        if (PMPI_Get_elements_x(st, MPI_BYTE, &big) == MPI_SUCCESS && big > 0)
            bytes = (uint64_t)big;
    }
    g_arg_s(AC_STATUS_SOURCE, to_world(comm, st->MPI_SOURCE));
    g_arg_s(AC_STATUS_TAG, tag_value(st->MPI_TAG));
    g_arg_u(AC_STATUS_BYTES, bytes);
}

/* The request table maps a handle to the requests that hold it, oldest (smallest id) first:
 * one entry, or a queue when there are more. Which one a call completes:
 *
 * - Shared handles: the library gives one handle to several requests at once when it
 *   completed them at once: Open MPI's &ompi_request_empty (an eagerly sent Isend, a send or
 *   receive with MPI_PROC_NULL), MPICH's built-in handles (kind bits 30-31 = 01: 0x6c000001
 *   for sends, 0x6c000002 for receives ...). A completion takes the oldest (all were complete
 *   when created, so which one does not matter, even across threads). A request the program
 *   never completes stays at the front: a queue holds at most RQ_QUEUE_MAX, dropping the
 *   oldest beyond.
 * - Any other handle names one live request at a time. A completion call notes the next
 *   request id before it calls the library (tl_mark). The request it completes was recorded
 *   before that (the program had its handle), so it has an older id; a request another
 *   thread created meanwhile that got the same handle back from the library (freed inside
 *   this call) has a newer one, and stays. The completion takes the newest request older than
 *   tl_mark; none: a request the wrapper did not see created (id 0). Older ones stay: they
 *   may be requests whose completion another thread has not written yet, or requests
 *   completed by calls the wrapper does not see (the library has reused the handle since),
 *   which the queue drops beyond RQ_UNIQUE_MAX, oldest first. */
#define RQ_UNIQUE_MAX 4u

/* Does the library give handle `key` to several requests at once? */
static inline int shared_request(uint64_t key)
{
#if BUILT_FAMILY == 2
    return key <= 0xFFFFFFFFu && (key >> 30) == 1u;
#elif BUILT_FAMILY == 1
    return g_shared_req == 0 || key == g_shared_req; /* unknown: queue every handle */
#else
    (void)key;
    return 1;
#endif
}

/* The next request id, noted by a completion call before it calls the library. Read without
 * the lock (only ever written under it). */
static __thread uint64_t tl_mark TLS_IE;
#define REQ_MARK() (tl_mark = __atomic_load_n(&g_next_req, __ATOMIC_RELAXED))

static inline req_item *rq_at(req_queue *q, uint32_t i)
{
    return &q->items[(q->head + i) % q->cap];
}

/* Under the lock: queue `q`'s oldest item, taken out. */
static req_item rq_pop(req_queue *q)
{
    req_item it = *rq_at(q, 0);
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return it;
}

/* Under the lock: a free queue slot (reusing its items array), or UINT32_MAX. */
static uint32_t rq_slot(void)
{
    if (g_nrq_free > 0)
        return g_rq_free[--g_nrq_free];
    req_queue *n = (req_queue *)realloc(g_rq, (g_nrq + 1) * sizeof *n);
    if (!n)
        return UINT32_MAX;
    g_rq = n;
    uint32_t *f = (uint32_t *)realloc(g_rq_free, (g_nrq + 1) * sizeof *f);
    if (!f)
        return UINT32_MAX;
    g_rq_free = f;
    memset(&g_rq[g_nrq], 0, sizeof *g_rq);
    return g_nrq++;
}

/* Under the lock: queue slot `k` is empty again. */
static void rq_release(uint32_t k)
{
    g_rq[k].len = 0;
    g_rq_free[g_nrq_free++] = k;
}

/* Under the lock: appends `it` to entry `e`'s requests, turning a single entry into a queue
 * first; drops the oldest beyond `max`. -1 (nothing changed) when out of memory. */
static int rq_push(cst_map_entry *e, req_item it, uint32_t max)
{
    req_queue *q;
    if (e->flags & RQ_QUEUE) {
        q = &g_rq[e->val];
    } else {
        uint32_t k = rq_slot();
        if (k == UINT32_MAX)
            return -1;
        q = &g_rq[k];
        if (q->cap < 2) {
            req_item *items = (req_item *)realloc(q->items, 4 * sizeof *items);
            if (!items) {
                rq_release(k);
                return -1;
            }
            q->items = items;
            q->cap = 4;
        }
        q->head = 0;
        q->len = 1;
        q->items[0] = (req_item){e->val, e->aux, e->flags};
        e->val = k;
        e->aux = 0;
        e->flags = RQ_QUEUE;
    }
    while (q->len >= max)
        comm_unref(rq_pop(q).comm);
    if (q->len == q->cap) {
        uint32_t cap = q->cap * 2;
        req_item *items = (req_item *)malloc(cap * sizeof *items);
        if (!items)
            return -1;
        for (uint32_t i = 0; i < q->len; i++)
            items[i] = *rq_at(q, i);
        free(q->items);
        q->items = items;
        q->cap = cap;
        q->head = 0;
    }
    *rq_at(q, q->len) = it;
    q->len++;
    return 0;
}

/* Under the lock: which of entry `e`'s requests (handle `key`) a completion call that began
 * at tl_mark completed: its position in the queue (0 for a single entry), or -1 if none
 * (a request the wrapper did not see created). See above. */
static int rq_pick(uint64_t key, const cst_map_entry *e)
{
    if (shared_request(key))
        return 0;
    if (!(e->flags & RQ_QUEUE))
        return e->val < tl_mark ? 0 : -1;
    req_queue *q = &g_rq[e->val];
    uint32_t older = 0;
    while (older < q->len && rq_at(q, older)->id < tl_mark)
        older++;
    return (int)older - 1;
}

/* Under the lock: takes the request a completion (or MPI_Request_free, when `freeing`) of
 * handle `key` (entry `e`) is about out of the table. Returns
 * 0 with nothing taken when it is none of them, or an inactive persistent request (an active
 * one stays, made inactive, unless `freeing`). The caller unrefs the item's communicator
 * (when *released) after using it. */
static int rq_take(uint64_t key, cst_map_entry *e, int freeing, req_item *out, int *released)
{
    *released = 1;
    int pick = rq_pick(key, e);
    if (pick < 0)
        return 0;
    if (e->flags & RQ_QUEUE) {
        uint32_t k = (uint32_t)e->val;
        req_queue *q = &g_rq[k];
        *out = *rq_at(q, (uint32_t)pick);
        for (uint32_t i = (uint32_t)pick; i > 0; i--) /* close the gap: older ones move up */
            *rq_at(q, i) = *rq_at(q, i - 1);
        (void)rq_pop(q);
        if (q->len == 0) {
            rq_release(k);
            cst_map_del(&g_req_map, key);
        }
        return 1;
    }
    *out = (req_item){e->val, e->aux, e->flags};
    if ((e->flags & RQ_PERSISTENT) && !freeing) {
        *released = 0;
        if (!(e->flags & RQ_ACTIVE))
            return 0;
        e->flags &= (uint16_t)~RQ_ACTIVE;
        return 1;
    }
    cst_map_del(&g_req_map, key);
    return 1;
}

/* Under the lock: drops every request of entry `e` (a persistent request takes the handle). */
static void rq_forget(uint64_t key, cst_map_entry *e)
{
    if (e->flags & RQ_QUEUE) {
        req_queue *q = &g_rq[e->val];
        while (q->len > 0)
            comm_unref(rq_pop(q).comm);
        rq_release((uint32_t)e->val);
    } else {
        comm_unref(e->aux);
    }
    cst_map_del(&g_req_map, key);
}

/* Under the lock: a new request's id. */
static uint64_t new_request(MPI_Request r, unsigned flags, uint32_t comm)
{
    uint64_t id = g_next_req;
    __atomic_store_n(&g_next_req, id + 1, __ATOMIC_RELAXED);
    uint64_t key = req_key(r);
    cst_map_entry *e = cst_map_get(&g_req_map, key);
    if (e) {
        if (!(flags & RQ_PERSISTENT) && !(e->flags & RQ_PERSISTENT) &&
            rq_push(e, (req_item){id, comm, (uint16_t)flags},
                    shared_request(key) ? RQ_QUEUE_MAX : RQ_UNIQUE_MAX) == 0) {
            comm_ref(comm);
            return id;
        }
        rq_forget(key, e);
    }
    e = cst_map_put(&g_req_map, key, id, comm);
    if (e) {
        e->flags = (uint16_t)flags;
        comm_ref(comm);
    }
    return id;
}

/* Under the lock, inside a group of a completion call (REQ_MARK() before the library call):
 * request `r` (its handle before the call) completed with status `st` (NULL if none); `ok`
 * when it completed without error. Writes `request completed` and, for a successful receive,
 * its status, or `status cancelled`. A request the wrapper did not see created has id 0; an
 * inactive persistent request is skipped. */
static void g_completion(MPI_Request r, const MPI_Status *st, int ok)
{
    uint64_t key = req_key(r);
    cst_map_entry *e = cst_map_get(&g_req_map, key);
    req_item it;
    int released;
    if (!e || !rq_take(key, e, 0, &it, &released)) {
        if (!e || rq_pick(key, e) < 0)
            g_arg_u(AC_REQUEST_COMPLETED, 0);
        return;
    }
    g_arg_u(AC_REQUEST_COMPLETED, it.id);
    if (ok && st) {
        int cancelled = 0;
        if (!(it.flags & RQ_PROC_NULL))
            PMPI_Test_cancelled(st, &cancelled);
        if (cancelled)
            g_arg_u(AC_STATUS_CANCELLED, 1);
        else if (it.flags & RQ_RECV)
            g_status(st, it.comm, it.flags & RQ_PROC_NULL);
    }
    if (released)
        comm_unref(it.comm);
}

/* Under the lock, in MPI_Cancel or MPI_Request_free (REQ_MARK() before the library call):
 * the id of the request handle `r` names, 0 if unknown. */
static uint64_t request_id(MPI_Request r)
{
    uint64_t key = req_key(r);
    cst_map_entry *e = cst_map_get(&g_req_map, key);
    int pick = e ? rq_pick(key, e) : -1;
    if (pick < 0)
        return 0;
    if (e->flags & RQ_QUEUE)
        return rq_at(&g_rq[e->val], (uint32_t)pick)->id;
    return e->val;
}

/* Under the lock: MPI_Request_free freed handle `r`'s request. */
static void request_freed(MPI_Request r)
{
    uint64_t key = req_key(r);
    cst_map_entry *e = cst_map_get(&g_req_map, key);
    req_item it;
    int released;
    if (e && rq_take(key, e, 1, &it, &released))
        comm_unref(it.comm);
}

/* ---------------------------------------------------------------- the stream */

static void mark(uint64_t ts, const char *label)
{
    uint32_t sid = cst_intern_cstr(&g_w, label);
    cst_push(&g_w, ts, CST_EV_MARK, 0, CST_NO_SITE, sid);
}

/* streams/rank-R.cst (n = 1) or rank-R.n.cst. */
static void stream_path(char *path, size_t cap, int n)
{
    if (n <= 1)
        snprintf(path, cap, "%s/streams/rank-%d.cst", g_dir, g_rank);
    else
        snprintf(path, cap, "%s/streams/rank-%d.%d.cst", g_dir, g_rank, n);
}

/* The first stream number this rank has free (1: rank-R.cst). */
static int first_free_suffix(void)
{
    char path[PATH_MAX + 64];
    struct stat sb;
    int n = 1;
    for (; n < 1000; n++) {
        stream_path(path, sizeof path, n);
        if (stat(path, &sb) != 0)
            break;
    }
    return n;
}

/* Creates this rank's stream, numbered `from` or the first free number after it. */
static int open_stream(uint64_t base_time, int from)
{
    char path[PATH_MAX + 64];
    mkdir(g_dir, 0755);
    snprintf(path, sizeof path, "%s/streams", g_dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/maps", g_dir);
    mkdir(path, 0755);
    int fd = -1;
    for (int n = from < 1 ? 1 : from; n < 1000 && fd < 0; n++) {
        stream_path(path, sizeof path, n);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST)
            break;
        g_suffix = n;
    }
    if (fd < 0) {
        say("contend: cannot create %s: %s; rank %d is not recorded\n", path, strerror(errno),
            g_rank);
        return -1;
    }
    cst_header h = {
        .kind = CST_STREAM_RANK,
        .clock = CST_CLOCK_MONOTONIC,
        .clock_hz = 1000000000u,
        .pid = (uint32_t)getpid(),
        .tid = 0,
        .rank = g_rank,
        .base_time = base_time,
    };
    if (cst_open(&g_w, fd, &h, CHUNK_RECORDS) != 0) {
        say("contend: cannot write %s; rank %d is not recorded\n", path, g_rank);
        close(fd);
        return -1;
    }
    g_fd = fd;
    return 0;
}

/* Flushes and closes the stream with its trailer. Under the lock. The writer's memory is
 * not freed: a thread that was inside an MPI call when the stream closed (exit() without
 * MPI_Finalize, or MPI_Finalize, while another thread is in a call) still writes its group
 * when the call returns; the writer, marked broken with no file, takes those records and
 * never writes them. */
static void close_stream(uint64_t end_time)
{
    if (g_fd < 0)
        return;
    uint8_t r[16];
    for (size_t i = 0; i < g_nfreed; i++) {
        cst_mpi_comm(r, g_freed_ts[i], 1, g_freed_ids[i]);
        cst_push_encoded(&g_w, r);
    }
    g_nfreed = 0;
    (void)cst_finish(&g_w, end_time);
    close(g_fd);
    g_fd = -1;
    g_w.fd = -1;
    g_w.broken = 1;
}

/* ---------------------------------------------------------------- clock comparison */

#define JOIN_WAIT_NS 2000000000ull   /* MPI_Init ends on all ranks within ms (a PMI fence) */
#define JOIN_MARGIN_NS 1000000000ull /* rank 0 may leave MPI_Init that much after another */
static uint64_t join_wait_ns(void);

/* Completes `req` by `deadline` (now_ns), or cancels it: 1 when it completed. Polls with
 * PMPI_Test (progress) and yields the CPU between polls. */
static int complete_by(MPI_Request *req, uint64_t deadline)
{
    int done = 0;
    while (PMPI_Test(req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done) {
        if (now_ns() >= deadline) {
            /* A cancelled receive completes at once; the sends here are 0 or 8 bytes, sent
             * eagerly, and complete locally. */
            PMPI_Cancel(req);
            PMPI_Wait(req, MPI_STATUS_IGNORE);
            return 0;
        }
        sched_yield();
    }
    return done;
}

/* CLOCK_MONOTONIC and CLOCK_REALTIME read together (the monotonic reading is the middle of
 * two around the realtime one). */
static void realtime_pair(uint64_t *mono, uint64_t *real)
{
    struct timespec t;
    uint64_t a = now_ns();
    clock_gettime(CLOCK_REALTIME, &t);
    uint64_t b = now_ns();
    *mono = a + (b - a) / 2;
    *real = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* How long the clock comparison at MPI_Finalize waits for a member: ranks of a sound job reach
 * MPI_Finalize up to this far apart (one writing its output while the others wait); a member
 * that never comes (killed, or left without MPI_Finalize in an MPI that goes on) costs this
 * once, and the ranks not compared keep their Init offset. */
#define FINALIZE_WAIT_NS 30000000000ull

/* Over the members' communicator, point to point, each operation bounded: rank 0 serves
 * members 1, 2, ... in turn; each makes 10 exchanges and keeps the one with the smallest round
 * trip. A rank recording on its own (g_alone) exchanges nothing. Writes mpi-clock and its two
 * mpi-clock-offset records, and mpi.realtime (both clocks, for aligning a rank that could not
 * compare and for cross-checking those that did), when recording. */
static void clock_sync(int phase)
{
    enum { EXCHANGES = 10, TAG = 0 };
    uint64_t ts, best = UINT64_MAX;
    int64_t offset = 0;
    int trips = 0;
    uint64_t wait = phase == 0 ? join_wait_ns() + JOIN_MARGIN_NS : FINALIZE_WAIT_NS;
    uint64_t deadline = now_ns() + wait;
    if (g_alone) {
        ts = now_ns();
        best = 0;
    } else if (g_rank == 0) {
        int members = 1; /* the ranks that recorded: rank 0 serves its communicator's */
        if (PMPI_Comm_size(g_sync_comm, &members) != MPI_SUCCESS)
            members = 1;
        int missed = 0;
        for (int r = 1; r < members; r++) {
            for (int i = 0; i < EXCHANGES; i++) {
                char ping;
                MPI_Request q;
                if (PMPI_Irecv(&ping, 0, MPI_BYTE, r, TAG, g_sync_comm, &q) != MPI_SUCCESS)
                    break;
                if (!complete_by(&q, deadline)) {
                    missed++;
                    break;
                }
                uint64_t t0 = now_ns();
                if (PMPI_Isend(&t0, 8, MPI_BYTE, r, TAG, g_sync_comm, &q) != MPI_SUCCESS ||
                    !complete_by(&q, deadline))
                    break;
            }
        }
        if (missed)
            say("contend: %d recording rank(s) did not reach the clock comparison at %s within "
                "%.0f s: they keep the offset measured at MPI_Init, or none\n",
                missed, phase == 0 ? "MPI_Init" : "MPI_Finalize", (double)wait / 1e9);
        ts = now_ns();
        best = 0;
    } else {
        uint64_t b1 = 0, b2 = 0, b0 = 0;
        for (int i = 0; i < EXCHANGES; i++) {
            char ping = 0;
            uint64_t t0 = 0;
            MPI_Request q;
            uint64_t t1 = now_ns();
            if (PMPI_Isend(&ping, 0, MPI_BYTE, 0, TAG, g_sync_comm, &q) != MPI_SUCCESS ||
                !complete_by(&q, deadline))
                break;
            if (PMPI_Irecv(&t0, 8, MPI_BYTE, 0, TAG, g_sync_comm, &q) != MPI_SUCCESS ||
                !complete_by(&q, deadline))
                break;
            uint64_t t2 = now_ns();
            trips++;
            if (t2 - t1 < best) {
                best = t2 - t1;
                b1 = t1;
                b2 = t2;
                b0 = t0;
            }
        }
        if (trips > 0) {
            ts = b1 + (b2 - b1) / 2;
            offset = (int64_t)(b0 - ts);
        } else {
            ts = now_ns();
            best = 0;
        }
    }
    if (!g_recording && g_fd < 0)
        return;
    uint8_t recs[3][16];
    cst_mpi_clock(recs, ts, (uint8_t)phase, (uint64_t)trips, best, offset);
    uint64_t mono, real;
    realtime_pair(&mono, &real);
    char label[96];
    snprintf(label, sizeof label, "mpi.realtime=%d %llu %llu", phase, (unsigned long long)mono,
             (unsigned long long)real);
    rlock();
    for (int i = 0; i < 3; i++)
        cst_push_encoded(&g_w, recs[i]);
    mark(mono, label);
    runlock();
}

/* ---------------------------------------------------------------- Init, Finalize, Abort */

/* The first line of the loaded library's MPI_Get_library_version (callable before Init). */
static void library_line(char *out, size_t cap)
{
    static char text[16384 + MPI_MAX_LIBRARY_VERSION_STRING]; /* room for any MPI's maximum */
    int len = 0;
    memset(text, 0, sizeof text);
    if (PMPI_Get_library_version(text, &len) != MPI_SUCCESS)
        text[0] = 0;
    text[sizeof text - 1] = 0;
    size_t n = strcspn(text, "\r\n");
    while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t'))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy(out, text, n);
    out[n] = 0;
}

static int version_after(const char *s, const char *prefix)
{
    const char *p = strstr(s, prefix);
    if (!p)
        return -1;
    p += strlen(prefix);
    while (*p == ' ' || *p == '\t' || *p == 'v')
        p++;
    return (*p >= '0' && *p <= '9') ? atoi(p) : -1;
}

/* Does the loaded library (`line`) match the one this file was compiled for? Same family and
 * same major version (Open MPI and MPICH keep their ABI within a major version; MPICH's
 * derivatives, MVAPICH and Intel MPI, share MPICH's ABI and are accepted by family alone). */
static int library_matches(const char *line)
{
#if BUILT_FAMILY == 1
    if (strncmp(line, "Open MPI", 8) != 0)
        return 0;
    return version_after(line, "Open MPI") == BUILT_MAJOR;
#elif BUILT_FAMILY == 2
    if (strstr(line, "MPICH Version:"))
        return version_after(line, "MPICH Version:") == BUILT_MAJOR;
    return strstr(line, "MVAPICH") != NULL || strstr(line, "Intel(R) MPI") != NULL;
#else
    (void)line;
    (void)version_after;
    return 0;
#endif
}

/* Says why this rank is not recorded, on stderr and in mpi-refused-PID.txt (which contend
 * record reports, and which reads without the "contend: " of stderr). */
static void refuse(const char *loaded)
{
    char text[PATH_MAX + 1024]; /* `loaded` may hold a path */
    snprintf(text, sizeof text,
             "the MPI wrapper was built for %s but this rank loaded %s: the rank runs "
             "unrecorded (the wrapper must be built with the mpicc of the MPI the program runs "
             "with, as contend record --mpi does; --mpi-impl names that MPI when contend cannot "
             "tell)\n",
             BUILT_FOR, loaded[0] ? loaded : "an MPI that does not name itself");
    say("contend: %s", text);
    mkdir(g_dir, 0755);
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/mpi-refused-%d.txt", g_dir, (int)getpid());
    (void)write_file_atomically(path, text, strlen(text));
}

/* ---------------------------------------------------------------- the bounded start-up agreement
 *
 * No collective over MPI_COMM_WORLD: a rank started without the wrapper never makes one, and
 * the ranks that did would wait in it for good. Instead each wrapped rank announces itself in
 * the run directory (mpi-join/N.rank-R, created with O_EXCL: N is the first job number not yet
 * decided whose announcement for rank R is free, which tells consecutive jobs in one directory
 * apart). Rank 0 waits for the announcements at most join_wait_ns() and publishes
 * mpi-join/N.members (one '0'/'1' per world rank) with publish_once(). Every other rank waits
 * for that decision at most join_wait_ns() + JOIN_MARGIN_NS; when none comes (rank 0 without
 * the wrapper, or a run directory that is not the one rank 0 writes: hosts without a shared
 * file system) it publishes one in which nobody is a member, so that a late rank 0 reads the
 * same decision. The members create their communicator with MPI_Comm_create_group,
 * collective over the members only; every other wrapped rank records on its own (g_alone),
 * its clock aligned afterwards by CLOCK_REALTIME. */
#define JOIN_POLL_NS 1000000ull

/* CONTEND_MPI_JOIN_S (seconds, decimal) or JOIN_WAIT_NS. */
static uint64_t join_wait_ns(void)
{
    const char *v = getenv("CONTEND_MPI_JOIN_S");
    if (v && *v) {
        char *end;
        double sec = strtod(v, &end);
        if (*end == 0 && sec >= 0 && sec <= 3600)
            return (uint64_t)(sec * 1e9);
    }
    return JOIN_WAIT_NS;
}

static int join_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void join_sleep(void)
{
    struct timespec ts = {0, (long)JOIN_POLL_NS};
    nanosleep(&ts, NULL);
}

/* Reads a published decision into `members` (g_size + 1 bytes): 1 when it is whole and well
 * formed (a regular file of g_size '0'/'1' bytes), 0 otherwise. */
static int read_decision(const char *path, char *members)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    size_t got = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == (off_t)g_size) {
        while (got < (size_t)g_size) {
            ssize_t r = read(fd, members + got, (size_t)g_size - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
    }
    close(fd);
    members[g_size] = 0;
    if (got != (size_t)g_size)
        return 0;
    for (int r = 0; r < g_size; r++)
        if (members[r] != '0' && members[r] != '1')
            return 0;
    return 1;
}

enum join_result { JOIN_MEMBER, JOIN_ALONE };

/* The agreement. JOIN_MEMBER: *out is the decision ('0'/'1' per world rank, malloc'd), this
 * rank one of its members. JOIN_ALONE: this rank records on its own, having said why. */
static int join(char **out)
{
    *out = NULL;
    char dir[PATH_MAX + 32], path[PATH_MAX + 64];
    snprintf(dir, sizeof dir, "%s/mpi-join", g_dir);
    mkdir(g_dir, 0755);
    mkdir(dir, 0755);
    int job = -1;
    for (int n = 1; n < 100000 && job < 0; n++) {
        /* A decided job is over (jobs of different sizes leave different ranks' numbers
         * free): the first undecided number whose announcement for this rank is free. */
        snprintf(path, sizeof path, "%s/%d.members", dir, n);
        if (join_exists(path))
            continue;
        snprintf(path, sizeof path, "%s/%d.rank-%d", dir, n, g_rank);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            char line[64];
            int len = snprintf(line, sizeof line, "%d\n", (int)getpid());
            (void)cst_write_all(fd, (const uint8_t *)line, (size_t)len);
            close(fd);
            job = n;
        } else if (errno != EEXIST) {
            break;
        }
    }
    if (job < 0) {
        say("contend: rank %d cannot announce itself in %s: it records on its own\n", g_rank,
            dir);
        return JOIN_ALONE;
    }
    char *members = (char *)malloc((size_t)g_size + 1);
    if (!members)
        return JOIN_ALONE;
    char decided[PATH_MAX + 64];
    snprintf(decided, sizeof decided, "%s/%d.members", dir, job);
    uint64_t wait = join_wait_ns(), start = now_ns();
    int have = 0, said = 0;
    if (g_rank == 0) {
        int seen = 1;
        memset(members, '0', (size_t)g_size);
        members[g_size] = 0;
        members[0] = '1';
        while (seen < g_size && now_ns() - start < wait) {
            for (int r = 1; r < g_size; r++) {
                if (members[r] == '1')
                    continue;
                snprintf(path, sizeof path, "%s/%d.rank-%d", dir, job, r);
                if (join_exists(path)) {
                    members[r] = '1';
                    seen++;
                }
            }
            if (seen < g_size)
                join_sleep();
        }
        int rc = publish_once(decided, members, (size_t)g_size);
        if (rc == 0) {
            have = 1;
            if (seen < g_size)
                say("contend: %d of %d ranks did not announce themselves within %.1f s "
                    "(started without the MPI wrapper, or a run directory of their own): "
                    "they are not compared with rank 0's clock\n",
                    g_size - seen, g_size, (double)wait / 1e9);
        } else if (rc == 1) {
            have = read_decision(decided, members);
        }
    } else {
        while (!(have = read_decision(decided, members)) && now_ns() - start < wait + JOIN_MARGIN_NS)
            join_sleep();
        if (!have) {
            memset(members, '0', (size_t)g_size);
            members[g_size] = 0;
            if (publish_once(decided, members, (size_t)g_size) == 1)
                (void)read_decision(decided, members);
            say("contend: rank %d saw no decision from rank 0 in %s within %.1f s (rank 0 "
                "without the MPI wrapper, or this host does not share the run directory): it "
                "records on its own, its clock aligned by CLOCK_REALTIME\n",
                g_rank, dir, (double)(wait + JOIN_MARGIN_NS) / 1e9);
            said = 1;
            have = 1;
        }
    }
    if (have && members[g_rank] == '1') {
        *out = members;
        return JOIN_MEMBER;
    }
    if (!said)
        say("contend: rank %d was not counted in by rank 0 (it announced itself after rank "
            "0's deadline): it records on its own, its clock aligned by CLOCK_REALTIME\n",
            g_rank);
    free(members);
    return JOIN_ALONE;
}

/* The members' private communicator. Returns MPI_SUCCESS or an error code. */
static int join_comm(const char *members)
{
    int n = 0;
    int *ranks = (int *)malloc(sizeof(int) * (size_t)g_size);
    if (!ranks)
        return MPI_ERR_NO_MEM;
    for (int r = 0; r < g_size; r++)
        if (members[r] == '1')
            ranks[n++] = r;
    MPI_Group world, mine;
    int rc = PMPI_Comm_group(MPI_COMM_WORLD, &world);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Group_incl(world, n, ranks, &mine);
        if (rc == MPI_SUCCESS) {
            rc = PMPI_Comm_create_group(MPI_COMM_WORLD, mine, 0, &g_sync_comm);
            PMPI_Group_free(&mine);
        }
        PMPI_Group_free(&world);
    }
    free(ranks);
    return rc;
}

/* After a successful PMPI_Init / PMPI_Init_thread: sets up and starts recording. The
 * agreement on who records is bounded (join()); the flusher thread starts first all the
 * same, and on rank 0 says after INIT_WAIT_HINT_NS if the members' communicator is still not
 * made (a member that stopped between its announcement and MPI_Comm_create_group). */
static void start(int fn, void *site, uint64_t t0, uint64_t t1, int rc, const char *library)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &g_size);
#if BUILT_FAMILY == 1
    {
        void *empty = dlsym(RTLD_DEFAULT, "ompi_request_empty");
        g_shared_req = (uint64_t)(uintptr_t)empty;
    }
#endif
    int flusher = start_flusher() == 0;
    if (g_rank == 0)
        __atomic_store_n(&g_init_wait, now_ns(), __ATOMIC_RELEASE);
    char *members = NULL;
    uint64_t joining = now_ns();
    g_alone = join(&members) == JOIN_ALONE;
    uint64_t joined = now_ns();
    /* A rank on its own has a communicator of itself, so that what follows is the same. */
    int dup = g_alone ? PMPI_Comm_dup(MPI_COMM_SELF, &g_sync_comm) : join_comm(members);
    free(members);
    __atomic_store_n(&g_init_wait, 0, __ATOMIC_RELEASE);
    if (dup != MPI_SUCCESS) {
        say("contend: cannot create the recording ranks' communicator; rank %d is not "
            "recorded\n",
            g_rank);
        __atomic_store_n(&g_flusher_stop, 1, __ATOMIC_RELEASE);
        switch_to_real(0);
        return;
    }
    PMPI_Comm_set_errhandler(g_sync_comm, MPI_ERRORS_RETURN);
    g_synced = 1;
    PMPI_Comm_group(MPI_COMM_WORLD, &g_world_group);
    g_have_keyval = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, comm_deleted, &g_keyval,
                                            NULL) == MPI_SUCCESS;
    /* One stream number for the whole job (the largest any rank needs), so that a second
     * job's streams in the same directory are told apart from the first's by their number
     * whatever the two jobs' sizes: rank-R.N.cst and maps/rank-R.N.maps. */
    int mine = first_free_suffix(), job = mine;
    if (PMPI_Allreduce(&mine, &job, 1, MPI_INT, MPI_MAX, g_sync_comm) != MPI_SUCCESS)
        job = mine;
    int opened = open_stream(t0, job) == 0;
    if (opened) {
        g_pid = getpid();
        pthread_mutex_lock(&g_lock);
        g_last_flush = t1;
        g_begin(2, t0, fn, site, NO_COMM);
        g_end(t1, fn, rc);
        char *w = (char *)malloc(8), *s = (char *)malloc(32);
        int *self = (int *)malloc(sizeof(int));
        if (w && s && self) {
            strcpy(w, "world");
            snprintf(s, 32, "self.%d", g_rank);
            *self = g_rank;
            define_comm(w, g_size, NULL, t1);
            define_comm(s, 1, self, t1);
        } else {
            free(w);
            free(s);
            free(self);
        }
        pthread_mutex_unlock(&g_lock);
    }
    clock_sync(0);
    if (opened) {
        char host[256 + 16] = "mpi.host=";
        gethostname(host + 9, sizeof host - 10);
        host[sizeof host - 1] = 0;
        sanitize(host);
        char lib[600];
        snprintf(lib, sizeof lib, "mpi.library=%s", library);
        sanitize(lib);
        /* How long the agreement kept this rank in MPI_Init (long only when a rank lacks the
         * wrapper or the shared run directory): the report says that waits just after
         * MPI_Init were the tool's. */
        char held[64];
        snprintf(held, sizeof held, "mpi.startup_wait_ns=%llu",
                 (unsigned long long)(joined - joining));
        uint64_t now = now_ns();
        pthread_mutex_lock(&g_lock);
        mark(now, host);
        mark(now, lib);
        mark(now, held);
        flush_locked(now);
        pthread_mutex_unlock(&g_lock);
        copy_maps();
        g_recording = 1;
        if (!flusher)
            (void)start_flusher();
    } else {
        __atomic_store_n(&g_flusher_stop, 1, __ATOMIC_RELEASE);
        switch_to_real(1);
    }
}

/* How to call the library's initialiser: `real` asks for the library's own entry point
 * (RTLD_NEXT) rather than PMPI_*, for a library this file was not compiled for. Returns the
 * MPI error code. The C and Fortran entry points each pass theirs. */
typedef int (*init_call)(void *ctx, int real);

/* MPI_Init, MPI_Init_thread and their Fortran bindings. */
static int init_common(init_call call, void *ctx, int fn, void *site)
{
    int err = errno;
    if (!g_want || g_started || tl_depth) {
        errno = err;
        return call(ctx, 0);
    }
    g_started = 1;
    tl_depth++;
    char library[512];
    library_line(library, sizeof library);
    if (!library_matches(library)) {
        /* Nothing compiled against this mpi.h may touch the loaded MPI: hand over. */
        sanitize(library);
        refuse(library);
        switch_to_real(0);
        tl_depth--;
        errno = err;
        return call(ctx, 1);
    }
    uint64_t t0 = now_ns();
    errno = err;
    int rc = call(ctx, 0);
    uint64_t t1 = now_ns();
    int e = errno;
    if (rc == MPI_SUCCESS)
        start(fn, site, t0, t1, rc, library);
    else
        switch_to_real(0);
    tl_depth--;
    errno = e;
    return rc;
}

typedef struct c_init_args {
    int *argc;
    char ***argv;
    int required; /* < 0 for MPI_Init */
    int *provided;
} c_init_args;

static int c_init_call(void *ctx, int real)
{
    c_init_args *a = (c_init_args *)ctx;
    if (a->required < 0)
        return real ? REAL(MPI_Init, int (*)(int *, char ***))(a->argc, a->argv)
                    : PMPI_Init(a->argc, a->argv);
    return real ? REAL(MPI_Init_thread, int (*)(int *, char ***, int, int *))(
                      a->argc, a->argv, a->required, a->provided)
                : PMPI_Init_thread(a->argc, a->argv, a->required, a->provided);
}

FN(MPI_Init)(int *argc, char ***argv)
{
    c_init_args a = {argc, argv, -1, NULL};
    return init_common(c_init_call, &a, FC_INIT, SITE());
}

FN(MPI_Init_thread)(int *argc, char ***argv, int required, int *provided)
{
    c_init_args a = {argc, argv, required, provided};
    return init_common(c_init_call, &a, FC_INIT_THREAD, SITE());
}

/* MPI_Finalize and its Fortran binding: the clock comparison, then the call, then the
 * stream's trailer. `call` calls the library's finaliser and returns its error code. */
static int finalize_common(int (*call)(void *ctx), void *ctx, void *site)
{
    int err = errno;
    if (!g_synced || tl_depth) {
        errno = err;
        return call(ctx);
    }
    tl_depth++;
    clock_sync(1);
    g_synced = 0;
    PMPI_Comm_free(&g_sync_comm);
    if (g_recording) {
        copy_maps();
        rlock();
        flush_locked(now_ns()); /* everything so far is on disk if PMPI_Finalize dies */
        runlock();
    }
    if (g_have_keyval) {
        PMPI_Comm_free_keyval(&g_keyval);
        g_have_keyval = 0;
    }
    PMPI_Group_free(&g_world_group);
    uint64_t t0 = now_ns();
    errno = err;
    int rc = call(ctx);
    uint64_t t1 = now_ns();
    int e = errno;
    if (g_recording) {
        rlock();
        g_begin(2, t0, FC_FINALIZE, site, NO_COMM);
        g_end(t1, FC_FINALIZE, rc);
        g_recording = 0;
        close_stream(t1);
        runlock();
        __atomic_store_n(&g_flusher_stop, 1, __ATOMIC_RELEASE);
    }
    switch_to_real(0);
    tl_depth--;
    errno = e;
    return rc;
}

static int c_finalize_call(void *ctx)
{
    (void)ctx;
    return PMPI_Finalize();
}

FN(MPI_Finalize)(void)
{
    if (ACTIVE())
        runs_thread_end();
    return finalize_common(c_finalize_call, NULL, SITE());
}

/* MPI_Abort: the mark and a flush, whatever the depth (a program's error handler calls
 * MPI_Abort from inside the library, during a call the wrapper is timing). The lock is only
 * tried, for up to 100 ms: this thread may hold it already (an error handler run by one of
 * the status queries the wrapper makes under it), and the abort must not wait for good. */
FN(MPI_Abort)(MPI_Comm comm, int errorcode)
{
    int err = errno;
    if (g_recording && g_pid == getpid()) {
        char label[64];
        snprintf(label, sizeof label, "mpi.abort=%d", errorcode);
        int locked = 0;
        for (int i = 0; i < 100 && !(locked = pthread_mutex_trylock(&g_lock) == 0); i++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        if (locked) {
            if (g_fd >= 0) {
                uint64_t now = now_ns();
                mark(now, label);
                flush_locked(now);
            }
            pthread_mutex_unlock(&g_lock);
        }
    }
    errno = err;
    return PMPI_Abort(comm, errorcode);
}

/* A rank that exits without MPI_Finalize: flush and write the trailer. Never in a forked
 * child (it does not own the stream); gives up rather than wait long for the lock. */
__attribute__((destructor)) static void contend_fini(void)
{
    int err = errno;
    if (g_fd >= 0 && g_pid == getpid()) {
        int locked = 0;
        for (int i = 0; i < 200 && !(locked = pthread_mutex_trylock(&g_lock) == 0); i++) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        if (locked) {
            runs_write_locked(now_ns());
            g_recording = 0;
            close_stream(now_ns());
            pthread_mutex_unlock(&g_lock);
        }
    }
    errno = err;
}

static void after_fork_child(void)
{
    /* The child does not own the stream: it records nothing and never writes the file. */
    g_recording = 0;
    g_synced = 0;
    g_fd = -1;
    switch_to_real(0);
}

/* A library of the other MPI family already mapped into this process (found by file name:
 * Open MPI's all come with libopen-pal, MPICH's are libmpich*), or NULL. */
static int find_other_mpi(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
#if BUILT_FAMILY == 1
    int other = strncmp(base, "libmpich", 8) == 0;
#elif BUILT_FAMILY == 2
    int other = strncmp(base, "libopen-pal", 11) == 0 || strncmp(base, "libmpi_mpifh", 12) == 0;
#else
    int other = 0;
#endif
    if (other) {
        *(const char **)data = name;
        return 1;
    }
    return 0;
}

/* The wrapper links the MPI it was compiled for. When the program's MPI is another one and
 * reached only through a second library (the Fortran bindings: libmpi_mpifh, libmpichfort),
 * the loader puts the wrapper's MPI first in the lookup order, so that library's PMPI_* calls
 * would go to the wrong MPI before any check at MPI_Init could run. Such a process is started
 * again (execve of itself: same pid, arguments and environment) without the wrapper in
 * LD_PRELOAD. Returns only if that is not needed or not possible. */
static void reexec_without_wrapper_if_mismatched(void)
{
    const char *other = NULL;
    dl_iterate_phdr(find_other_mpi, &other);
    if (!other || getenv("CONTEND_MPI_REEXECUTED"))
        return;
    Dl_info self;
    const char *preload = getenv("LD_PRELOAD");
    if (!preload || !dladdr((void *)reexec_without_wrapper_if_mismatched, &self) ||
        !self.dli_fname)
        return;
    const char *mine = strrchr(self.dli_fname, '/');
    mine = mine ? mine + 1 : self.dli_fname;
    /* LD_PRELOAD without this library (entries separated by spaces or colons). */
    size_t plen = strlen(preload);
    char *kept = (char *)malloc(plen + sizeof "LD_PRELOAD=" + 1);
    if (!kept)
        return;
    strcpy(kept, "LD_PRELOAD=");
    char *out = kept + strlen(kept);
    for (const char *p = preload; *p;) {
        size_t n = strcspn(p, " :");
        const char *b = p;
        for (const char *q = p; q < p + n; q++)
            if (*q == '/')
                b = q + 1;
        if (n > 0 && !((size_t)(p + n - b) == strlen(mine) && strncmp(b, mine, strlen(mine)) == 0)) {
            if (out != kept + strlen("LD_PRELOAD="))
                *out++ = ':';
            memcpy(out, p, n);
            out += n;
        }
        p += n;
        if (*p)
            p++;
    }
    *out = 0;
    /* argv from /proc/self/cmdline. */
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t cap = 1 << 16, len = 0;
    char *cmd = (char *)malloc(cap + 1);
    while (cmd) {
        ssize_t r = read(fd, cmd + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == cap) {
            char *n = (char *)realloc(cmd, cap * 2 + 1);
            if (!n) {
                free(cmd);
                cmd = NULL;
                break;
            }
            cmd = n;
            cap *= 2;
        }
    }
    close(fd);
    if (!cmd || len == 0)
        return;
    cmd[len] = 0;
    size_t argc = 0;
    for (size_t i = 0; i < len; i++)
        if (cmd[i] == 0)
            argc++;
    char **argv = (char **)calloc(argc + 1, sizeof *argv);
    extern char **environ;
    size_t envc = 0;
    while (environ[envc])
        envc++;
    char **envp = (char **)calloc(envc + 2, sizeof *envp);
    if (!argv || !envp)
        return;
    for (size_t i = 0, a = 0; i < len && a < argc; a++) {
        argv[a] = cmd + i;
        i += strlen(cmd + i) + 1;
    }
    size_t e = 0;
    for (size_t i = 0; i < envc; i++)
        envp[e++] = strncmp(environ[i], "LD_PRELOAD=", 11) == 0 ? kept : environ[i];
    envp[e++] = (char *)"CONTEND_MPI_REEXECUTED=1";
    envp[e] = NULL;
    char loaded[PATH_MAX + 64];
    snprintf(loaded, sizeof loaded, "%s (%s)",
             BUILT_FAMILY == 1 ? "MPICH" : BUILT_FAMILY == 2 ? "Open MPI" : "another MPI", other);
    if (g_want)
        refuse(loaded);
    else
        say("contend: the MPI wrapper was built for %s but this process loaded %s; starting it "
            "again without the wrapper\n",
            BUILT_FOR, loaded);
    execve("/proc/self/exe", argv, envp);
    /* Still here: carry on (the wrapper will pass calls through). */
}

__attribute__((constructor)) static void contend_start(void)
{
    int err = errno;
    resolve_reals();
    const char *dir = getenv("CONTEND_MPI_DIR");
    if (dir && *dir && strlen(dir) < sizeof g_dir) {
        g_want = 1;
        strcpy(g_dir, dir);
    }
    const char *runs = getenv("CONTEND_MPI_POLL_RUNS");
    g_poll_runs = !(runs && strcmp(runs, "0") == 0);
    reexec_without_wrapper_if_mismatched();
    if (g_want) {
        pthread_atfork(NULL, NULL, after_fork_child);
        g_have_scratch_key = pthread_key_create(&g_scratch_key, scratch_free) == 0;
    } else {
        switch_to_real(0);
    }
    errno = err;
}

/* ---------------------------------------------------------------- polling runs
 *
 * A program that polls (MPI_Test* or MPI_Iprobe / MPI_Improbe in a loop until the operation
 * completes or a message is there) makes millions of unsuccessful calls: hpcc's
 * MPIRandomAccess makes some 68 million MPI_Testany calls in 10 s. Each as its own group is
 * 48 bytes and two clock reads; the run directory grows by 200 MB/s and the job slows by
 * tens of percent. So, as Score-P leaves unsuccessful tests out of its traces unless asked
 * for them, but keeping what a wait-state analysis needs, a thread's consecutive
 * unsuccessful polls of the same kind at the same call site on the same requests (the same
 * source, tag and communicator for probes) are one *run*: the first poll's enter time, the
 * number of polls, and the time the run ended, written as one group (formats.md §2.4: the
 * function's code, `flag` 0 and `polls` N). A successful poll is recorded as before.
 *
 * Cost. Only the first poll of a run reads the clock (before the call, as every call does);
 * a poll that belongs to an open run reads none, takes no lock, allocates nothing and makes
 * no system call: a lookup in the thread's few open runs and a counter increment. The run's
 * end is the enter time of the call that ends it: the thread's next recorded call (any call
 * but an unsuccessful poll, which reads the clock anyway) or, when a poll of the run
 * succeeds, that poll's return (its own group then has enter = exit: the few tens of ns of
 * the successful poll itself are not timed). A thread keeps up to RUN_SLOTS runs open at
 * once (polling loops that alternate MPI_Test on one request and MPI_Testany on others);
 * a new run beyond that ends the oldest at its start.
 *
 * Where they are written: every recorded call of the thread writes its open runs first (at
 * its enter, before it calls the library, so that the requests and communicators they name
 * are still the ones polled), in the order the runs began; a successful poll writes them in
 * the same locked section as its own group, the run it ends last, right before it. A thread
 * that ends writes its runs (key destructor); MPI_Finalize and exit() write the calling
 * thread's. A rank killed during a run loses that run.
 *
 * CONTEND_MPI_POLL_RUNS=0 turns this off: every poll is its own group (for comparison). */
#define RUN_SLOTS 4
#define RUN_REQS 8 /* requests a run's group names (the first RUN_REQS of the array) */

typedef struct poll_run {
    uint64_t key;   /* the requests (their handles), or source, tag and communicator */
    uint64_t enter; /* the first poll's enter time */
    uint64_t polls;
    void *site;
    int fn;
    int source, tag; /* probes */
    int nreq;        /* requests kept in req (Test*) */
    MPI_Comm comm;   /* probes */
    MPI_Request req[RUN_REQS];
} poll_run;

static __thread poll_run tl_runs[RUN_SLOTS] TLS_IE; /* open runs, oldest first */
static __thread int tl_nruns TLS_IE;

static inline uint64_t key_mix(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* The key of a request array (count and handles). */
static inline uint64_t requests_key(int count, const MPI_Request *reqs)
{
    uint64_t h = key_mix(0, (uint64_t)(uint32_t)count);
    for (int i = 0; i < count; i++)
        h = key_mix(h, req_key(reqs[i]));
    return h;
}

static inline uint64_t probe_key(int source, int tag, MPI_Comm comm)
{
    return key_mix(key_mix(key_mix(1, (uint64_t)(uint32_t)source), (uint64_t)(uint32_t)tag),
                   comm_key(comm));
}

/* The thread's open run of this kind, site and key, or NULL. */
static inline poll_run *run_find(int fn, void *site, uint64_t key)
{
    for (int i = 0; i < tl_nruns; i++) {
        poll_run *r = &tl_runs[i];
        if (r->key == key && r->site == site && r->fn == fn)
            return r;
    }
    return NULL;
}

/* Under the lock: run `r`'s group, ending at `end`. */
static void g_run(const poll_run *r, uint64_t end)
{
    int probe = r->fn == FC_IPROBE || r->fn == FC_IMPROBE;
    uint32_t c = probe ? comm_id(r->comm, 1, r->enter) : NO_COMM;
    g_begin(4 + (unsigned)(probe ? 2 : r->nreq), r->enter, r->fn, r->site, c);
    if (probe) {
        g_arg_s(AC_SOURCE, to_world(c, r->source));
        g_arg_s(AC_RECV_TAG, tag_value(r->tag));
    } else {
        /* Every polled request is older than the next id (see rq_pick). */
        uint64_t mark = tl_mark;
        REQ_MARK();
        for (int i = 0; i < r->nreq; i++)
            if (r->req[i] != MPI_REQUEST_NULL)
                g_arg_u(AC_REQUEST_POLLED, request_id(r->req[i]));
        tl_mark = mark;
    }
    g_arg_u(AC_FLAG, 0);
    g_arg_u(AC_POLLS, r->polls);
    g_end(end > r->enter ? end : r->enter, r->fn, MPI_SUCCESS);
}

/* Under the lock: writes the thread's open runs, ended at `end`, `last` (one of them, or
 * NULL) last, and forgets them. */
static void g_runs(uint64_t end, const poll_run *last)
{
    for (int i = 0; i < tl_nruns; i++)
        if (&tl_runs[i] != last)
            g_run(&tl_runs[i], end);
    if (last)
        g_run(last, end);
    tl_nruns = 0;
}

/* Writes the thread's open runs, ended at `end`, in their own locked section. */
static void runs_close(uint64_t end)
{
    rlock();
    if (g_recording)
        g_runs(end, NULL);
    tl_nruns = 0;
    runlock();
}

/* Opens a run for a poll that began at `t0` and failed; ends the oldest open run when all
 * slots are taken. The thread's key destructor will write what is open when it ends. */
static poll_run *run_open(int fn, void *site, uint64_t key, uint64_t t0)
{
    if (tl_nruns == RUN_SLOTS) {
        rlock();
        if (g_recording)
            g_run(&tl_runs[0], t0);
        runlock();
        memmove(&tl_runs[0], &tl_runs[1], (RUN_SLOTS - 1) * sizeof tl_runs[0]);
        tl_nruns--;
    }
    if (!tl_scr.registered && g_have_scratch_key &&
        pthread_setspecific(g_scratch_key, &tl_scr) == 0)
        tl_scr.registered = 1;
    poll_run *r = &tl_runs[tl_nruns++];
    r->key = key;
    r->enter = t0;
    r->polls = 1;
    r->site = site;
    r->fn = fn;
    r->nreq = 0;
    return r;
}

/* Under the lock: the calling thread's open runs, ended at `end` (exit() without
 * MPI_Finalize). */
static void runs_write_locked(uint64_t end)
{
    g_runs(end, NULL);
}

/* The thread's open runs, written when it ends (or the process exits) without another call. */
static void runs_thread_end(void)
{
    if (tl_nruns && g_recording && g_pid == getpid())
        runs_close(now_ns());
    tl_nruns = 0;
}

/* A poll (Test*, Iprobe, Improbe) of kind `fn` whose run key is `keyexpr`: like
 * PASS_UNLESS_ACTIVE (the caller has checked ACTIVE()), but a poll that belongs to one of the
 * thread's open runs reads no clock (t0 is then 0 until POLL_UNSUCCESSFUL). */
#define POLL_CALL(fn, keyexpr, call)                                                           \
    void *site = SITE();                                                                       \
    int err_ = errno;                                                                          \
    tl_depth++;                                                                                \
    uint64_t key_ = g_poll_runs ? (keyexpr) : 0;                                               \
    poll_run *run_ = g_poll_runs && tl_nruns ? run_find(fn, site, key_) : NULL;                \
    uint64_t t0 = run_ ? 0 : now_ns();                                                         \
    errno = err_;                                                                              \
    int rc = call;                                                                             \
    err_ = errno;

/* After POLL_CALL: an unsuccessful poll (`failed`) is counted in its run, or opens one (`fill`
 * then completes the new run `r_`), and the wrapper returns. Otherwise the call is timed: t1
 * is its return and, when it ends a run, its enter too (see above). */
#define POLL_UNSUCCESSFUL(fn, failed, r_, fill)                                                \
    if (g_poll_runs && (failed)) {                                                             \
        if (run_) {                                                                            \
            run_->polls++;                                                                     \
        } else {                                                                               \
            poll_run *r_ = run_open(fn, site, key_, t0);                                       \
            fill;                                                                              \
        }                                                                                      \
        DONE();                                                                                \
    }                                                                                          \
    uint64_t t1 = now_ns();                                                                    \
    if (run_)                                                                                  \
        t0 = t1;

/* Fills run `r` with the first RUN_REQS requests of the copied array. */
static inline void run_requests(poll_run *r, int count, const MPI_Request *reqs)
{
    r->nreq = count < RUN_REQS ? count : RUN_REQS;
    if (r->nreq > 0)
        memcpy(r->req, reqs, (size_t)r->nreq * sizeof *reqs);
}

static inline void run_probe(poll_run *r, int source, int tag, MPI_Comm comm)
{
    r->source = source;
    r->tag = tag;
    r->comm = comm;
}

/* ---------------------------------------------------------------- the wrappers */

/* Every wrapper: pass through unless recording; else time the PMPI call, then write its group
 * in one locked section. errno is what the PMPI call left. Whatever a wrapper does before
 * this (copying request arrays) leaves errno as it was; arguments the program passes by
 * pointer are read before the call only when not NULL (the library rejects a NULL), and after
 * it only when it succeeded. */
#define PASS_UNLESS_ACTIVE(call)                                                               \
    if (!ACTIVE())                                                                             \
        return call;                                                                           \
    void *site = SITE();                                                                       \
    int err_ = errno;                                                                          \
    tl_depth++;                                                                                \
    uint64_t t0 = now_ns();                                                                    \
    if (tl_nruns) { /* the thread's polling runs end here (see above) */                      \
        runs_close(t0);                                                                        \
        t0 = now_ns();                                                                         \
    }                                                                                          \
    errno = err_;                                                                              \
    int rc = call;                                                                             \
    uint64_t t1 = now_ns();                                                                    \
    err_ = errno;

#define DONE()                                                                                 \
    tl_depth--;                                                                                \
    errno = err_;                                                                              \
    return rc;

/* Blocking sends. */
static void rec_send(int fn, void *site, uint64_t t0, uint64_t t1, int rc, int count,
                     MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    uint64_t bytes = rc == MPI_SUCCESS ? type_bytes(count, type) : 0;
    rlock();
    uint32_t c = comm_id(comm, rc == MPI_SUCCESS, t1);
    g_begin(5, t0, fn, site, c);
    g_arg_s(AC_DEST, to_world(c, dest));
    g_arg_s(AC_SEND_TAG, tag);
    g_arg_u(AC_BYTES_SENT, bytes);
    g_end(t1, fn, rc);
    runlock();
}

FN(MPI_Send)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Send(buf, count, type, dest, tag, comm));
    rec_send(FC_SEND, site, t0, t1, rc, count, type, dest, tag, comm);
    DONE();
}

FN(MPI_Ssend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Ssend(buf, count, type, dest, tag, comm));
    rec_send(FC_SSEND, site, t0, t1, rc, count, type, dest, tag, comm);
    DONE();
}

FN(MPI_Bsend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Bsend(buf, count, type, dest, tag, comm));
    rec_send(FC_BSEND, site, t0, t1, rc, count, type, dest, tag, comm);
    DONE();
}

FN(MPI_Rsend)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Rsend(buf, count, type, dest, tag, comm));
    rec_send(FC_RSEND, site, t0, t1, rc, count, type, dest, tag, comm);
    DONE();
}

/* Blocking receives and probes: source and tag as posted, then the status. */
static void rec_recv(int fn, void *site, uint64_t t0, uint64_t t1, int rc, int source, int tag,
                     MPI_Comm comm, const MPI_Status *st)
{
    rlock();
    uint32_t c = comm_id(comm, rc == MPI_SUCCESS, t1);
    g_begin(7, t0, fn, site, c);
    g_arg_s(AC_SOURCE, to_world(c, source));
    g_arg_s(AC_RECV_TAG, tag_value(tag));
    if (rc == MPI_SUCCESS)
        g_status(st, c, source == MPI_PROC_NULL);
    g_end(t1, fn, rc);
    runlock();
}

FN(MPI_Recv)(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    PASS_UNLESS_ACTIVE(PMPI_Recv(buf, count, type, source, tag, comm, st));
    rec_recv(FC_RECV, site, t0, t1, rc, source, tag, comm, st);
    DONE();
}

static void rec_sendrecv(int fn, void *site, uint64_t t0, uint64_t t1, int rc, int scount,
                         MPI_Datatype stype, int dest, int stag, int source, int rtag,
                         MPI_Comm comm, const MPI_Status *st)
{
    uint64_t bytes = rc == MPI_SUCCESS ? type_bytes(scount, stype) : 0;
    rlock();
    uint32_t c = comm_id(comm, rc == MPI_SUCCESS, t1);
    g_begin(10, t0, fn, site, c);
    g_arg_s(AC_DEST, to_world(c, dest));
    g_arg_s(AC_SEND_TAG, stag);
    g_arg_u(AC_BYTES_SENT, bytes);
    g_arg_s(AC_SOURCE, to_world(c, source));
    g_arg_s(AC_RECV_TAG, tag_value(rtag));
    if (rc == MPI_SUCCESS)
        g_status(st, c, source == MPI_PROC_NULL);
    g_end(t1, fn, rc);
    runlock();
}

FN(MPI_Sendrecv)(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                 void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
                 MPI_Comm comm, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    PASS_UNLESS_ACTIVE(PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype,
                                     source, rtag, comm, st));
    rec_sendrecv(FC_SENDRECV, site, t0, t1, rc, scount, stype, dest, stag, source, rtag, comm, st);
    DONE();
}

FN(MPI_Sendrecv_replace)(void *buf, int count, MPI_Datatype type, int dest, int stag,
                         int source, int rtag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    PASS_UNLESS_ACTIVE(PMPI_Sendrecv_replace(buf, count, type, dest, stag, source, rtag, comm,
                                             st));
    rec_sendrecv(FC_SENDRECV_REPLACE, site, t0, t1, rc, count, type, dest, stag, source, rtag,
                 comm, st);
    DONE();
}

/* Nonblocking and persistent sends: destination, tag, bytes, request created. */
static void rec_isend(int fn, void *site, uint64_t t0, uint64_t t1, int rc, int count,
                      MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req,
                      unsigned flags)
{
    uint64_t bytes = rc == MPI_SUCCESS ? type_bytes(count, type) : 0;
    rlock();
    uint32_t c = comm_id(comm, rc == MPI_SUCCESS, t1);
    g_begin(6, t0, fn, site, c);
    g_arg_s(AC_DEST, to_world(c, dest));
    g_arg_s(AC_SEND_TAG, tag);
    g_arg_u(AC_BYTES_SENT, bytes);
    if (rc == MPI_SUCCESS && req && *req != MPI_REQUEST_NULL)
        g_arg_u(AC_REQUEST_CREATED, new_request(*req, flags, c));
    g_end(t1, fn, rc);
    runlock();
}

#define ISEND_LIKE(name, fn, flags)                                                            \
    FN(name)(const void *buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm,  \
             MPI_Request *req)                                                                 \
    {                                                                                          \
        PASS_UNLESS_ACTIVE(P##name(buf, count, type, dest, tag, comm, req));                   \
        rec_isend(fn, site, t0, t1, rc, count, type, dest, tag, comm, req, flags);             \
        DONE();                                                                                \
    }

ISEND_LIKE(MPI_Isend, FC_ISEND, 0)
ISEND_LIKE(MPI_Issend, FC_ISSEND, 0)
ISEND_LIKE(MPI_Ibsend, FC_IBSEND, 0)
ISEND_LIKE(MPI_Irsend, FC_IRSEND, 0)
ISEND_LIKE(MPI_Send_init, FC_SEND_INIT, RQ_PERSISTENT)
ISEND_LIKE(MPI_Ssend_init, FC_SSEND_INIT, RQ_PERSISTENT)
ISEND_LIKE(MPI_Bsend_init, FC_BSEND_INIT, RQ_PERSISTENT)
ISEND_LIKE(MPI_Rsend_init, FC_RSEND_INIT, RQ_PERSISTENT)

static void rec_irecv(int fn, void *site, uint64_t t0, uint64_t t1, int rc, int source, int tag,
                      MPI_Comm comm, MPI_Request *req, unsigned flags)
{
    rlock();
    uint32_t c = comm_id(comm, rc == MPI_SUCCESS, t1);
    g_begin(5, t0, fn, site, c);
    g_arg_s(AC_SOURCE, to_world(c, source));
    g_arg_s(AC_RECV_TAG, tag_value(tag));
    if (source == MPI_PROC_NULL)
        flags |= RQ_PROC_NULL;
    if (rc == MPI_SUCCESS && req && *req != MPI_REQUEST_NULL)
        g_arg_u(AC_REQUEST_CREATED, new_request(*req, flags | RQ_RECV, c));
    g_end(t1, fn, rc);
    runlock();
}

FN(MPI_Irecv)(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *req)
{
    PASS_UNLESS_ACTIVE(PMPI_Irecv(buf, count, type, source, tag, comm, req));
    rec_irecv(FC_IRECV, site, t0, t1, rc, source, tag, comm, req, 0);
    DONE();
}

FN(MPI_Recv_init)(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                  MPI_Request *req)
{
    PASS_UNLESS_ACTIVE(PMPI_Recv_init(buf, count, type, source, tag, comm, req));
    rec_irecv(FC_RECV_INIT, site, t0, t1, rc, source, tag, comm, req, RQ_PERSISTENT);
    DONE();
}

FN(MPI_Start)(MPI_Request *req)
{
    MPI_Request before = req ? *req : MPI_REQUEST_NULL;
    PASS_UNLESS_ACTIVE(PMPI_Start(req));
    rlock();
    g_begin(3, t0, FC_START, site, NO_COMM);
    cst_map_entry *e = cst_map_get(&g_req_map, req_key(before));
    if (e && (e->flags & RQ_QUEUE))
        e = NULL; /* not a persistent request */
    g_arg_u(AC_REQUEST_STARTED, e ? e->val : 0);
    if (e && rc == MPI_SUCCESS)
        e->flags |= RQ_ACTIVE;
    g_end(t1, FC_START, rc);
    runlock();
    DONE();
}

FN(MPI_Startall)(int count, MPI_Request reqs[])
{
    PASS_UNLESS_ACTIVE(PMPI_Startall(count, reqs));
    if (!reqs)
        count = 0;
    rlock();
    g_begin(2 + (unsigned)(count > 0 ? count : 0), t0, FC_STARTALL, site, NO_COMM);
    for (int i = 0; i < count; i++) {
        cst_map_entry *e = cst_map_get(&g_req_map, req_key(reqs[i]));
        if (e && (e->flags & RQ_QUEUE))
            e = NULL;
        g_arg_u(AC_REQUEST_STARTED, e ? e->val : 0);
        if (e && rc == MPI_SUCCESS)
            e->flags |= RQ_ACTIVE;
    }
    g_end(t1, FC_STARTALL, rc);
    runlock();
    DONE();
}

FN(MPI_Request_free)(MPI_Request *req)
{
    MPI_Request before = req ? *req : MPI_REQUEST_NULL;
    REQ_MARK();
    PASS_UNLESS_ACTIVE(PMPI_Request_free(req));
    rlock();
    g_begin(3, t0, FC_REQUEST_FREE, site, NO_COMM);
    g_arg_u(AC_REQUEST_FREED, request_id(before));
    if (rc == MPI_SUCCESS)
        request_freed(before);
    g_end(t1, FC_REQUEST_FREE, rc);
    runlock();
    DONE();
}

FN(MPI_Cancel)(MPI_Request *req)
{
    MPI_Request before = req ? *req : MPI_REQUEST_NULL;
    REQ_MARK();
    PASS_UNLESS_ACTIVE(PMPI_Cancel(req));
    rlock();
    g_begin(3, t0, FC_CANCEL, site, NO_COMM);
    g_arg_u(AC_REQUEST_CANCELLED, request_id(before));
    g_end(t1, FC_CANCEL, rc);
    runlock();
    DONE();
}

/* ---- completion: Wait*, Test*
 *
 * A request completed by a successful call is written 9 and, for a receive, its status (or
 * 13 when cancelled). A failed call writes the requests it completed anyway (so the table
 * forgets them) with no status: with MPI_ERR_IN_STATUS (Waitall, Waitsome, Testall,
 * Testsome) those whose status's MPI_ERROR is not MPI_ERR_PENDING, the status only where
 * MPI_ERROR is MPI_SUCCESS; with any other error those whose handle the library set to
 * MPI_REQUEST_NULL. */

FN(MPI_Wait)(MPI_Request *req, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    MPI_Request before = req ? *req : MPI_REQUEST_NULL;
    REQ_MARK();
    PASS_UNLESS_ACTIVE(PMPI_Wait(req, st));
    rlock();
    g_begin(7, t0, FC_WAIT, site, NO_COMM);
    if (before != MPI_REQUEST_NULL && (rc == MPI_SUCCESS || *req == MPI_REQUEST_NULL))
        g_completion(before, st, rc == MPI_SUCCESS);
    g_end(t1, FC_WAIT, rc);
    runlock();
    DONE();
}

FN(MPI_Test)(MPI_Request *req, int *flag, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    MPI_Request before = req ? *req : MPI_REQUEST_NULL;
    REQ_MARK();
    if (!ACTIVE())
        return PMPI_Test(req, flag, status);
    POLL_CALL(FC_TEST, req_key(before), PMPI_Test(req, flag, st));
    int f = rc == MPI_SUCCESS && flag && *flag;
    POLL_UNSUCCESSFUL(FC_TEST, rc == MPI_SUCCESS && flag && !f, r, run_requests(r, 1, &before));
    rlock();
    g_runs(t0, run_);
    g_begin(8, t0, FC_TEST, site, NO_COMM);
    if (before != MPI_REQUEST_NULL && (f || (rc != MPI_SUCCESS && *req == MPI_REQUEST_NULL)))
        g_completion(before, st, rc == MPI_SUCCESS);
    g_arg_u(AC_FLAG, f ? 1 : 0);
    g_end(t1, FC_TEST, rc);
    runlock();
    DONE();
}

/* Copies the request array and picks the status array (the program's or the scratch one);
 * NULL when the scratch cannot grow or the arrays are not there (the call then goes
 * unrecorded). Leaves errno as it was. */
static MPI_Status *prepare_many(int count, MPI_Request reqs[], MPI_Status *statuses)
{
    if (count < 0 || (count > 0 && !reqs) || scratch_reserve((size_t)count + 1) != 0)
        return NULL;
    if (count > 0)
        memcpy(tl_scr.req, reqs, (size_t)count * sizeof *reqs);
    return statuses == MPI_STATUSES_IGNORE ? tl_scr.st : statuses;
}

/* Under the lock, inside a group: the completions of a failed call that did not return
 * MPI_ERR_IN_STATUS: the requests whose handle became MPI_REQUEST_NULL (`after` is the
 * program's array after the call; NULL when it cannot be read). */
static void g_failed_completions(int count, const MPI_Request *after)
{
    for (int i = 0; i < count && after; i++)
        if (tl_scr.req[i] != MPI_REQUEST_NULL && after[i] == MPI_REQUEST_NULL)
            g_completion(tl_scr.req[i], NULL, 0);
}

static void rec_all(int fn, void *site, uint64_t t0, uint64_t t1, int rc, int count,
                    const MPI_Status *st, const MPI_Request *after, int have_flag, int flag,
                    const poll_run *run)
{
    rlock();
    g_runs(t0, run);
    g_begin(3 + 5 * (unsigned)count, t0, fn, site, NO_COMM);
    if (rc == MPI_SUCCESS && (!have_flag || flag)) {
        for (int i = 0; i < count; i++)
            if (tl_scr.req[i] != MPI_REQUEST_NULL)
                g_completion(tl_scr.req[i], &st[i], 1);
    } else if (rc == MPI_ERR_IN_STATUS) {
        for (int i = 0; i < count; i++)
            if (tl_scr.req[i] != MPI_REQUEST_NULL && st[i].MPI_ERROR != MPI_ERR_PENDING)
                g_completion(tl_scr.req[i], &st[i], st[i].MPI_ERROR == MPI_SUCCESS);
    } else if (rc != MPI_SUCCESS) {
        g_failed_completions(count, after);
    }
    if (have_flag)
        g_arg_u(AC_FLAG, rc == MPI_SUCCESS && flag ? 1 : 0);
    g_end(t1, fn, rc);
    runlock();
}

FN(MPI_Waitall)(int count, MPI_Request reqs[], MPI_Status statuses[])
{
    MPI_Status *st = ACTIVE() ? prepare_many(count, reqs, statuses) : NULL;
    if (!st)
        return PMPI_Waitall(count, reqs, statuses);
    REQ_MARK();
    PASS_UNLESS_ACTIVE(PMPI_Waitall(count, reqs, st));
    rec_all(FC_WAITALL, site, t0, t1, rc, count, st, reqs, 0, 0, NULL);
    DONE();
}

FN(MPI_Testall)(int count, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    MPI_Status *st = ACTIVE() ? prepare_many(count, reqs, statuses) : NULL;
    if (!st)
        return PMPI_Testall(count, reqs, flag, statuses);
    REQ_MARK();
    POLL_CALL(FC_TESTALL, requests_key(count, tl_scr.req), PMPI_Testall(count, reqs, flag, st));
    POLL_UNSUCCESSFUL(FC_TESTALL, rc == MPI_SUCCESS && flag && !*flag, r,
                      run_requests(r, count, tl_scr.req));
    rec_all(FC_TESTALL, site, t0, t1, rc, count, st, reqs, 1,
            rc == MPI_SUCCESS && flag && *flag, run_);
    DONE();
}

/* Waitany, Testany: `index` is the index the call returned (read only after success). */
static void rec_any(int fn, void *site, uint64_t t0, uint64_t t1, int rc, int count,
                    int index, const MPI_Status *st, const MPI_Request *after, int have_flag,
                    int flag, const poll_run *run)
{
    rlock();
    g_runs(t0, run);
    g_begin(8, t0, fn, site, NO_COMM);
    if (rc == MPI_SUCCESS) {
        if ((!have_flag || flag) && index >= 0 && index < count &&
            tl_scr.req[index] != MPI_REQUEST_NULL)
            g_completion(tl_scr.req[index], st, 1);
    } else {
        g_failed_completions(count, after);
    }
    if (have_flag)
        g_arg_u(AC_FLAG, rc == MPI_SUCCESS && flag ? 1 : 0);
    g_end(t1, fn, rc);
    runlock();
}

FN(MPI_Waitany)(int count, MPI_Request reqs[], int *index, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    if (!ACTIVE() || !prepare_many(count, reqs, MPI_STATUSES_IGNORE))
        return PMPI_Waitany(count, reqs, index, status);
    REQ_MARK();
    PASS_UNLESS_ACTIVE(PMPI_Waitany(count, reqs, index, st));
    rec_any(FC_WAITANY, site, t0, t1, rc, count,
            rc == MPI_SUCCESS && index ? *index : MPI_UNDEFINED, st, reqs, 0, 0, NULL);
    DONE();
}

FN(MPI_Testany)(int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    /* A poll of one of the thread's open runs (few requests): the run holds the requests as
     * they were when it opened, so the array is not copied per poll (hpcc polls one request
     * tens of millions of times); a poll that ends the run takes them from it. */
    if (ACTIVE() && g_poll_runs && tl_nruns && count > 0 && count <= RUN_REQS && reqs) {
        void *site = SITE();
        poll_run *run_ = run_find(FC_TESTANY, site, requests_key(count, reqs));
        if (run_ && run_->nreq == count) {
            int err_ = errno;
            tl_depth++;
            REQ_MARK();
            errno = err_;
            int rc = PMPI_Testany(count, reqs, index, flag, st);
            err_ = errno;
            int ok = rc == MPI_SUCCESS && index && flag;
            if (ok && !*flag) {
                run_->polls++;
                DONE();
            }
            memcpy(tl_scr.req, run_->req, (size_t)count * sizeof *reqs);
            uint64_t t1 = now_ns();
            rec_any(FC_TESTANY, site, t1, t1, rc, count, ok ? *index : MPI_UNDEFINED, st, reqs,
                    1, ok && *flag, run_);
            DONE();
        }
    }
    if (!ACTIVE() || !prepare_many(count, reqs, MPI_STATUSES_IGNORE))
        return PMPI_Testany(count, reqs, index, flag, status);
    REQ_MARK();
    POLL_CALL(FC_TESTANY, requests_key(count, tl_scr.req),
              PMPI_Testany(count, reqs, index, flag, st));
    int ok = rc == MPI_SUCCESS && index && flag;
    POLL_UNSUCCESSFUL(FC_TESTANY, ok && !*flag, r, run_requests(r, count, tl_scr.req));
    rec_any(FC_TESTANY, site, t0, t1, rc, count, ok ? *index : MPI_UNDEFINED, st, reqs, 1,
            ok && *flag, run_);
    DONE();
}

static void rec_some(int fn, void *site, uint64_t t0, uint64_t t1, int rc, int count,
                     int outcount, const int *indices, const MPI_Status *st,
                     const MPI_Request *after, const poll_run *run)
{
    rlock();
    g_runs(t0, run);
    g_begin(2 + 5 * (unsigned)count, t0, fn, site, NO_COMM);
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && outcount != MPI_UNDEFINED) {
        for (int k = 0; k < outcount && k < count; k++) {
            int i = indices[k];
            if (i < 0 || i >= count || tl_scr.req[i] == MPI_REQUEST_NULL)
                continue;
            int ok = rc == MPI_SUCCESS || st[k].MPI_ERROR == MPI_SUCCESS;
            if (!ok && st[k].MPI_ERROR == MPI_ERR_PENDING)
                continue;
            g_completion(tl_scr.req[i], &st[k], ok);
        }
    } else if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
        g_failed_completions(count, after);
    }
    g_end(t1, fn, rc);
    runlock();
}

FN(MPI_Waitsome)(int count, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    MPI_Status *st = ACTIVE() ? prepare_many(count, reqs, statuses) : NULL;
    if (!st)
        return PMPI_Waitsome(count, reqs, outcount, indices, statuses);
    REQ_MARK();
    PASS_UNLESS_ACTIVE(PMPI_Waitsome(count, reqs, outcount, indices, st));
    int ok = (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && outcount && indices;
    rec_some(FC_WAITSOME, site, t0, t1, rc, count, ok ? *outcount : MPI_UNDEFINED, indices,
             st, reqs, NULL);
    DONE();
}

FN(MPI_Testsome)(int count, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status statuses[])
{
    MPI_Status *st = ACTIVE() ? prepare_many(count, reqs, statuses) : NULL;
    if (!st)
        return PMPI_Testsome(count, reqs, outcount, indices, statuses);
    REQ_MARK();
    POLL_CALL(FC_TESTSOME, requests_key(count, tl_scr.req),
              PMPI_Testsome(count, reqs, outcount, indices, st));
    int ok = (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && outcount && indices;
    POLL_UNSUCCESSFUL(FC_TESTSOME, rc == MPI_SUCCESS && ok && *outcount == 0, r,
                      run_requests(r, count, tl_scr.req));
    rec_some(FC_TESTSOME, site, t0, t1, rc, count, ok ? *outcount : MPI_UNDEFINED, indices,
             st, reqs, run_);
    DONE();
}

/* ---- probes and matched receives */

static uint64_t new_message(MPI_Message m, uint32_t comm)
{
    if (m == MPI_MESSAGE_NULL || m == MPI_MESSAGE_NO_PROC)
        return 0;
    uint64_t id = g_next_msg++;
    uint64_t key = msg_key(m);
    cst_map_entry *e = cst_map_get(&g_msg_map, key);
    if (e) /* a message the wrapper did not see received */
        comm_unref(e->aux);
    if (cst_map_put(&g_msg_map, key, id, comm))
        comm_ref(comm);
    return id;
}

FN(MPI_Probe)(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    PASS_UNLESS_ACTIVE(PMPI_Probe(source, tag, comm, st));
    rec_recv(FC_PROBE, site, t0, t1, rc, source, tag, comm, st);
    DONE();
}

FN(MPI_Iprobe)(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    if (!ACTIVE())
        return PMPI_Iprobe(source, tag, comm, flag, status);
    POLL_CALL(FC_IPROBE, probe_key(source, tag, comm), PMPI_Iprobe(source, tag, comm, flag, st));
    POLL_UNSUCCESSFUL(FC_IPROBE, rc == MPI_SUCCESS && flag && !*flag, r,
                      run_probe(r, source, tag, comm));
    rlock();
    g_runs(t0, run_);
    uint32_t c = comm_id(comm, rc == MPI_SUCCESS, t1);
    g_begin(8, t0, FC_IPROBE, site, c);
    g_arg_s(AC_SOURCE, to_world(c, source));
    g_arg_s(AC_RECV_TAG, tag_value(tag));
    int f = rc == MPI_SUCCESS && flag && *flag;
    if (f)
        g_status(st, c, source == MPI_PROC_NULL);
    g_arg_u(AC_FLAG, f ? 1 : 0);
    g_end(t1, FC_IPROBE, rc);
    runlock();
    DONE();
}

FN(MPI_Mprobe)(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    PASS_UNLESS_ACTIVE(PMPI_Mprobe(source, tag, comm, message, st));
    rlock();
    uint32_t c = comm_id(comm, rc == MPI_SUCCESS, t1);
    g_begin(8, t0, FC_MPROBE, site, c);
    g_arg_s(AC_SOURCE, to_world(c, source));
    g_arg_s(AC_RECV_TAG, tag_value(tag));
    if (rc == MPI_SUCCESS) {
        g_status(st, c, source == MPI_PROC_NULL);
        g_arg_u(AC_MESSAGE, message ? new_message(*message, c) : 0);
    }
    g_end(t1, FC_MPROBE, rc);
    runlock();
    DONE();
}

FN(MPI_Improbe)(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    if (!ACTIVE())
        return PMPI_Improbe(source, tag, comm, flag, message, status);
    POLL_CALL(FC_IMPROBE, probe_key(source, tag, comm),
              PMPI_Improbe(source, tag, comm, flag, message, st));
    POLL_UNSUCCESSFUL(FC_IMPROBE, rc == MPI_SUCCESS && flag && !*flag, r,
                      run_probe(r, source, tag, comm));
    rlock();
    g_runs(t0, run_);
    uint32_t c = comm_id(comm, rc == MPI_SUCCESS, t1);
    g_begin(9, t0, FC_IMPROBE, site, c);
    g_arg_s(AC_SOURCE, to_world(c, source));
    g_arg_s(AC_RECV_TAG, tag_value(tag));
    int f = rc == MPI_SUCCESS && flag && *flag;
    if (f)
        g_status(st, c, source == MPI_PROC_NULL);
    g_arg_u(AC_FLAG, f ? 1 : 0);
    if (f)
        g_arg_u(AC_MESSAGE, message ? new_message(*message, c) : 0);
    g_end(t1, FC_IMPROBE, rc);
    runlock();
    DONE();
}

/* Under the lock: a message's id and communicator, forgetting it when `take` (Mrecv /
 * Imrecv use it up, unless they fail and leave the handle). The caller unrefs the
 * communicator once it has used it (when taken). */
static uint64_t find_message(MPI_Message m, uint32_t *comm, int take)
{
    cst_map_entry *e = cst_map_get(&g_msg_map, msg_key(m));
    *comm = NO_COMM;
    if (!e)
        return 0;
    uint64_t id = e->val;
    *comm = e->aux;
    if (take)
        cst_map_del(&g_msg_map, msg_key(m));
    return id;
}

FN(MPI_Mrecv)(void *buf, int count, MPI_Datatype type, MPI_Message *message,
              MPI_Status *status)
{
    MPI_Status own;
    MPI_Status *st = status == MPI_STATUS_IGNORE ? &own : status;
    MPI_Message before = message ? *message : MPI_MESSAGE_NULL;
    PASS_UNLESS_ACTIVE(PMPI_Mrecv(buf, count, type, message, st));
    int taken = rc == MPI_SUCCESS || (message && *message == MPI_MESSAGE_NULL);
    rlock();
    uint32_t c;
    uint64_t id = find_message(before, &c, taken);
    g_begin(6, t0, FC_MRECV, site, NO_COMM);
    if (rc == MPI_SUCCESS)
        g_status(st, c, before == MPI_MESSAGE_NO_PROC);
    g_arg_u(AC_MESSAGE, id);
    g_end(t1, FC_MRECV, rc);
    if (taken)
        comm_unref(c);
    runlock();
    DONE();
}

FN(MPI_Imrecv)(void *buf, int count, MPI_Datatype type, MPI_Message *message,
               MPI_Request *req)
{
    MPI_Message before = message ? *message : MPI_MESSAGE_NULL;
    PASS_UNLESS_ACTIVE(PMPI_Imrecv(buf, count, type, message, req));
    int taken = rc == MPI_SUCCESS || (message && *message == MPI_MESSAGE_NULL);
    rlock();
    uint32_t c;
    uint64_t id = find_message(before, &c, taken);
    g_begin(4, t0, FC_IMRECV, site, NO_COMM);
    unsigned flags = RQ_RECV | (before == MPI_MESSAGE_NO_PROC ? RQ_PROC_NULL : 0u);
    if (rc == MPI_SUCCESS && req && *req != MPI_REQUEST_NULL)
        g_arg_u(AC_REQUEST_CREATED, new_request(*req, flags, c));
    g_arg_u(AC_MESSAGE, id);
    g_end(t1, FC_IMRECV, rc);
    if (taken)
        comm_unref(c);
    runlock();
    DONE();
}

/* ---- collectives: `bytes sent` (3) is what this rank's send buffer holds for the call (see
 * the table in the report / formats.md); `root` (6) the root's world rank. */

static void rec_coll(int fn, void *site, uint64_t t0, uint64_t t1, int rc, MPI_Comm comm,
                     int has_bytes, uint64_t bytes, int has_root, int root)
{
    rlock();
    uint32_t c = comm_id(comm, rc == MPI_SUCCESS, t1);
    g_begin(4, t0, fn, site, c);
    if (has_bytes)
        g_arg_u(AC_BYTES_SENT, rc == MPI_SUCCESS ? bytes : 0);
    if (has_root)
        g_arg_s(AC_ROOT, to_world(c, root));
    g_end(t1, fn, rc);
    runlock();
}

static uint64_t sum_counts(const int *counts, int n, MPI_Datatype type)
{
    uint64_t total = 0;
    for (int i = 0; i < n && counts; i++)
        total = sat_add(total, type_bytes(counts[i], type));
    return total;
}

FN(MPI_Barrier)(MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Barrier(comm));
    rec_coll(FC_BARRIER, site, t0, t1, rc, comm, 0, 0, 0, 0);
    DONE();
}

FN(MPI_Bcast)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Bcast(buf, count, type, root, comm));
    /* An intercommunicator's root group passes MPI_PROC_NULL on its other ranks, whose
     * buffer arguments are not significant. */
    uint64_t b = rc == MPI_SUCCESS && root != MPI_PROC_NULL ? type_bytes(count, type) : 0;
    rec_coll(FC_BCAST, site, t0, t1, rc, comm, 1, b, 1, root);
    DONE();
}

FN(MPI_Scatter)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                MPI_Datatype rtype, int root, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Scatter(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS) {
        int me, n = comm_shape(comm, &me);
        if (me < 0 ? root == MPI_ROOT : root == me)
            b = type_bytes((long long)scount * n, stype);
        else if (me >= 0 || root != MPI_PROC_NULL)
            b = type_bytes(rcount, rtype);
    }
    rec_coll(FC_SCATTER, site, t0, t1, rc, comm, 1, b, 1, root);
    DONE();
}

FN(MPI_Scatterv)(const void *sbuf, const int scounts[], const int displs[], MPI_Datatype stype,
                 void *rbuf, int rcount, MPI_Datatype rtype, int root, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(
        PMPI_Scatterv(sbuf, scounts, displs, stype, rbuf, rcount, rtype, root, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS) {
        int me, n = comm_shape(comm, &me);
        if (me < 0 ? root == MPI_ROOT : root == me)
            b = sum_counts(scounts, n, stype);
        else if (me >= 0 || root != MPI_PROC_NULL)
            b = type_bytes(rcount, rtype);
    }
    rec_coll(FC_SCATTERV, site, t0, t1, rc, comm, 1, b, 1, root);
    DONE();
}

FN(MPI_Gather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
               MPI_Datatype rtype, int root, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Gather(sbuf, scount, stype, rbuf, rcount, rtype, root, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS) {
        if (sbuf == MPI_IN_PLACE)
            b = type_bytes(rcount, rtype);
        else if (root != MPI_ROOT && root != MPI_PROC_NULL)
            b = type_bytes(scount, stype);
    }
    rec_coll(FC_GATHER, site, t0, t1, rc, comm, 1, b, 1, root);
    DONE();
}

FN(MPI_Gatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                const int rcounts[], const int displs[], MPI_Datatype rtype, int root,
                MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(
        PMPI_Gatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, root, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS) {
        if (sbuf == MPI_IN_PLACE) {
            int me;
            (void)comm_shape(comm, &me);
            b = me >= 0 && rcounts ? type_bytes(rcounts[me], rtype) : 0;
        } else if (root != MPI_ROOT && root != MPI_PROC_NULL) {
            b = type_bytes(scount, stype);
        }
    }
    rec_coll(FC_GATHERV, site, t0, t1, rc, comm, 1, b, 1, root);
    DONE();
}

FN(MPI_Reduce)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Reduce(sbuf, rbuf, count, type, op, root, comm));
    uint64_t b = rc == MPI_SUCCESS && root != MPI_ROOT && root != MPI_PROC_NULL
                     ? type_bytes(count, type)
                     : 0;
    rec_coll(FC_REDUCE, site, t0, t1, rc, comm, 1, b, 1, root);
    DONE();
}

#define COUNT_COLL(name, fn)                                                                   \
    FN(name)(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,           \
             MPI_Comm comm)                                                                    \
    {                                                                                          \
        PASS_UNLESS_ACTIVE(P##name(sbuf, rbuf, count, type, op, comm));                        \
        uint64_t b = rc == MPI_SUCCESS ? type_bytes(count, type) : 0;                          \
        rec_coll(fn, site, t0, t1, rc, comm, 1, b, 0, 0);                                      \
        DONE();                                                                                \
    }

COUNT_COLL(MPI_Allreduce, FC_ALLREDUCE)
COUNT_COLL(MPI_Scan, FC_SCAN)
COUNT_COLL(MPI_Exscan, FC_EXSCAN)

FN(MPI_Allgather)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                  MPI_Datatype rtype, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Allgather(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS)
        b = sbuf == MPI_IN_PLACE ? type_bytes(rcount, rtype) : type_bytes(scount, stype);
    rec_coll(FC_ALLGATHER, site, t0, t1, rc, comm, 1, b, 0, 0);
    DONE();
}

FN(MPI_Allgatherv)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf,
                   const int rcounts[], const int displs[], MPI_Datatype rtype, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Allgatherv(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS) {
        if (sbuf == MPI_IN_PLACE) {
            int me;
            (void)comm_shape(comm, &me);
            b = me >= 0 && rcounts ? type_bytes(rcounts[me], rtype) : 0;
        } else {
            b = type_bytes(scount, stype);
        }
    }
    rec_coll(FC_ALLGATHERV, site, t0, t1, rc, comm, 1, b, 0, 0);
    DONE();
}

FN(MPI_Alltoall)(const void *sbuf, int scount, MPI_Datatype stype, void *rbuf, int rcount,
                 MPI_Datatype rtype, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Alltoall(sbuf, scount, stype, rbuf, rcount, rtype, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS) {
        int me, n = comm_shape(comm, &me);
        b = sbuf == MPI_IN_PLACE ? type_bytes((long long)rcount * n, rtype)
                                 : type_bytes((long long)scount * n, stype);
    }
    rec_coll(FC_ALLTOALL, site, t0, t1, rc, comm, 1, b, 0, 0);
    DONE();
}

FN(MPI_Alltoallv)(const void *sbuf, const int scounts[], const int sdispls[],
                  MPI_Datatype stype, void *rbuf, const int rcounts[], const int rdispls[],
                  MPI_Datatype rtype, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Alltoallv(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls,
                                      rtype, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS) {
        int me, n = comm_shape(comm, &me);
        b = sbuf == MPI_IN_PLACE ? sum_counts(rcounts, n, rtype) : sum_counts(scounts, n, stype);
    }
    rec_coll(FC_ALLTOALLV, site, t0, t1, rc, comm, 1, b, 0, 0);
    DONE();
}

FN(MPI_Alltoallw)(const void *sbuf, const int scounts[], const int sdispls[],
                  const MPI_Datatype stypes[], void *rbuf, const int rcounts[],
                  const int rdispls[], const MPI_Datatype rtypes[], MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Alltoallw(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls,
                                      rtypes, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS) {
        int me, n = comm_shape(comm, &me);
        int in_place = sbuf == MPI_IN_PLACE;
        const int *counts = in_place ? rcounts : scounts;
        const MPI_Datatype *types = in_place ? rtypes : stypes;
        for (int i = 0; i < n && counts && types; i++)
            b = sat_add(b, type_bytes(counts[i], types[i]));
    }
    rec_coll(FC_ALLTOALLW, site, t0, t1, rc, comm, 1, b, 0, 0);
    DONE();
}

FN(MPI_Reduce_scatter)(const void *sbuf, void *rbuf, const int rcounts[], MPI_Datatype type,
                       MPI_Op op, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Reduce_scatter(sbuf, rbuf, rcounts, type, op, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS) {
        int me, n;
        (void)comm_shape(comm, &me);
        PMPI_Comm_size(comm, &n); /* the local group's counts, also for an intercommunicator */
        b = sum_counts(rcounts, n, type);
    }
    rec_coll(FC_REDUCE_SCATTER, site, t0, t1, rc, comm, 1, b, 0, 0);
    DONE();
}

FN(MPI_Reduce_scatter_block)(const void *sbuf, void *rbuf, int rcount, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm)
{
    PASS_UNLESS_ACTIVE(PMPI_Reduce_scatter_block(sbuf, rbuf, rcount, type, op, comm));
    uint64_t b = 0;
    if (rc == MPI_SUCCESS) {
        int n = 0;
        PMPI_Comm_size(comm, &n);
        b = type_bytes((long long)rcount * n, type);
    }
    rec_coll(FC_REDUCE_SCATTER_BLOCK, site, t0, t1, rc, comm, 1, b, 0, 0);
    DONE();
}

/* ---- communicator creation and freeing */

/* After a communicator-creating call on `parent`: counts the call on the parent (whatever it
 * returned; a parent the wrapper has not met yet is defined only when the call succeeded,
 * as a failed call may have failed on an invalid handle), defines the new communicator as
 * "P/N:L" and writes the group with `created communicator`. */
static void rec_create(int fn, void *site, uint64_t t0, uint64_t t1, int rc, MPI_Comm parent,
                       MPI_Comm made)
{
    comm_query q;
    int have = rc == MPI_SUCCESS && made != MPI_COMM_NULL;
    /* Query outside the lock (and before another thread can see the handle). */
    pthread_mutex_lock(&g_deflock);
    int ok = have && query_comm(made, &q) == 0;
    rlock();
    pthread_mutex_unlock(&g_deflock);
    uint32_t p = comm_id(parent, rc == MPI_SUCCESS, t1);
    uint32_t n = 0;
    char *pident = NULL;
    comm_info *pc = comm_at(p);
    if (pc && !pc->freed) {
        n = ++pc->births;
        pident = pc->ident;
    }
    uint32_t made_id = NO_COMM;
    if (ok) {
        if (q.inter) {
            made_id = INTER_COMM;
        } else if (pident) {
            size_t cap = strlen(pident) + 48;
            char *ident = (char *)malloc(cap);
            if (ident) {
                snprintf(ident, cap, "%s/%u:%d", pident, n, q.world[0]);
                made_id = define_comm(ident, q.size, q.world, t1);
                q.world = NULL;
            }
        } else {
            /* A child of an intercommunicator (or of a parent we could not define). */
            made_id = define_met(&q, t1);
        }
        free(q.world);
        if (made_id != NO_COMM)
            cst_map_put(&g_comm_map, comm_key(made), made_id, 0);
    }
    g_begin(3, t0, fn, site, p);
    g_arg_u(AC_CREATED_COMM, made_id);
    g_end(t1, fn, rc);
    runlock();
}

FN(MPI_Comm_dup)(MPI_Comm comm, MPI_Comm *newcomm)
{
    PASS_UNLESS_ACTIVE(PMPI_Comm_dup(comm, newcomm));
    rec_create(FC_COMM_DUP, site, t0, t1, rc, comm, rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    DONE();
}

FN(MPI_Comm_dup_with_info)(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    PASS_UNLESS_ACTIVE(PMPI_Comm_dup_with_info(comm, info, newcomm));
    rec_create(FC_COMM_DUP_WITH_INFO, site, t0, t1, rc, comm,
               rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    DONE();
}

FN(MPI_Comm_split)(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    PASS_UNLESS_ACTIVE(PMPI_Comm_split(comm, color, key, newcomm));
    rec_create(FC_COMM_SPLIT, site, t0, t1, rc, comm,
               rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    DONE();
}

FN(MPI_Comm_split_type)(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    PASS_UNLESS_ACTIVE(PMPI_Comm_split_type(comm, type, key, info, newcomm));
    rec_create(FC_COMM_SPLIT_TYPE, site, t0, t1, rc, comm,
               rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    DONE();
}

FN(MPI_Comm_create)(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    PASS_UNLESS_ACTIVE(PMPI_Comm_create(comm, group, newcomm));
    rec_create(FC_COMM_CREATE, site, t0, t1, rc, comm,
               rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    DONE();
}

FN(MPI_Cart_create)(MPI_Comm comm, int ndims, const int dims[], const int periods[],
                    int reorder, MPI_Comm *newcomm)
{
    PASS_UNLESS_ACTIVE(PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm));
    rec_create(FC_CART_CREATE, site, t0, t1, rc, comm,
               rc == MPI_SUCCESS ? *newcomm : MPI_COMM_NULL);
    DONE();
}

/* The communicator's local id is looked up before the call (the call frees it), never
 * queried: a communicator the wrapper has not met (created by a call it does not wrap and
 * never used in one it does) is written as 0xFFFFFFFF, since the handle may be invalid. */
FN(MPI_Comm_free)(MPI_Comm *comm)
{
    uint32_t id = NO_COMM;
    MPI_Comm before = MPI_COMM_NULL;
    if (ACTIVE() && comm) {
        int err = errno;
        before = *comm;
        rlock();
        id = comm_id(before, 0, 0);
        runlock();
        errno = err;
    }
    PASS_UNLESS_ACTIVE(PMPI_Comm_free(comm));
    rlock();
    if (rc == MPI_SUCCESS && id < INTER_COMM && id > 1) {
        /* Normally the attribute callback reported it (drained by rlock); if the attribute
         * could not be set, forget the handle here. */
        cst_map_entry *e = cst_map_get(&g_comm_map, comm_key(before));
        if (e && (uint32_t)e->val == id) {
            cst_map_del(&g_comm_map, comm_key(before));
            queue_freed(id, t1);
        }
    }
    g_begin(2, t0, FC_COMM_FREE, site, id);
    g_end(t1, FC_COMM_FREE, rc);
    runlock();
    DONE();
}

/* The Fortran entry points (see the comment at its top). */
#include "contend_mpi_fortran.c"

#if CONTEND_TRAMPOLINES
/* Until the constructor decides, every stub leads to its wrapper. */
#define DEFINE_TGT(name) contend_fn contend_tgt_##name = (contend_fn)w_##name;
CONTEND_FUNCS(DEFINE_TGT)
#endif
