/*
 * cxx_mutex: C++ standard-library locks with known contention.
 *
 * THREADS threads each run ROUNDS rounds.  Every round calls post_to_ledger(), which takes
 * `ledger_mutex` (a std::mutex) through std::lock_guard and holds it for HOLD_US (busy);
 * then either update_price() (every WRITE_EVERY-th round), which takes `price_table_mutex`
 * (a std::shared_mutex) exclusively through std::unique_lock for WRITE_US, or lookup_price(),
 * which takes it shared through std::shared_lock for READ_US.  Readers overlap each other;
 * writers exclude everyone.
 *
 * libstdc++ implements std::mutex on pthread_mutex_t and std::shared_mutex on
 * pthread_rwlock_t, through inline wrappers (std::mutex::lock -> __gthread_mutex_lock ->
 * pthread_mutex_lock; std::shared_mutex::lock_shared -> pthread_rwlock_rdlock).  At -O2
 * the wrappers are inlined, so the call to pthread_* sits in the functions below; at -O0
 * they are out-of-line functions and the function that wants the lock is three frames up.
 * The functions are noinline so each has its own name and frame either way.
 *
 * Ground truth, measured in the program with CLOCK_MONOTONIC around each acquisition: the
 * time from starting to acquire (constructing the guard) to holding the lock (wait), and
 * from there to the end of the critical section just before the guard releases it (hold),
 * summed per lock and mode.  Exact to about two clock reads (~50 ns) per acquisition.
 *
 * usage: cxx_mutex [-t THREADS] [-k ROUNDS] [-H HOLD_US] [-r READ_US] [-W WRITE_US]
 *                  [-e WRITE_EVERY]
 * defaults: -t 4 -k 1000 -H 50 -r 20 -W 100 -e 10   (about 0.3 s on 2 CPUs)
 *
 * build: c++ -O2 -g -pthread cxx_mutex.cpp -o cxx_mutex
 */
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#include <pthread.h>
#include <unistd.h>

/* ---- timing helpers (the same in every lock example; each file stands alone so that
 * `contend demo` can build it from its embedded source) ---------------------------- */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC. */
static inline int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Busy-wait (on the CPU, not asleep) until CLOCK_MONOTONIC reaches `deadline`; returns the
 * time it read last, which is >= deadline.  Exact to one clock read (tens of ns). */
static inline int64_t spin_until(int64_t deadline)
{
    int64_t t;
    while ((t = now_ns()) < deadline)
        ;
    return t;
}

/* Parse a non-negative integer option value or exit with a usage message. */
static inline long parse_count(const char *prog, char opt, const char *s, long min, long max)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end != 0 || v < min || v > max) {
        fprintf(stderr, "%s: -%c wants an integer in [%ld, %ld], got '%s'\n", prog, opt, min,
                max, s);
        exit(2);
    }
    return v;
}

/* The source file's base name, for "site=file:line:function" fields. */
static inline const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}
/* ----------------------------------------------------------------------------------- */

