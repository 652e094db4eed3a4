/*
 * contend_mpi_fortran.c - Fortran entry points of the MPI wrapper. #included at the end of
 * contend_mpi.c (one translation unit: it uses that file's recording functions); not built
 * on its own.
 *
 * What the Fortran bindings call (found with nm -D / objdump -d on Debian 12's libraries):
 *
 * - MPICH 4.0.2 (libmpichfort.so.12): every binding calls the C symbol. mpi_send_ (the
 *   mpif.h / `use mpi` binding) calls MPI_Send@plt, and so do all the functions of
 *   formats.md §2.4's table; the `use mpi_f08` bindings (mpi_send_f08ts_) call MPI_Send too.
 *   The C wrappers therefore already record MPICH Fortran programs, completely, but their
 *   return address is inside libmpichfort's binding (e.g. mpi_send_), not the program's line.
 *   For MPICH this file only adds stubs under the bindings' names (every function of the
 *   table, mpif.h / `use mpi` names) that note the program's return address in contend_fsite
 *   and jump to the binding; a C wrapper entered from libmpichfort takes that as call site.
 *   The mpi_f08 bindings are not stubbed: their calls keep a call site inside libmpichfort.
 *
 * - Open MPI 4.1.4 (libmpi_mpifh.so.40): the bindings call PMPI_* directly (mpi_send_ calls
 *   PMPI_Comm_f2c, PMPI_Type_f2c, PMPI_Send), so the C wrappers never see a Fortran call,
 *   not even MPI_Init. The `use mpi_f08` bindings (libmpi_usempif08: mpi_send_f08_) call
 *   ompi_send_f, the same function as mpi_send_, through the PLT.
 *
 * Covered here, for Open MPI builds on x86-64 only: MPI_Init, MPI_Init_thread, MPI_Finalize,
 * MPI_Send, MPI_Ssend, MPI_Recv, MPI_Isend, MPI_Irecv, MPI_Wait, MPI_Waitall, MPI_Barrier,
 * MPI_Bcast, MPI_Reduce, MPI_Allreduce, MPI_Alltoall, MPI_Allgather: under each name Open MPI
 * exports for them (mpi_send, mpi_send_, mpi_send__, MPI_SEND) and under ompi_send_f, which
 * catches the mpi_f08 bindings too (their call site is then inside libmpi_usempif08, not the
 * program). Each is an assembly stub like the C ones, jumping to the recording function
 * below or, when not recording, to the library's own binding (dlsym RTLD_NEXT), so
 * pass-through is exact. The recording function calls the library's binding (which converts
 * the handles and checks the arguments exactly as without contend), converts the handles with
 * MPI_Comm_f2c / MPI_Type_f2c / MPI_Request_f2c / MPI_Status_f2c, and writes the same call
 * group as the C wrapper, with the Fortran caller's return address as call site. When the
 * program passes MPI_STATUS_IGNORE / MPI_STATUSES_IGNORE the wrapper passes its own status
 * array instead. In Fortran Alltoall and Allgather, `bytes sent` is computed from the receive
 * arguments (equal to the send side in a correct program, and always significant, whereas
 * the send side is not with MPI_IN_PLACE).
 *
 * Not covered for Open MPI Fortran: every other function of the table (Bsend, Rsend,
 * Sendrecv*, the other nonblocking and persistent calls, Waitany/some, Test*, probes,
 * Cancel, Request_free, the other collectives, communicator creation). Their calls are not
 * recorded; requests they complete or communicators they create are still handled when a
 * covered call meets them (a request completed by an uncovered call stays in the request
 * table; a communicator created by one is defined as met#K when first used).
 */

#if CONTEND_TRAMPOLINES && BUILT_FAMILY == 1

