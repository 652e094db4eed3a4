/*
 * cst_writer.h - a self-contained C writer for contend event streams (*.cst).
 *
 * docs/formats.md §2 is the format; crates/trace/src/writer.rs (trace::StreamWriter) is the
 * reference writer. For the same sequence of operations (open with a header, intern strings,
 * intern call sites, push records, flush, finish) this writer produces the same bytes as
 * trace::StreamWriter with the same chunk size: the same ids (strings and sites numbered from
 * 0 in order of first use), table chunks (strings, then call sites) before the events chunk
 * in one write(2), strings padded with zeros to 4 bytes, an events chunk only when there are
 * events or drops to report, the same trailer. mpi/test_vectors.c and
 * crates/trace/tests/mpi_c_writer.rs pin this byte for byte.
 *
 * Not implemented, because the MPI wrapper does not need them: the object table (chunk kind
 * 5; the trailer counts 0 objects) and StreamWriter::with_byte_limit (no limit).
 *
 * Like the Rust writer it never blocks on a full buffer and never aborts: a push into a full
 * buffer flushes it; a failed write counts the buffered events as dropped (stored in the next
 * events chunk and in the trailer), cuts the file back to its last complete chunk
 * (ftruncate), keeps unwritten table entries pending for the next flush, and goes on. A file
 * that cannot be cut back stops the stream for good ("broken"). Every function saves and
 * restores errno. The only allocations are the event buffer (once, at open) and table growth
 * on first use of a string or site. Not thread-safe: callers serialise (the MPI wrapper holds
 * a mutex).
 *
 * Depends only on libc (C99 + POSIX write/ftruncate/lseek). All functions are static.
 */
#ifndef CONTEND_CST_WRITER_H
#define CONTEND_CST_WRITER_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Every function is static; unused ones must not warn under -Wall -Werror. */
#if defined(__GNUC__)
#define CST_FN static __attribute__((unused))
#else
#define CST_FN static
#endif

#define CST_HEADER_LEN 64u
#define CST_CHUNK_HEADER_LEN 24u
#define CST_RECORD_LEN 16u
#define CST_TRAILER_LEN 40u
#define CST_SITE_ENTRY_LEN 16u
#define CST_MAX_CHUNK_PAYLOAD (64u << 20)
#define CST_MAX_STRING_LEN (64u << 10)
#define CST_NO_SITE 0xFFFFu
#define CST_NO_STRING 0xFFFFFFFFu
#define CST_DEFAULT_CHUNK_EVENTS 4096u

#define CST_CHUNK_EVENTS 1u
#define CST_CHUNK_STRINGS 2u
#define CST_CHUNK_SITES 3u
#define CST_CHUNK_TRAILER 4u

#define CST_STREAM_THREAD 1u
#define CST_STREAM_PROCESS 2u
#define CST_STREAM_RANK 3u
#define CST_STREAM_SYSTEM 4u
#define CST_CLOCK_MONOTONIC 1u

/* Event kinds used by the MPI wrapper (formats.md §2.3, §2.4). */
#define CST_EV_MARK 1u
#define CST_EV_MPI_ENTER 20u
#define CST_EV_MPI_ARG 21u
#define CST_EV_MPI_EXIT 22u
#define CST_EV_MPI_COMM 23u
#define CST_EV_MPI_COMM_MEMBERS 24u
#define CST_EV_MPI_CLOCK 25u
#define CST_EV_MPI_CLOCK_OFFSET 26u

/* ---------------------------------------------------------------- little-endian encoding */

CST_FN inline void cst_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

CST_FN inline void cst_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

CST_FN inline void cst_put64(uint8_t *p, uint64_t v)
{
    cst_put32(p, (uint32_t)v);
    cst_put32(p + 4, (uint32_t)(v >> 32));
}

/* ---------------------------------------------------------------- CRC-32 (IEEE, as zlib) */

