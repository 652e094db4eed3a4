/*
 * heap_locks: contended locks that live on the heap, to be named by their allocation site.
 *
 * A global name (`hot_lock`) is easy to find in the symbol table; most real locks are not
 * globals but fields of objects allocated at run time.  This program has two:
 *   - `struct account` objects made with C++ `new` in open_account(): the std::mutex `lock`
 *     field of account 0 is contended by every thread (transfers into it);
 *   - one `struct table` made with malloc() in make_table(): its pthread_mutex_t `lock` field
 *     (initialised with pthread_mutex_init) is taken by every thread to log each transfer.
 * THREADS threads each make ROUNDS transfers, holding each lock for HOLD_US (busy).
 *
 * It ends with one line giving the truth the report should find, e.g.
 *   truth program=heap_locks threads=4 rounds=200 account_lock.addr=0x... account.size=72
 *     account_lock.offset=16 account.alloc_site=heap_locks.cpp:71:open_account
 *     table_lock.addr=0x... table.size=104 table_lock.offset=40
 *     table.alloc_site=heap_locks.cpp:88:make_table elapsed_ns=...
 *
 * usage: heap_locks [-t THREADS] [-k ROUNDS] [-H HOLD_US]
 * defaults: -t 4 -k 200 -H 20   (about 0.05 s on 2 CPUs)
 *
 * build: c++ -O2 -g -pthread heap_locks.cpp -o heap_locks
 */
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <pthread.h>
#include <time.h>
#include <unistd.h>

static inline int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void spin_for(int64_t ns)
{
    int64_t end = now_ns() + ns;
    while (now_ns() < end)
        ;
}

static inline const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

struct account {
    long id;
    long balance;
    std::mutex lock; /* protects balance */
    char owner[16];
};

struct table {
    long entries;
    long last_amount;
    char title[24];
    pthread_mutex_t lock; /* protects entries, last_amount */
    char pad[24];
};

static int account_line, table_line; /* lines of the allocations below */

__attribute__((noinline)) static account *open_account(long id)
{
    account *a = new account(); account_line = __LINE__;
    a->id = id;
    snprintf(a->owner, sizeof a->owner, "owner-%ld", id);
    return a;
}

__attribute__((noinline)) static table *make_table(void)
{
    table *t = (table *)malloc(sizeof(table)); table_line = __LINE__;
    if (!t)
        abort();
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

static int nthreads = 4;
static long rounds = 200;
static int64_t hold_ns = 20000;
static std::vector<account *> accounts;
static table *journal;

__attribute__((noinline)) static void transfer(account *to, long amount)
{
    {
        std::lock_guard<std::mutex> g(to->lock);
        to->balance += amount;
        spin_for(hold_ns);
    }
    pthread_mutex_lock(&journal->lock);
    journal->entries++;
    journal->last_amount = amount;
    spin_for(hold_ns / 2);
    pthread_mutex_unlock(&journal->lock);
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "t:k:H:")) != -1) {
        switch (opt) {
        case 't': nthreads = atoi(optarg); break;
        case 'k': rounds = atol(optarg); break;
        case 'H': hold_ns = atol(optarg) * 1000; break;
        default:
            fprintf(stderr, "usage: %s [-t THREADS] [-k ROUNDS] [-H HOLD_US]\n", argv[0]);
            return 2;
        }
    }
    if (nthreads < 1 || rounds < 1 || hold_ns < 0) {
        fprintf(stderr, "%s: -t and -k want positive integers\n", argv[0]);
        return 2;
    }
    for (long i = 0; i < 4; i++)
        accounts.push_back(open_account(i));
    journal = make_table();

    int64_t start = now_ns();
    std::vector<std::thread> threads;
    for (int i = 0; i < nthreads; i++)
        threads.emplace_back([] {
            for (long r = 0; r < rounds; r++)
                transfer(accounts[0], r);
        });
    for (auto &t : threads)
        t.join();
    int64_t elapsed = now_ns() - start;

    printf("truth program=heap_locks threads=%d rounds=%ld "
           "account_lock.addr=%p account.size=%zu account_lock.offset=%zu "
           "account.alloc_site=%s:%d:open_account "
           "table_lock.addr=%p table.size=%zu table_lock.offset=%zu "
           "table.alloc_site=%s:%d:make_table elapsed_ns=%lld\n",
           nthreads, rounds, (void *)&accounts[0]->lock, sizeof(account),
           offsetof(account, lock), base_name(__FILE__), account_line, (void *)&journal->lock,
           sizeof(table), offsetof(table, lock), base_name(__FILE__), table_line,
           (long long)elapsed);
    for (auto *a : accounts)
        delete a;
    pthread_mutex_destroy(&journal->lock);
    free(journal);
    return 0;
}