/* The Fortran functions covered: lower-case name, upper-case name. */
#define CONTEND_FORTRAN(X)                                                                     \
    X(mpi_init, MPI_INIT) X(mpi_init_thread, MPI_INIT_THREAD) X(mpi_finalize, MPI_FINALIZE)     \
    X(mpi_send, MPI_SEND) X(mpi_ssend, MPI_SSEND) X(mpi_recv, MPI_RECV) X(mpi_isend, MPI_ISEND) \
    X(mpi_irecv, MPI_IRECV) X(mpi_wait, MPI_WAIT) X(mpi_waitall, MPI_WAITALL)                   \
    X(mpi_barrier, MPI_BARRIER) X(mpi_bcast, MPI_BCAST) X(mpi_reduce, MPI_REDUCE)              \
    X(mpi_allreduce, MPI_ALLREDUCE) X(mpi_alltoall, MPI_ALLTOALL)                              \
    X(mpi_allgather, MPI_ALLGATHER)

/* One stub per function, exported under all its names (Open MPI's aliases, and the
 * internal ompi_X_f that the mpi_f08 bindings call). */
#define FORTRAN_STUB(lower, upper)                                                             \
    __attribute__((visibility("hidden"), used)) contend_fn contend_ftgt_##lower;              \
    static contend_fn freal_##lower;                                                           \
    __asm__(".pushsection .text\n"                                                             \
            ".globl " #lower "\n.globl " #lower "_\n.globl " #lower "__\n.globl " #upper "\n"    \
            ".globl o" #lower "_f\n"                                                           \
            ".type " #lower ", @function\n.type " #lower "_, @function\n"                        \
            ".type " #lower "__, @function\n.type " #upper ", @function\n"                       \
            ".type o" #lower "_f, @function\n"                                                 \
            ".p2align 4\n" #lower ":\n" #lower "_:\n" #lower "__:\n" #upper ":\no" #lower "_f:\n" \
            CONTEND_ENDBR "jmp *contend_ftgt_" #lower "(%rip)\n"                              \
            ".size " #lower ", .-" #lower "\n.size " #lower "_, .-" #lower "_\n"                 \
            ".size " #lower "__, .-" #lower "__\n.size " #upper ", .-" #upper "\n"               \
            ".size o" #lower "_f, .-o" #lower "_f\n"                                           \
            ".popsection\n");
CONTEND_FORTRAN(FORTRAN_STUB)

static void fortran_resolve(void)
{
#define FRESOLVE(lower, upper)                                                                 \
    {                                                                                          \
        void *p = dlsym(RTLD_NEXT, #lower "_");                                                \
        memcpy(&freal_##lower, &p, sizeof p);                                                  \
    }
    CONTEND_FORTRAN(FRESOLVE)
#undef FRESOLVE
}

static void fortran_switch_to_real(int keep_finalize)
{
#define FSWITCH(lower, upper)                                                                  \
    if (freal_##lower && !(keep_finalize && strcmp(#lower, "mpi_finalize") == 0))             \
        __atomic_store_n(&contend_ftgt_##lower, freal_##lower, __ATOMIC_RELEASE);
    CONTEND_FORTRAN(FSWITCH)
#undef FSWITCH
}

/* The library's binding, resolved again if the Fortran library was loaded late. */
static contend_fn fortran_real(contend_fn *slot, const char *name)
{
    if (!*slot) {
        void *p = dlsym(RTLD_NEXT, name);
        memcpy(slot, &p, sizeof p);
    }
    return *slot;
}

#define FREAL(lower, type) ((type)fortran_real(&freal_##lower, #lower "_"))

/* Like PASS_UNLESS_ACTIVE for a Fortran binding: `call` is a statement calling the library's
 * binding; the MPI error code is then *ierr. */
#define F_PASS_UNLESS_ACTIVE(call)                                                             \
    if (!ACTIVE()) {                                                                           \
        call;                                                                                  \
        return;                                                                                \
    }                                                                                          \
    void *site = RA0();                                                                        \
    int err_ = errno;                                                                          \
    tl_depth++;                                                                                \
    uint64_t t0 = now_ns();                                                                    \
    if (tl_nruns) { /* the thread's polling runs end here */                                  \
        runs_close(t0);                                                                        \
        t0 = now_ns();                                                                         \
    }                                                                                          \
    errno = err_;                                                                              \
    call;                                                                                      \
    uint64_t t1 = now_ns();                                                                    \
    err_ = errno;                                                                              \
    int rc = *ierr;

#define F_DONE()                                                                               \
    tl_depth--;                                                                                \
    errno = err_;

/* Enough MPI_Fint for one Fortran status (Open MPI's MPI_STATUS_SIZE is
 * sizeof(MPI_Status) / sizeof(int)), with room to spare. */
#define F_STATUS_INTS (sizeof(MPI_Status) / sizeof(MPI_Fint) + 2)

typedef void (*f_init_t)(MPI_Fint *);
typedef void (*f_init_thread_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_finalize_t)(MPI_Fint *);
typedef void (*f_send_t)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                         MPI_Fint *);
typedef void (*f_recv_t)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                         MPI_Fint *, MPI_Fint *);
typedef void (*f_isend_t)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                          MPI_Fint *, MPI_Fint *);
typedef void (*f_wait_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_waitall_t)(MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_barrier_t)(MPI_Fint *, MPI_Fint *);
typedef void (*f_bcast_t)(void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *);
typedef void (*f_reduce_t)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                           MPI_Fint *, MPI_Fint *);
typedef void (*f_allreduce_t)(void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *,
                              MPI_Fint *);