/* Slice-by-8 tables for the reflected polynomial 0xEDB88320, built on first use. Building
 * them twice (two writers racing) writes the same values, so the flag needs no lock. */
static uint32_t cst_crc_table[8][256];
static volatile int cst_crc_ready;

CST_FN void cst_crc_init(void)
{
    if (cst_crc_ready)
        return;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1u) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        cst_crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = cst_crc_table[0][i];
        for (int t = 1; t < 8; t++) {
            c = cst_crc_table[0][c & 0xFFu] ^ (c >> 8);
            cst_crc_table[t][i] = c;
        }
    }
    cst_crc_ready = 1;
}

/* Continues a CRC: start with crc = 0 (zlib's crc32(0, ...)), feed pieces in order. */
CST_FN uint32_t cst_crc32(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    cst_crc_init();
    crc = ~crc;
    while (len >= 8) {
        uint32_t a = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                            (uint32_t)p[3] << 24);
        uint32_t b = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
                     (uint32_t)p[7] << 24;
        crc = cst_crc_table[7][a & 0xFFu] ^ cst_crc_table[6][(a >> 8) & 0xFFu] ^
              cst_crc_table[5][(a >> 16) & 0xFFu] ^ cst_crc_table[4][a >> 24] ^
              cst_crc_table[3][b & 0xFFu] ^ cst_crc_table[2][(b >> 8) & 0xFFu] ^
              cst_crc_table[1][(b >> 16) & 0xFFu] ^ cst_crc_table[0][b >> 24];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = cst_crc_table[0][(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

/* ---------------------------------------------------------------- fixed layouts */

typedef struct cst_header {
    uint16_t kind;  /* CST_STREAM_* */
    uint16_t clock; /* 1 monotonic, 2 TSC, 3 realtime */
    uint64_t clock_hz;
    uint32_t pid;
    uint32_t tid;
    int32_t rank;
    uint64_t base_time;
} cst_header;

CST_FN void cst_header_encode(uint8_t out[CST_HEADER_LEN], const cst_header *h)
{
    memset(out, 0, CST_HEADER_LEN);
    memcpy(out, "CNTDSTRM", 8);
    cst_put16(out + 8, 1);      /* version */
    cst_put16(out + 10, 0x0102); /* byte-order mark */
    cst_put16(out + 12, CST_HEADER_LEN);
    cst_put16(out + 14, CST_RECORD_LEN);
    cst_put16(out + 16, h->kind);
    cst_put16(out + 18, h->clock);
    cst_put64(out + 24, h->clock_hz);
    cst_put32(out + 32, h->pid);
    cst_put32(out + 36, h->tid);
    cst_put32(out + 40, (uint32_t)h->rank);
    cst_put64(out + 48, h->base_time);
    cst_put32(out + 60, cst_crc32(0, out, 60));
}

/* One 16-byte record: ts u64 | kind u8 | aux u8 | site u16 | obj u32. */
CST_FN inline void cst_record_encode(uint8_t out[CST_RECORD_LEN], uint64_t ts, uint8_t kind,
                                     uint8_t aux, uint16_t site, uint32_t obj)
{
    cst_put64(out, ts);
    out[8] = kind;
    out[9] = aux;
    cst_put16(out + 10, site);
    cst_put32(out + 12, obj);
}

/* The 24-byte chunk header for `payload`; the CRC covers header bytes 0..20 and the payload. */
CST_FN void cst_chunk_header_encode(uint8_t out[CST_CHUNK_HEADER_LEN], uint16_t kind,
                                    const uint8_t *payload, uint32_t payload_len, uint32_t count,
                                    uint32_t dropped)
{
    cst_put32(out, 0x4B4E4843u); /* "CHNK" */
    cst_put16(out + 4, kind);
    cst_put16(out + 6, 0);
    cst_put32(out + 8, payload_len);
    cst_put32(out + 12, count);
    cst_put32(out + 16, dropped);
    cst_put32(out + 20, cst_crc32(cst_crc32(0, out, 20), payload, payload_len));
}

/* ---------------------------------------------------------------- u64-keyed hash map */

/* Open addressing, linear probing, backward-shift deletion (no tombstones). Used for call
 * sites here and, by the MPI wrapper, for request, message and communicator handles (their
 * bytes copied into a zero-padded u64). Capacity is a power of two, load at most 1/2. */
typedef struct cst_map_entry {
    uint64_t key;
    uint64_t val;
    uint32_t aux;
    uint16_t flags; /* the caller's */
    uint16_t used;
} cst_map_entry;

typedef struct cst_map {
    cst_map_entry *slots;
    size_t cap; /* 0 or a power of two */
    size_t len;
} cst_map;

CST_FN inline size_t cst_map_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    k ^= k >> 33;
    return (size_t)k;
}

CST_FN cst_map_entry *cst_map_get(cst_map *m, uint64_t key)
{
    if (m->cap == 0)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = cst_map_hash(key) & mask;; i = (i + 1) & mask) {
        cst_map_entry *e = &m->slots[i];
        if (!e->used)
            return NULL;
        if (e->key == key)
            return e;
    }
}

CST_FN int cst_map_grow(cst_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    cst_map_entry *n = (cst_map_entry *)calloc(ncap, sizeof *n);
    if (!n)
        return -1;
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->slots[i].used)
            continue;
        size_t j = cst_map_hash(m->slots[i].key) & (ncap - 1);
        while (n[j].used)
            j = (j + 1) & (ncap - 1);
        n[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = n;
    m->cap = ncap;
    return 0;
}

/* Inserts or replaces; returns the entry, or NULL when out of memory. */
CST_FN cst_map_entry *cst_map_put(cst_map *m, uint64_t key, uint64_t val, uint32_t aux)
{
    cst_map_entry *e = cst_map_get(m, key);
    if (!e) {
        if ((m->len + 1) * 2 > m->cap && cst_map_grow(m) != 0)
            return NULL;
        size_t mask = m->cap - 1;
        size_t i = cst_map_hash(key) & mask;
        while (m->slots[i].used)
            i = (i + 1) & mask;
        e = &m->slots[i];
        e->used = 1;
        e->key = key;
        e->flags = 0;
        m->len++;
    }
    e->val = val;
    e->aux = aux;
    return e;
}

CST_FN void cst_map_del(cst_map *m, uint64_t key)
{
    cst_map_entry *e = cst_map_get(m, key);
    if (!e)
        return;
    size_t mask = m->cap - 1;
    size_t hole = (size_t)(e - m->slots);
    for (size_t i = (hole + 1) & mask; m->slots[i].used; i = (i + 1) & mask) {
        size_t home = cst_map_hash(m->slots[i].key) & mask;
        /* Move slot i into the hole unless its home lies cyclically in (hole, i]. */
        int stays = (hole <= i) ? (home > hole && home <= i) : (home > hole || home <= i);
        if (!stays) {
            m->slots[hole] = m->slots[i];
            hole = i;
        }
    }
    m->slots[hole].used = 0;
    m->len--;
}

CST_FN void cst_map_free(cst_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->len = 0;
}

/* ---------------------------------------------------------------- growable byte buffer */

typedef struct cst_bytes {
    uint8_t *p;
    size_t len, cap;
} cst_bytes;

CST_FN int cst_bytes_reserve(cst_bytes *b, size_t more)
{
    if (b->len + more <= b->cap)
        return 0;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->len + more)
        ncap *= 2;
    uint8_t *n = (uint8_t *)realloc(b->p, ncap);
    if (!n)
        return -1;
    b->p = n;
    b->cap = ncap;
    return 0;
}