namespace {

std::mutex ledger_mutex;               // protects ledger
std::shared_mutex price_table_mutex;   // protects price_table
long ledger[16];
std::map<int, long> price_table;

int nthreads = 4, write_every = 10;
long rounds = 1000;
int64_t hold_ns = 50000, read_ns = 20000, write_ns = 100000;
std::atomic<bool> go{false};

struct Sums {
    long acquisitions = 0;
    int64_t wait_ns = 0, hold_ns = 0;
    void add(int64_t t0, int64_t t1, int64_t t2)
    {
        acquisitions++;
        wait_ns += t1 - t0;
        hold_ns += t2 - t1;
    }
    void merge(const Sums &o)
    {
        acquisitions += o.acquisitions;
        wait_ns += o.wait_ns;
        hold_ns += o.hold_ns;
    }
};

struct Worker {
    int id = 0;
    Sums ledger, reads, writes;
    long price_seen = 0;
};

// Source lines of the acquisitions (atomic: readers store theirs concurrently).
std::atomic<int> ledger_line{0}, lookup_line{0}, update_line{0};

__attribute__((noinline)) void post_to_ledger(Worker &w, long amount)
{
    int64_t t0 = now_ns();
    std::lock_guard<std::mutex> guard(ledger_mutex); ledger_line.store(__LINE__, std::memory_order_relaxed);
    int64_t t1 = now_ns();
    ledger[w.id % 16] += amount;
    int64_t t2 = spin_until(t1 + hold_ns);
    w.ledger.add(t0, t1, t2);
} // guard releases here

__attribute__((noinline)) long lookup_price(Worker &w, int key)
{
    int64_t t0 = now_ns();
    std::shared_lock<std::shared_mutex> guard(price_table_mutex); lookup_line.store(__LINE__, std::memory_order_relaxed);
    int64_t t1 = now_ns();
    auto it = price_table.find(key);
    long price = it == price_table.end() ? 0 : it->second;
    int64_t t2 = spin_until(t1 + read_ns);
    w.reads.add(t0, t1, t2);
    return price;
}

__attribute__((noinline)) void update_price(Worker &w, int key, long price)
{
    int64_t t0 = now_ns();
    std::unique_lock<std::shared_mutex> guard(price_table_mutex); update_line.store(__LINE__, std::memory_order_relaxed);
    int64_t t1 = now_ns();
    price_table[key] = price;
    int64_t t2 = spin_until(t1 + write_ns);
    w.writes.add(t0, t1, t2);
}

void worker_main(Worker *w)
{
    char name[16];
    std::snprintf(name, sizeof name, "cxx-%d", w->id);
    pthread_setname_np(pthread_self(), name);
    while (!go.load())
        ;
    for (long i = 0; i < rounds; i++) {
        post_to_ledger(*w, i);
        int key = (int)(i % 8);
        if (write_every > 0 && i % write_every == (long)(w->id % write_every))
            update_price(*w, key, i);
        else
            w->price_seen += lookup_price(*w, key);
    }
}

void usage(const char *prog)
{
    std::fprintf(stderr,
                 "usage: %s [-t THREADS] [-k ROUNDS] [-H HOLD_US] [-r READ_US] [-W WRITE_US]"
                 " [-e WRITE_EVERY]\n"
                 "  -t  threads (default 4)\n"
                 "  -k  rounds per thread (default 1000)\n"
                 "  -H  std::mutex hold per round, microseconds, busy (default 50)\n"
                 "  -r  std::shared_mutex shared hold, microseconds (default 20)\n"
                 "  -W  std::shared_mutex exclusive hold, microseconds (default 100)\n"
                 "  -e  one round in E writes, the others read (default 10; 0: never write)\n",
                 prog);
    std::exit(2);
}

} // namespace

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "t:k:H:r:W:e:h")) != -1) {
        switch (opt) {
        case 't': nthreads = (int)parse_count(argv[0], 't', optarg, 1, 1024); break;
        case 'k': rounds = parse_count(argv[0], 'k', optarg, 1, 100000000); break;
        case 'H': hold_ns = parse_count(argv[0], 'H', optarg, 0, 10000000) * 1000; break;
        case 'r': read_ns = parse_count(argv[0], 'r', optarg, 0, 10000000) * 1000; break;
        case 'W': write_ns = parse_count(argv[0], 'W', optarg, 0, 10000000) * 1000; break;
        case 'e': write_every = (int)parse_count(argv[0], 'e', optarg, 0, 1000000); break;
        default: usage(argv[0]);
        }
    }
    if (optind != argc)
        usage(argv[0]);

    std::vector<Worker> workers((size_t)nthreads);
    std::vector<std::thread> threads;
    for (int i = 0; i < nthreads; i++) {
        workers[(size_t)i].id = i;
        threads.emplace_back(worker_main, &workers[(size_t)i]);
    }
    int64_t start = now_ns();
    go.store(true);
    for (auto &t : threads)
        t.join();
    int64_t elapsed = now_ns() - start;

    Sums ledger_sums, reads, writes;
    for (auto &w : workers) {
        ledger_sums.merge(w.ledger);
        reads.merge(w.reads);
        writes.merge(w.writes);
    }
    long ledger_total = 0;
    for (long v : ledger)
        ledger_total += v;
    if (ledger_total != (long)nthreads * (rounds * (rounds - 1) / 2)) {
        std::fprintf(stderr, "cxx_mutex: ledger total wrong: the mutex did not exclude\n");
        return 1;
    }
    const char *file = base_name(__FILE__);
    char update_site[128] = "none", lookup_site[128] = "none";
    if (update_line.load())
        std::snprintf(update_site, sizeof update_site, "%s:%d:update_price", file,
                      update_line.load());
    if (lookup_line.load())
        std::snprintf(lookup_site, sizeof lookup_site, "%s:%d:lookup_price", file,
                      lookup_line.load());
    std::printf("truth program=cxx_mutex threads=%d rounds=%ld hold_ns=%lld read_ns=%lld "
                "write_ns=%lld write_every=%d "
                "ledger_mutex.addr=%p ledger_mutex.kind=std::mutex "
                "ledger_mutex.site=%s:%d:post_to_ledger "
                "ledger_mutex.acquisitions=%ld ledger_mutex.wait_ns_total=%lld "
                "ledger_mutex.hold_ns_total=%lld "
                "price_table_mutex.addr=%p price_table_mutex.kind=std::shared_mutex "
                "price_table_mutex.read_site=%s "
                "price_table_mutex.write_site=%s "
                "price_table_mutex.reads=%ld price_table_mutex.read_wait_ns_total=%lld "
                "price_table_mutex.read_hold_ns_total=%lld "
                "price_table_mutex.writes=%ld price_table_mutex.write_wait_ns_total=%lld "
                "price_table_mutex.write_hold_ns_total=%lld elapsed_ns=%lld\n",
                nthreads, rounds, (long long)hold_ns, (long long)read_ns, (long long)write_ns,
                write_every, (void *)&ledger_mutex, file, ledger_line.load(),
                ledger_sums.acquisitions, (long long)ledger_sums.wait_ns,
                (long long)ledger_sums.hold_ns, (void *)&price_table_mutex, lookup_site, update_site,
                reads.acquisitions, (long long)reads.wait_ns, (long long)reads.hold_ns,
                writes.acquisitions, (long long)writes.wait_ns, (long long)writes.hold_ns,
                (long long)elapsed);
    return 0;
}