typedef void (*f_alltoall_t)(void *, MPI_Fint *, MPI_Fint *, void *, MPI_Fint *, MPI_Fint *,
                             MPI_Fint *, MPI_Fint *);

/* ---- Init, Finalize */

typedef struct f_init_args {
    MPI_Fint *required; /* NULL for MPI_INIT */
    MPI_Fint *provided;
    MPI_Fint *ierr;
} f_init_args;

static int f_init_call(void *ctx, int real)
{
    (void)real; /* the library's own binding either way */
    f_init_args *a = (f_init_args *)ctx;
    if (!a->required)
        FREAL(mpi_init, f_init_t)(a->ierr);
    else
        FREAL(mpi_init_thread, f_init_thread_t)(a->required, a->provided, a->ierr);
    return *a->ierr;
}

__attribute__((noinline, used)) static void fw_mpi_init(MPI_Fint *ierr)
{
    f_init_args a = {NULL, NULL, ierr};
    (void)init_common(f_init_call, &a, FC_INIT, RA0());
}

__attribute__((noinline, used)) static void fw_mpi_init_thread(MPI_Fint *required,
                                                               MPI_Fint *provided, MPI_Fint *ierr)
{
    f_init_args a = {required, provided, ierr};
    (void)init_common(f_init_call, &a, FC_INIT_THREAD, RA0());
}

static int f_finalize_call(void *ctx)
{
    MPI_Fint *ierr = (MPI_Fint *)ctx;
    FREAL(mpi_finalize, f_finalize_t)(ierr);
    return *ierr;
}

__attribute__((noinline, used)) static void fw_mpi_finalize(MPI_Fint *ierr)
{
    if (ACTIVE())
        runs_thread_end();
    (void)finalize_common(f_finalize_call, ierr, RA0());
}

/* ---- point to point */

__attribute__((noinline, used)) static void fw_mpi_send(void *buf, MPI_Fint *count,
                                                        MPI_Fint *type, MPI_Fint *dest,
                                                        MPI_Fint *tag, MPI_Fint *comm,
                                                        MPI_Fint *ierr)
{
    F_PASS_UNLESS_ACTIVE(FREAL(mpi_send, f_send_t)(buf, count, type, dest, tag, comm, ierr));
    rec_send(FC_SEND, site, t0, t1, rc, *count, PMPI_Type_f2c(*type), *dest, *tag,
             PMPI_Comm_f2c(*comm));
    F_DONE();
}

__attribute__((noinline, used)) static void fw_mpi_ssend(void *buf, MPI_Fint *count,
                                                         MPI_Fint *type, MPI_Fint *dest,
                                                         MPI_Fint *tag, MPI_Fint *comm,
                                                         MPI_Fint *ierr)
{
    F_PASS_UNLESS_ACTIVE(FREAL(mpi_ssend, f_send_t)(buf, count, type, dest, tag, comm, ierr));
    rec_send(FC_SSEND, site, t0, t1, rc, *count, PMPI_Type_f2c(*type), *dest, *tag,
             PMPI_Comm_f2c(*comm));
    F_DONE();
}