/* ---------------------------------------------------------------- the writer */

/* A table's entries not yet in the file, and how many are. */
typedef struct cst_table {
    cst_bytes pending;
    uint32_t count;
    uint32_t written;
} cst_table;

typedef struct cst_string_entry {
    uint64_t hash;
    char *s; /* the full string as interned (the key) */
    size_t len;
    uint32_t id;
} cst_string_entry;

typedef struct cst_writer {
    int fd;
    uint8_t *buf; /* CST_CHUNK_HEADER_LEN bytes for the events chunk header, then records */
    uint32_t chunk_events;
    uint32_t buffered;
    cst_table strings, sites;
    cst_bytes scratch;
    /* String interning: the kept entries, and a hash index of entry + 1 (0 = empty slot).
     * str_next is the next string id (strings added with cst_add_string have no entry). */
    cst_string_entry *str_entries;
    size_t str_len, str_cap;
    uint32_t str_next;
    uint32_t *str_index;
    size_t str_index_cap;
    cst_map site_map;
    uint64_t sites_overflowed;
    uint32_t dropped_since_chunk;
    uint64_t events, dropped, bytes;
    int broken;      /* a failed write could not be cut back: nothing more is written */
    int first_error; /* errno of the first failed write, 0 if none */
} cst_writer;