__attribute__((noinline, used)) static void fw_mpi_recv(void *buf, MPI_Fint *count,
                                                        MPI_Fint *type, MPI_Fint *source,
                                                        MPI_Fint *tag, MPI_Fint *comm,
                                                        MPI_Fint *status, MPI_Fint *ierr)
{
    MPI_Fint own[F_STATUS_INTS];
    MPI_Fint *fst = status == MPI_F_STATUS_IGNORE ? own : status;
    F_PASS_UNLESS_ACTIVE(
        FREAL(mpi_recv, f_recv_t)(buf, count, type, source, tag, comm, fst, ierr));
    MPI_Status st;
    memset(&st, 0, sizeof st);
    if (rc == MPI_SUCCESS)
        PMPI_Status_f2c(fst, &st);
    rec_recv(FC_RECV, site, t0, t1, rc, *source, *tag, PMPI_Comm_f2c(*comm), &st);
    F_DONE();
}

__attribute__((noinline, used)) static void fw_mpi_isend(void *buf, MPI_Fint *count,
                                                         MPI_Fint *type, MPI_Fint *dest,
                                                         MPI_Fint *tag, MPI_Fint *comm,
                                                         MPI_Fint *req, MPI_Fint *ierr)
{
    F_PASS_UNLESS_ACTIVE(
        FREAL(mpi_isend, f_isend_t)(buf, count, type, dest, tag, comm, req, ierr));
    MPI_Request creq = rc == MPI_SUCCESS ? PMPI_Request_f2c(*req) : MPI_REQUEST_NULL;
    rec_isend(FC_ISEND, site, t0, t1, rc, *count, PMPI_Type_f2c(*type), *dest, *tag,
              PMPI_Comm_f2c(*comm), &creq, 0);
    F_DONE();
}

__attribute__((noinline, used)) static void fw_mpi_irecv(void *buf, MPI_Fint *count,
                                                         MPI_Fint *type, MPI_Fint *source,
                                                         MPI_Fint *tag, MPI_Fint *comm,
                                                         MPI_Fint *req, MPI_Fint *ierr)
{
    F_PASS_UNLESS_ACTIVE(
        FREAL(mpi_irecv, f_isend_t)(buf, count, type, source, tag, comm, req, ierr));
    MPI_Request creq = rc == MPI_SUCCESS ? PMPI_Request_f2c(*req) : MPI_REQUEST_NULL;
    rec_irecv(FC_IRECV, site, t0, t1, rc, *source, *tag, PMPI_Comm_f2c(*comm), &creq, 0);
    F_DONE();
}

__attribute__((noinline, used)) static void fw_mpi_wait(MPI_Fint *req, MPI_Fint *status,
                                                        MPI_Fint *ierr)
{
    MPI_Fint own[F_STATUS_INTS];
    MPI_Fint *fst = status == MPI_F_STATUS_IGNORE ? own : status;
    int err0 = errno;
    MPI_Request before = ACTIVE() ? PMPI_Request_f2c(*req) : MPI_REQUEST_NULL;
    errno = err0;
    REQ_MARK();
    F_PASS_UNLESS_ACTIVE(FREAL(mpi_wait, f_wait_t)(req, fst, ierr));
    MPI_Status st;
    memset(&st, 0, sizeof st);
    if (rc == MPI_SUCCESS)
        PMPI_Status_f2c(fst, &st);
    rlock();
    g_begin(7, t0, FC_WAIT, site, NO_COMM);
    if (before != MPI_REQUEST_NULL &&
        (rc == MPI_SUCCESS || PMPI_Request_f2c(*req) == MPI_REQUEST_NULL))
        g_completion(before, &st, rc == MPI_SUCCESS);
    g_end(t1, FC_WAIT, rc);
    runlock();
    F_DONE();
}

/* Per-thread Fortran status array for MPI_STATUSES_IGNORE (freed with the thread's other
 * scratch arrays when it ends). */
static __thread MPI_Fint *tl_fst TLS_IE;
static __thread size_t tl_fst_cap TLS_IE;

static void fortran_scratch_free(void)
{
    free(tl_fst);
    tl_fst = NULL;
    tl_fst_cap = 0;
}

__attribute__((noinline, used)) static void fw_mpi_waitall(MPI_Fint *count, MPI_Fint *reqs,
                                                           MPI_Fint *statuses, MPI_Fint *ierr)
{
    int n = *count;
    MPI_Fint *fst = statuses;
    int err0 = errno;
    int ok = ACTIVE() && n >= 0 && scratch_reserve((size_t)n + 1) == 0;
    if (ok && statuses == MPI_F_STATUSES_IGNORE) {
        size_t need = (size_t)n * F_STATUS_INTS + 1;
        if (need > tl_fst_cap) {
            MPI_Fint *p = (MPI_Fint *)realloc(tl_fst, need * sizeof *p);
            if (p) {
                tl_fst = p;
                tl_fst_cap = need;
            }
        }
        ok = need <= tl_fst_cap;
        fst = tl_fst;
    }
    if (ok)
        for (int i = 0; i < n; i++)
            tl_scr.req[i] = PMPI_Request_f2c(reqs[i]);
    errno = err0;
    if (!ok) {
        FREAL(mpi_waitall, f_waitall_t)(count, reqs, statuses, ierr);
        return;
    }
    REQ_MARK();
    F_PASS_UNLESS_ACTIVE(FREAL(mpi_waitall, f_waitall_t)(count, reqs, fst, ierr));
    /* Fortran statuses are MPI_STATUS_SIZE integers each: sizeof(MPI_Status) / sizeof(int)
     * in Open MPI. */
    size_t stride = sizeof(MPI_Status) / sizeof(MPI_Fint);
    for (int i = 0; i < n; i++) {
        memset(&tl_scr.st[i], 0, sizeof tl_scr.st[i]);
        if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS)
            PMPI_Status_f2c(fst + (size_t)i * stride, &tl_scr.st[i]);
    }
    rec_all(FC_WAITALL, site, t0, t1, rc, n, tl_scr.st, NULL, 0, 0, NULL);
    F_DONE();
}

/* ---- collectives */

__attribute__((noinline, used)) static void fw_mpi_barrier(MPI_Fint *comm, MPI_Fint *ierr)
{
    F_PASS_UNLESS_ACTIVE(FREAL(mpi_barrier, f_barrier_t)(comm, ierr));
    rec_coll(FC_BARRIER, site, t0, t1, rc, PMPI_Comm_f2c(*comm), 0, 0, 0, 0);
    F_DONE();
}

__attribute__((noinline, used)) static void fw_mpi_bcast(void *buf, MPI_Fint *count,
                                                         MPI_Fint *type, MPI_Fint *root,
                                                         MPI_Fint *comm, MPI_Fint *ierr)
{
    F_PASS_UNLESS_ACTIVE(FREAL(mpi_bcast, f_bcast_t)(buf, count, type, root, comm, ierr));
    uint64_t b = rc == MPI_SUCCESS && *root != MPI_PROC_NULL
                     ? type_bytes(*count, PMPI_Type_f2c(*type))
                     : 0;
    rec_coll(FC_BCAST, site, t0, t1, rc, PMPI_Comm_f2c(*comm), 1, b, 1, *root);
    F_DONE();
}

__attribute__((noinline, used)) static void fw_mpi_reduce(void *sbuf, void *rbuf,
                                                          MPI_Fint *count, MPI_Fint *type,
                                                          MPI_Fint *op, MPI_Fint *root,
                                                          MPI_Fint *comm, MPI_Fint *ierr)
{
    F_PASS_UNLESS_ACTIVE(
        FREAL(mpi_reduce, f_reduce_t)(sbuf, rbuf, count, type, op, root, comm, ierr));
    uint64_t b = rc == MPI_SUCCESS && *root != MPI_ROOT && *root != MPI_PROC_NULL
                     ? type_bytes(*count, PMPI_Type_f2c(*type))
                     : 0;
    rec_coll(FC_REDUCE, site, t0, t1, rc, PMPI_Comm_f2c(*comm), 1, b, 1, *root);
    F_DONE();
}