/* write(2) all of it, retrying on EINTR and short writes (as Rust's write_all). */
CST_FN int cst_write_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            errno = EIO;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Cuts the file back to `len` bytes (the end of the last complete chunk). */
CST_FN int cst_rewind_to(int fd, uint64_t len)
{
    if (ftruncate(fd, (off_t)len) != 0)
        return -1;
    return lseek(fd, (off_t)len, SEEK_SET) == (off_t)len ? 0 : -1;
}

/* Writes the header at once and allocates the buffer for `chunk_events` events (clamped to
 * 1 ..= 64 MiB / 16). `fd` is written from its current offset, which should be 0. Returns 0,
 * or -1 with nothing to free (errno is restored; the cause is lost). */
CST_FN int cst_open(cst_writer *w, int fd, const cst_header *h, uint32_t chunk_events)
{
    int saved = errno;
    memset(w, 0, sizeof *w);
    w->fd = fd;
    if (chunk_events < 1)
        chunk_events = 1;
    if (chunk_events > CST_MAX_CHUNK_PAYLOAD / CST_RECORD_LEN)
        chunk_events = CST_MAX_CHUNK_PAYLOAD / CST_RECORD_LEN;
    w->chunk_events = chunk_events;
    cst_crc_init();
    uint8_t hdr[CST_HEADER_LEN];
    cst_header_encode(hdr, h);
    w->buf = (uint8_t *)malloc(CST_CHUNK_HEADER_LEN + (size_t)chunk_events * CST_RECORD_LEN);
    if (!w->buf || cst_write_all(fd, hdr, sizeof hdr) != 0) {
        free(w->buf);
        w->buf = NULL;
        errno = saved;
        return -1;
    }
    w->bytes = CST_HEADER_LEN;
    errno = saved;
    return 0;
}