__attribute__((noinline, used)) static void fw_mpi_allreduce(void *sbuf, void *rbuf,
                                                             MPI_Fint *count, MPI_Fint *type,
                                                             MPI_Fint *op, MPI_Fint *comm,
                                                             MPI_Fint *ierr)
{
    F_PASS_UNLESS_ACTIVE(
        FREAL(mpi_allreduce, f_allreduce_t)(sbuf, rbuf, count, type, op, comm, ierr));
    uint64_t b = rc == MPI_SUCCESS ? type_bytes(*count, PMPI_Type_f2c(*type)) : 0;
    rec_coll(FC_ALLREDUCE, site, t0, t1, rc, PMPI_Comm_f2c(*comm), 1, b, 0, 0);
    F_DONE();
}

__attribute__((noinline, used)) static void fw_mpi_alltoall(void *sbuf, MPI_Fint *scount,
                                                            MPI_Fint *stype, void *rbuf,
                                                            MPI_Fint *rcount, MPI_Fint *rtype,
                                                            MPI_Fint *comm, MPI_Fint *ierr)
{
    F_PASS_UNLESS_ACTIVE(FREAL(mpi_alltoall, f_alltoall_t)(sbuf, scount, stype, rbuf, rcount,
                                                          rtype, comm, ierr));
    uint64_t b = 0;
    MPI_Comm c = PMPI_Comm_f2c(*comm);
    if (rc == MPI_SUCCESS) {
        int me, n = comm_shape(c, &me);
        b = type_bytes((long long)*rcount * n, PMPI_Type_f2c(*rtype));
    }
    rec_coll(FC_ALLTOALL, site, t0, t1, rc, c, 1, b, 0, 0);
    F_DONE();
}

__attribute__((noinline, used)) static void fw_mpi_allgather(void *sbuf, MPI_Fint *scount,
                                                             MPI_Fint *stype, void *rbuf,
                                                             MPI_Fint *rcount, MPI_Fint *rtype,
                                                             MPI_Fint *comm, MPI_Fint *ierr)
{
    F_PASS_UNLESS_ACTIVE(FREAL(mpi_allgather, f_alltoall_t)(sbuf, scount, stype, rbuf, rcount,
                                                           rtype, comm, ierr));
    uint64_t b = rc == MPI_SUCCESS ? type_bytes(*rcount, PMPI_Type_f2c(*rtype)) : 0;
    rec_coll(FC_ALLGATHER, site, t0, t1, rc, PMPI_Comm_f2c(*comm), 1, b, 0, 0);
    F_DONE();
}

/* Until the constructor decides, every Fortran stub leads to its recording function. */
#define DEFINE_FTGT(lower, upper) contend_fn contend_ftgt_##lower = (contend_fn)fw_##lower;
CONTEND_FORTRAN(DEFINE_FTGT)

#elif CONTEND_MPICH_FORTRAN_SITES

static void fortran_scratch_free(void)
{
}

/* MPICH: the bindings call the C functions, whose wrappers record the call. These stubs only
 * note the program's return address for them (contend_fsite, read by SITE()), under every
 * name MPICH exports (mpi_send, mpi_send_, mpi_send__, MPI_SEND), then jump to the library's
 * binding with every register and the stack as the program left them. Not the mpi_f08
 * bindings (mpi_send_f08ts_ ...): their calls keep a call site inside libmpichfort. */
#define CONTEND_FORTRAN_MPICH(X)                                                               \
    X(mpi_init, MPI_INIT) X(mpi_init_thread, MPI_INIT_THREAD) X(mpi_finalize, MPI_FINALIZE)     \
    X(mpi_send, MPI_SEND) X(mpi_ssend, MPI_SSEND) X(mpi_bsend, MPI_BSEND)                      \
    X(mpi_rsend, MPI_RSEND) X(mpi_recv, MPI_RECV) X(mpi_sendrecv, MPI_SENDRECV)                 \
    X(mpi_sendrecv_replace, MPI_SENDRECV_REPLACE) X(mpi_isend, MPI_ISEND)                      \
    X(mpi_issend, MPI_ISSEND) X(mpi_ibsend, MPI_IBSEND) X(mpi_irsend, MPI_IRSEND)              \
    X(mpi_irecv, MPI_IRECV) X(mpi_send_init, MPI_SEND_INIT) X(mpi_ssend_init, MPI_SSEND_INIT)  \
    X(mpi_bsend_init, MPI_BSEND_INIT) X(mpi_rsend_init, MPI_RSEND_INIT)                        \
    X(mpi_recv_init, MPI_RECV_INIT) X(mpi_start, MPI_START) X(mpi_startall, MPI_STARTALL)      \
    X(mpi_request_free, MPI_REQUEST_FREE) X(mpi_wait, MPI_WAIT) X(mpi_waitall, MPI_WAITALL)    \
    X(mpi_waitany, MPI_WAITANY) X(mpi_waitsome, MPI_WAITSOME) X(mpi_test, MPI_TEST)            \
    X(mpi_testall, MPI_TESTALL) X(mpi_testany, MPI_TESTANY) X(mpi_testsome, MPI_TESTSOME)      \
    X(mpi_cancel, MPI_CANCEL) X(mpi_probe, MPI_PROBE) X(mpi_iprobe, MPI_IPROBE)                \
    X(mpi_mprobe, MPI_MPROBE) X(mpi_improbe, MPI_IMPROBE) X(mpi_mrecv, MPI_MRECV)              \
    X(mpi_imrecv, MPI_IMRECV) X(mpi_barrier, MPI_BARRIER) X(mpi_bcast, MPI_BCAST)              \
    X(mpi_scatter, MPI_SCATTER) X(mpi_scatterv, MPI_SCATTERV) X(mpi_gather, MPI_GATHER)        \
    X(mpi_gatherv, MPI_GATHERV) X(mpi_reduce, MPI_REDUCE) X(mpi_allreduce, MPI_ALLREDUCE)      \
    X(mpi_allgather, MPI_ALLGATHER) X(mpi_allgatherv, MPI_ALLGATHERV)                          \
    X(mpi_alltoall, MPI_ALLTOALL) X(mpi_alltoallv, MPI_ALLTOALLV)                              \
    X(mpi_alltoallw, MPI_ALLTOALLW) X(mpi_reduce_scatter, MPI_REDUCE_SCATTER)                  \
    X(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK) X(mpi_scan, MPI_SCAN)                \
    X(mpi_exscan, MPI_EXSCAN) X(mpi_comm_dup, MPI_COMM_DUP)                                    \
    X(mpi_comm_dup_with_info, MPI_COMM_DUP_WITH_INFO) X(mpi_comm_split, MPI_COMM_SPLIT)        \
    X(mpi_comm_split_type, MPI_COMM_SPLIT_TYPE) X(mpi_comm_create, MPI_COMM_CREATE)            \
    X(mpi_cart_create, MPI_CART_CREATE) X(mpi_comm_free, MPI_COMM_FREE)

/* Each binding's address (0 until resolved) and the name to resolve it by. */
typedef struct fortran_entry {
    contend_fn target;
    const char *name;
} fortran_entry;

#define FORTRAN_ENTRY(lower, upper)                                                            \
    __attribute__((visibility("hidden"), used)) fortran_entry contend_fent_##lower = {         \
        NULL, #lower "_"};
CONTEND_FORTRAN_MPICH(FORTRAN_ENTRY)

/* Stub: r11 = the entry (r11 is the scratch register of every PLT call), then the common
 * part. */
#define FORTRAN_SITE_STUB(lower, upper)                                                        \
    __asm__(".pushsection .text\n"                                                             \
            ".globl " #lower "\n.globl " #lower "_\n.globl " #lower "__\n.globl " #upper "\n"    \
            ".type " #lower ", @function\n.type " #lower "_, @function\n"                        \
            ".type " #lower "__, @function\n.type " #upper ", @function\n"                       \
            ".p2align 4\n" #lower ":\n" #lower "_:\n" #lower "__:\n" #upper ":\n"              \
            CONTEND_ENDBR "leaq contend_fent_" #lower "(%rip), %r11\n"                          \
            "jmp contend_fortran_enter\n"                                                      \
            ".size " #lower ", .-" #lower "\n.size " #lower "_, .-" #lower "_\n"                 \
            ".size " #lower "__, .-" #lower "__\n.size " #upper ", .-" #upper "\n"               \
            ".popsection\n");