CST_FN uint64_t cst_fnv1a(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

CST_FN int cst_flush(cst_writer *w);

/* Adds the `len` bytes at `s` to the table under the next id (hash `h`); keeps a copy for
 * interning when `keep`. Strings longer than 64 KiB are cut at a character boundary (keyed by
 * the whole string, as in Rust). CST_NO_STRING only when out of memory. */
CST_FN uint32_t cst_string_add(cst_writer *w, const char *s, size_t len, uint64_t h, int keep)
{
    int saved = errno;
    /* Room for the entry in the table and the index. */
    if (keep && w->str_len == w->str_cap) {
        size_t ncap = w->str_cap ? w->str_cap * 2 : 16;
        cst_string_entry *n = (cst_string_entry *)realloc(w->str_entries, ncap * sizeof *n);
        if (!n)
            goto oom;
        w->str_entries = n;
        w->str_cap = ncap;
    }
    if (keep && (w->str_len + 1) * 2 > w->str_index_cap) {
        size_t ncap = w->str_index_cap ? w->str_index_cap * 2 : 32;
        uint32_t *n = (uint32_t *)calloc(ncap, sizeof *n);
        if (!n)
            goto oom;
        for (size_t k = 0; k < w->str_len; k++) {
            size_t j = (size_t)w->str_entries[k].hash & (ncap - 1);
            while (n[j])
                j = (j + 1) & (ncap - 1);
            n[j] = (uint32_t)k + 1;
        }
        free(w->str_index);
        w->str_index = n;
        w->str_index_cap = ncap;
    }
    size_t end = len < CST_MAX_STRING_LEN ? len : CST_MAX_STRING_LEN;
    while (end < len && ((uint8_t)s[end] & 0xC0u) == 0x80u)
        end--;
    if (w->strings.pending.len + 8 + end + 3 > CST_MAX_CHUNK_PAYLOAD)
        (void)cst_flush(w); /* keep every table chunk within the size a reader accepts */
    size_t padded = (end + 3) & ~(size_t)3;
    char *copy = keep ? (char *)malloc(len ? len : 1) : NULL;
    if ((keep && !copy) || cst_bytes_reserve(&w->strings.pending, 8 + padded) != 0) {
        free(copy);
        goto oom;
    }
    uint32_t id = w->str_next++;
    cst_bytes *p = &w->strings.pending;
    cst_put32(p->p + p->len, id);
    cst_put32(p->p + p->len + 4, (uint32_t)end);
    memcpy(p->p + p->len + 8, s, end);
    memset(p->p + p->len + 8 + end, 0, padded - end);
    p->len += 8 + padded;
    w->strings.count++;
    if (keep) {
        memcpy(copy, s, len);
        w->str_entries[w->str_len].hash = h;
        w->str_entries[w->str_len].s = copy;
        w->str_entries[w->str_len].len = len;
        w->str_entries[w->str_len].id = id;
        size_t mask = w->str_index_cap - 1;
        size_t j = (size_t)h & mask;
        while (w->str_index[j])
            j = (j + 1) & mask;
        w->str_index[j] = (uint32_t)w->str_len + 1;
        w->str_len++;
    }
    errno = saved;
    return id;
oom:
    errno = saved;
    return CST_NO_STRING;
}

/* The table id of the `len` bytes at `s` (UTF-8: the reader refuses other text), adding it on
 * first use (see cst_string_add). */
CST_FN uint32_t cst_intern_string(cst_writer *w, const char *s, size_t len)
{
    uint64_t h = cst_fnv1a(s, len);
    if (w->str_index_cap) {
        size_t mask = w->str_index_cap - 1;
        for (size_t i = (size_t)h & mask; w->str_index[i]; i = (i + 1) & mask) {
            cst_string_entry *e = &w->str_entries[w->str_index[i] - 1];
            if (e->hash == h && e->len == len && memcmp(e->s, s, len) == 0)
                return e->id;
        }
    }
    return cst_string_add(w, s, len, h, 1);
}

/* Adds a string that will not be asked for again (the MPI wrapper's communicator member
 * lists, each unique) under a new id, keeping no copy: the writer's memory does not grow with
 * it once it is written. Same bytes as cst_intern_string for a string never seen before; an
 * identical string added again gets another id. */
CST_FN uint32_t cst_add_string(cst_writer *w, const char *s, size_t len)
{
    return cst_string_add(w, s, len, 0, 0);
}

CST_FN uint32_t cst_intern_cstr(cst_writer *w, const char *s)
{
    return cst_intern_string(w, s, strlen(s));
}

/* The table index of a call-site address, adding it on first use; CST_NO_SITE once the
 * table's 65535 entries are used up (counted in sites_overflowed) or out of memory. */
CST_FN uint16_t cst_intern_site(cst_writer *w, uint64_t address)
{
    int saved = errno;
    cst_map_entry *e = cst_map_get(&w->site_map, address);
    if (e)
        return (uint16_t)e->val;
    if (w->site_map.len >= CST_NO_SITE) {
        w->sites_overflowed++;
        return CST_NO_SITE;
    }
    uint16_t id = (uint16_t)w->site_map.len;
    if (cst_bytes_reserve(&w->sites.pending, CST_SITE_ENTRY_LEN) != 0 ||
        !cst_map_put(&w->site_map, address, id, 0)) {
        errno = saved;
        return CST_NO_SITE;
    }
    cst_bytes *p = &w->sites.pending;
    cst_put32(p->p + p->len, id);
    cst_put32(p->p + p->len + 4, 0);
    cst_put64(p->p + p->len + 8, address);
    p->len += CST_SITE_ENTRY_LEN;
    w->sites.count++;
    errno = saved;
    return id;
}

CST_FN void cst_note_dropped(cst_writer *w, uint64_t n)
{
    w->dropped += n;
    uint32_t n32 = n > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)n;
    w->dropped_since_chunk =
        (w->dropped_since_chunk > 0xFFFFFFFFu - n32) ? 0xFFFFFFFFu : w->dropped_since_chunk + n32;
}