CONTEND_FORTRAN_MPICH(FORTRAN_SITE_STUB)

/* The common part: contend_fsite = the return address on top of the stack (the program's),
 * then jump to the binding, resolving it first if need be (the Fortran library may be loaded
 * after the constructor ran, by dlopen). Only r11 changes. On entry rsp = 8 mod 16, so after
 * the seven pushes the call to the resolver is aligned. */
__attribute__((visibility("hidden"), used)) contend_fn contend_fortran_resolve(fortran_entry *e);
__asm__(".pushsection .text\n"
        ".type contend_fortran_enter, @function\n"
        ".p2align 4\n"
        "contend_fortran_enter:\n"
        "pushq %rax\n"
        "pushq %rcx\n"
        "movq 16(%rsp), %rax\n"
        "movq contend_fsite@gottpoff(%rip), %rcx\n"
        "movq %rax, %fs:(%rcx)\n"
        "popq %rcx\n"
        "popq %rax\n"
        "cmpq $0, (%r11)\n"
        "je 1f\n"
        "jmp *(%r11)\n"
        "1:\n"
        "pushq %rdi\npushq %rsi\npushq %rdx\npushq %rcx\npushq %r8\npushq %r9\npushq %rax\n"
        "movq %r11, %rdi\n"
        "call contend_fortran_resolve\n"
        "movq %rax, %r11\n"
        "popq %rax\npopq %r9\npopq %r8\npopq %rcx\npopq %rdx\npopq %rsi\npopq %rdi\n"
        "jmp *%r11\n"
        ".size contend_fortran_enter, .-contend_fortran_enter\n"
        ".popsection\n");

/* The Fortran library's code, for SITE(): the library whose name starts with libmpichfort
 * (or libmpifort, as MPICH's derivatives call it). */
static int find_fortran_library(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libmpichfort", 12) != 0 && strncmp(base, "libmpifort", 10) != 0)
        return 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < lo)
            lo = a;
        if (a + ph->p_memsz > hi)
            hi = a + ph->p_memsz;
    }
    if (hi > lo) {
        g_fort_lo = lo;
        g_fort_len = hi - lo;
    }
    return 1;
}

/* Never returns 0 for an entry a program called: if the library has no such binding, the
 * call could not have been linked; say so and stop rather than jump to nothing. */
static void fortran_missing(void)
{
    say("contend: a Fortran MPI binding the loaded MPI does not have was called\n");
    abort();
}

contend_fn contend_fortran_resolve(fortran_entry *e)
{
    int err = errno;
    void *p = dlsym(RTLD_NEXT, e->name);
    if (!p) {
        errno = err;
        return (contend_fn)fortran_missing;
    }
    dl_iterate_phdr(find_fortran_library, NULL);
    contend_fn f;
    memcpy(&f, &p, sizeof p);
    __atomic_store_n(&e->target, f, __ATOMIC_RELEASE);
    errno = err;
    return f;
}

static void fortran_resolve(void)
{
#define FRESOLVE_MPICH(lower, upper)                                                           \
    {                                                                                          \
        void *p = dlsym(RTLD_NEXT, #lower "_");                                                \
        memcpy(&contend_fent_##lower.target, &p, sizeof p);                                    \
    }
    CONTEND_FORTRAN_MPICH(FRESOLVE_MPICH)
#undef FRESOLVE_MPICH
    dl_iterate_phdr(find_fortran_library, NULL);
}

static void fortran_switch_to_real(int keep_finalize)
{
    (void)keep_finalize; /* the stubs lead to the library's bindings whatever happens */
}

#else /* neither Open MPI nor MPICH on x86-64: nothing to add (see above) */

static void fortran_scratch_free(void)
{
}

static void fortran_resolve(void)
{
}

static void fortran_switch_to_real(int keep_finalize)
{
    (void)keep_finalize;
}

#endif