/* Counts events lost before they reached the writer. */
CST_FN void cst_count_dropped(cst_writer *w, uint64_t n)
{
    cst_note_dropped(w, n);
}

CST_FN void cst_discard_buffer(cst_writer *w)
{
    w->buffered = 0;
}

CST_FN int cst_append_chunk(cst_bytes *out, uint16_t kind, uint32_t count, const uint8_t *payload,
                            uint32_t len)
{
    if (cst_bytes_reserve(out, CST_CHUNK_HEADER_LEN + len) != 0)
        return -1;
    cst_chunk_header_encode(out->p + out->len, kind, payload, len, count, 0);
    memcpy(out->p + out->len + CST_CHUNK_HEADER_LEN, payload, len);
    out->len += CST_CHUNK_HEADER_LEN + len;
    return 0;
}

/* Writes pending tables and the buffered events in one write(2) of whole chunks. */
CST_FN int cst_write_pending(cst_writer *w)
{
    int has_events = w->buffered > 0 || w->dropped_since_chunk > 0;
    size_t events_len = CST_CHUNK_HEADER_LEN + (size_t)w->buffered * CST_RECORD_LEN;
    if (has_events)
        cst_chunk_header_encode(w->buf, CST_CHUNK_EVENTS, w->buf + CST_CHUNK_HEADER_LEN,
                                w->buffered * CST_RECORD_LEN, w->buffered,
                                w->dropped_since_chunk);
    uint32_t tables = w->strings.count + w->sites.count;
    size_t written;
    if (tables == 0) {
        if (!has_events)
            return 0;
        if (cst_write_all(w->fd, w->buf, events_len) != 0)
            return -1;
        written = events_len;
    } else {
        w->scratch.len = 0;
        if (w->strings.count > 0 &&
            cst_append_chunk(&w->scratch, CST_CHUNK_STRINGS, w->strings.count,
                             w->strings.pending.p, (uint32_t)w->strings.pending.len) != 0)
            return -1;
        if (w->sites.count > 0 &&
            cst_append_chunk(&w->scratch, CST_CHUNK_SITES, w->sites.count, w->sites.pending.p,
                             (uint32_t)w->sites.pending.len) != 0)
            return -1;
        if (has_events) {
            if (cst_bytes_reserve(&w->scratch, events_len) != 0)
                return -1;
            memcpy(w->scratch.p + w->scratch.len, w->buf, events_len);
            w->scratch.len += events_len;
        }
        if (cst_write_all(w->fd, w->scratch.p, w->scratch.len) != 0)
            return -1;
        w->strings.pending.len = 0;
        w->strings.written += w->strings.count;
        w->strings.count = 0;
        w->sites.pending.len = 0;
        w->sites.written += w->sites.count;
        w->sites.count = 0;
        written = w->scratch.len;
    }
    w->bytes += written;
    if (has_events) {
        w->events += w->buffered;
        cst_discard_buffer(w);
        w->dropped_since_chunk = 0;
    }
    return 0;
}

/* Writes pending tables, then the buffered events, as whole chunks. On a write error the
 * buffered events are counted as dropped, the file is cut back to its last complete chunk
 * (pending table entries stay pending for the next try) and -1 is returned. */
CST_FN int cst_flush(cst_writer *w)
{
    int saved = errno;
    if (w->broken) {
        uint64_t lost = w->buffered;
        cst_discard_buffer(w);
        cst_note_dropped(w, lost);
        errno = saved;
        return -1;
    }
    if (cst_write_pending(w) != 0) {
        if (!w->first_error)
            w->first_error = errno ? errno : EIO;
        if (cst_rewind_to(w->fd, w->bytes) != 0)
            w->broken = 1;
        uint64_t lost = w->buffered;
        cst_discard_buffer(w);
        cst_note_dropped(w, lost);
        errno = saved;
        return -1;
    }
    errno = saved;
    return 0;
}

/* Appends one record; flushes first if the buffer is full. Never fails: an event that cannot
 * be kept is counted as dropped. */
CST_FN inline void cst_push(cst_writer *w, uint64_t ts, uint8_t kind, uint8_t aux, uint16_t site,
                            uint32_t obj)
{
    if (w->buffered == w->chunk_events)
        (void)cst_flush(w);
    cst_record_encode(w->buf + CST_CHUNK_HEADER_LEN + (size_t)w->buffered * CST_RECORD_LEN, ts,
                      kind, aux, site, obj);
    w->buffered++;
}

/* Flushes, then writes the trailer (end_time = the clock at close). Returns 0 when the trailer
 * was written; -1 otherwise (the file then ends at its last complete chunk). The counts stay
 * in w->events / w->dropped. Does not close the fd. */
CST_FN int cst_finish(cst_writer *w, uint64_t end_time)
{
    int saved = errno;
    (void)cst_flush(w);
    if (w->broken) {
        errno = saved;
        return -1;
    }
    uint8_t t[CST_TRAILER_LEN];
    memset(t, 0, sizeof t);
    cst_put64(t, w->events);
    cst_put64(t + 8, w->dropped);
    cst_put64(t + 16, end_time);
    cst_put32(t + 24, w->strings.written);
    cst_put32(t + 28, w->sites.written);
    cst_put32(t + 32, 0); /* objects */
    uint8_t chunk[CST_CHUNK_HEADER_LEN + CST_TRAILER_LEN];
    cst_chunk_header_encode(chunk, CST_CHUNK_TRAILER, t, CST_TRAILER_LEN, 0, 0);
    memcpy(chunk + CST_CHUNK_HEADER_LEN, t, CST_TRAILER_LEN);
    int rc = 0;
    if (cst_write_all(w->fd, chunk, sizeof chunk) == 0) {
        w->bytes += sizeof chunk;
    } else {
        if (!w->first_error)
            w->first_error = errno ? errno : EIO;
        (void)cst_rewind_to(w->fd, w->bytes);
        rc = -1;
    }
    errno = saved;
    return rc;
}

/* Frees the writer's memory (not the fd). */
CST_FN void cst_free(cst_writer *w)
{
    free(w->buf);
    free(w->strings.pending.p);
    free(w->sites.pending.p);
    free(w->scratch.p);
    for (size_t i = 0; i < w->str_len; i++)
        free(w->str_entries[i].s);
    free(w->str_entries);
    free(w->str_index);
    cst_map_free(&w->site_map);
    memset(w, 0, sizeof *w);
    w->fd = -1;
}

/* ---------------------------------------------------------------- MPI record encoding */

/* formats.md §2.4. These are the helpers both mpi/contend_mpi.c and mpi/test_vectors.c use,
 * so the vectors pin the wrapper's encoding. */

#define CST_MPI_VALUE_MAX ((1ULL << 48) - 1)

/* A signed value (rank, tag) as 48-bit two's complement: returns the 48 bits. */
CST_FN inline uint64_t cst_mpi_signed48(int64_t v)
{
    return (uint64_t)v & CST_MPI_VALUE_MAX;
}

/* An unsigned value (byte count, id) saturated at 2^48 - 1. */
CST_FN inline uint64_t cst_mpi_unsigned48(uint64_t v)
{
    return v > CST_MPI_VALUE_MAX ? CST_MPI_VALUE_MAX : v;
}

/* Each helper encodes one record (16 bytes) into `out`. */
CST_FN inline void cst_mpi_enter(uint8_t out[16], uint64_t ts, uint8_t func, uint16_t site,
                                 uint32_t comm)
{
    cst_record_encode(out, ts, CST_EV_MPI_ENTER, func, site, comm);
}

/* `bits48` from cst_mpi_signed48 or cst_mpi_unsigned48: site = bits 32..47, obj = 0..31. */
CST_FN inline void cst_mpi_arg(uint8_t out[16], uint64_t ts, uint8_t code, uint64_t bits48)
{
    cst_record_encode(out, ts, CST_EV_MPI_ARG, code, (uint16_t)(bits48 >> 32),
                      (uint32_t)bits48);
}

CST_FN inline void cst_mpi_exit(uint8_t out[16], uint64_t ts, uint8_t func, int32_t rc)
{
    cst_record_encode(out, ts, CST_EV_MPI_EXIT, func, CST_NO_SITE, (uint32_t)rc);
}

/* aux 0 defined, 1 freed. */
CST_FN inline void cst_mpi_comm(uint8_t out[16], uint64_t ts, uint8_t freed, uint32_t local_id)
{
    cst_record_encode(out, ts, CST_EV_MPI_COMM, freed, CST_NO_SITE, local_id);
}

CST_FN inline void cst_mpi_comm_members(uint8_t out[16], uint64_t ts, uint32_t string_id)
{
    cst_record_encode(out, ts, CST_EV_MPI_COMM_MEMBERS, 0, CST_NO_SITE, string_id);
}

/* The three clock records: mpi-clock, then the offset's low and high halves. */
CST_FN inline void cst_mpi_clock(uint8_t out[3][16], uint64_t ts, uint8_t phase,
                                 uint64_t round_trips, uint64_t best_rtt_ns, int64_t offset_ns)
{
    uint16_t trips = round_trips > 0xFFFE ? 0xFFFE : (uint16_t)round_trips;
    uint32_t rtt = best_rtt_ns > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)best_rtt_ns;
    cst_record_encode(out[0], ts, CST_EV_MPI_CLOCK, phase, trips, rtt);
    cst_record_encode(out[1], ts, CST_EV_MPI_CLOCK_OFFSET, 0, CST_NO_SITE, (uint32_t)offset_ns);
    cst_record_encode(out[2], ts, CST_EV_MPI_CLOCK_OFFSET, 1, CST_NO_SITE,
                      (uint32_t)((uint64_t)offset_ns >> 32));
}

/* Appends an encoded record to the writer (flushing first if full, as cst_push). */
CST_FN inline void cst_push_encoded(cst_writer *w, const uint8_t rec[16])
{
    if (w->buffered == w->chunk_events)
        (void)cst_flush(w);
    memcpy(w->buf + CST_CHUNK_HEADER_LEN + (size_t)w->buffered * CST_RECORD_LEN, rec, 16);
    w->buffered++;
}

#endif /* CONTEND_CST_WRITER_H */
