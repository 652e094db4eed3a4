/*
 * Byte-level test vectors for the MPI records (docs/formats.md §2.4) and the C stream writer.
 *
 *   gcc -O2 -Wall -Werror -o test_vectors mpi/test_vectors.c && ./test_vectors out.cst
 *
 * Builds call groups with the encoding helpers of cst_writer.h (the ones mpi/contend_mpi.c
 * uses), checks every record's 16 bytes against the vectors below (exit 1 naming the first
 * mismatch), then writes a whole stream to argv[1]. crates/trace/tests/mpi_c_writer.rs reads
 * that stream with the Rust reader and compares it byte for byte with trace::StreamWriter's.
 * No MPI needed.
 */
#include "cst_writer.h"

#include <fcntl.h>
#include <stdio.h>

#define F_SEND 10
#define F_IRECV 24
#define A_DEST 1
#define A_SEND_TAG 2
#define A_BYTES_SENT 3
#define A_SOURCE 4
#define A_RECV_TAG 5
#define A_REQUEST_CREATED 7



static void check(const char *name, const uint8_t rec[16], const char *hex)
{
    char got[33];
    for (int i = 0; i < 16; i++)
        snprintf(got + 2 * i, 3, "%02x", rec[i]);
    if (strcmp(got, hex) != 0) {
        fprintf(stderr, "test_vectors: %s: got %s, expected %s\n", name, got, hex);
        exit(1);
    }
}

/* Group A: MPI_Send of 4096 bytes to world rank 1, tag 7, comm 0, 1000..1500, site 3. */
static int group_a(uint8_t out[][16])
{
    int n = 0;
    cst_mpi_enter(out[n++], 1000, F_SEND, 3, 0);
    cst_mpi_arg(out[n++], 1000, A_DEST, cst_mpi_signed48(1));
    cst_mpi_arg(out[n++], 1000, A_SEND_TAG, cst_mpi_signed48(7));
    cst_mpi_arg(out[n++], 1000, A_BYTES_SENT, cst_mpi_unsigned48(4096));
    cst_mpi_exit(out[n++], 1500, F_SEND, 0);
    return n;
}

/* Group B: MPI_Irecv(ANY_SOURCE, ANY_TAG) on comm 2, request 5, 2000..2100, site 4. */
static int group_b(uint8_t out[][16])
{
    int n = 0;
    cst_mpi_enter(out[n++], 2000, F_IRECV, 4, 2);
    cst_mpi_arg(out[n++], 2000, A_SOURCE, cst_mpi_signed48(-1));
    cst_mpi_arg(out[n++], 2000, A_RECV_TAG, cst_mpi_signed48(-1));
    cst_mpi_arg(out[n++], 2000, A_REQUEST_CREATED, cst_mpi_unsigned48(5));
    cst_mpi_exit(out[n++], 2100, F_IRECV, 0);
    return n;
}

/* Group C: the clock at Init, ts 5000, 10 round trips, best 2400 ns, offset -123456789012. */
static int group_c(uint8_t out[][16])
{
    cst_mpi_clock((uint8_t(*)[16])out, 5000, 0, 10, 2400, -123456789012LL);
    return 3;
}

static const char *const vec_a[] = {
    "e803000000000000140a030000000000", "e8030000000000001501000001000000",
    "e8030000000000001502000007000000", "e8030000000000001503000000100000",
    "dc05000000000000160affff00000000",
};
static const char *const vec_b[] = {
    "d0070000000000001418040002000000", "d0070000000000001504ffffffffffff",
    "d0070000000000001505ffffffffffff", "d0070000000000001507000005000000",
    "34080000000000001618ffff00000000",
};
static const char *const vec_c[] = {
    "881300000000000019000a0060090000",
    "88130000000000001a00ffffece56641",
    "88130000000000001a01ffffe3ffffff",
};

static void check_group(const char *group, uint8_t recs[][16], int n, const char *const *hex,
                        int expected)
{
    if (n != expected) {
        fprintf(stderr, "test_vectors: group %s has %d records, expected %d\n", group, n,
                expected);
        exit(1);
    }
    for (int i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "group %s record %d", group, i);
        check(name, recs[i], hex[i]);
    }
}

/* A second stream, for several chunks: 10000 marks with call sites, in the default chunk of
 * 4096 records (two flushes by a full buffer), new strings and sites appearing after the
 * first flush, an explicit flush at record 7000, then finish(99999). The Rust test writes the
 * same with trace::StreamWriter. */
static int write_many(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    cst_header h = {
        .kind = CST_STREAM_RANK,
        .clock = CST_CLOCK_MONOTONIC,
        .clock_hz = 1000000000u,
        .pid = 4242,
        .tid = 0,
        .rank = 3,
        .base_time = 1000,
    };
    cst_writer w;
    if (cst_open(&w, fd, &h, CST_DEFAULT_CHUNK_EVENTS) != 0) {
        perror("cst_open");
        return 1;
    }
    for (uint32_t i = 0; i < 10000; i++) {
        char label[32];
        if (i < 5000)
            snprintf(label, sizeof label, "%s", i % 2 ? "odd" : "even");
        else
            snprintf(label, sizeof label, "late %u", i % 7);
        uint32_t s = cst_intern_cstr(&w, label);
        uint16_t site = cst_intern_site(&w, 0x400000 + (uint64_t)(i % (i < 6000 ? 3 : 11)) * 16);
        cst_push(&w, 1000 + (uint64_t)i * 10, CST_EV_MARK, (uint8_t)(i % 256), site, s);
        if (i == 7000 && cst_flush(&w) != 0)
            return 1;
    }
    if (cst_finish(&w, 99999) != 0)
        return 1;
    cst_free(&w);
    return close(fd) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    uint8_t a[8][16], b[8][16], c[8][16];
    int na = group_a(a), nb = group_b(b), nc = group_c(c);
    check_group("A", a, na, vec_a, 5);
    check_group("B", b, nb, vec_b, 5);
    check_group("C", c, nc, vec_c, 3);

    /* The CRC is zlib's: crc32("123456789") = 0xCBF43926. */
    if (cst_crc32(0, "123456789", 9) != 0xCBF43926u ||
        cst_crc32(cst_crc32(0, "1234", 4), "56789", 5) != 0xCBF43926u) {
        fprintf(stderr, "test_vectors: CRC-32 check value mismatch\n");
        return 1;
    }
    if (argc < 2) {
        printf("test_vectors: all records match (no output path given)\n");
        return 0;
    }

    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    cst_header h = {
        .kind = CST_STREAM_RANK,
        .clock = CST_CLOCK_MONOTONIC,
        .clock_hz = 1000000000u,
        .pid = 4242,
        .tid = 0,
        .rank = 1,
        .base_time = 1000,
    };
    cst_writer w;
    if (cst_open(&w, fd, &h, CST_DEFAULT_CHUNK_EVENTS) != 0) {
        perror("cst_open");
        return 1;
    }
    uint8_t r[16];
    uint32_t world = cst_intern_cstr(&w, "world 0 1");
    cst_mpi_comm(r, 1000, 0, 0);
    cst_push_encoded(&w, r);
    cst_mpi_comm_members(r, 1000, world);
    cst_push_encoded(&w, r);
    for (uint64_t addr = 0x401000; addr <= 0x401040; addr += 0x10)
        (void)cst_intern_site(&w, addr);
    for (int i = 0; i < na; i++)
        cst_push_encoded(&w, a[i]);
    for (int i = 0; i < nb; i++)
        cst_push_encoded(&w, b[i]);
    for (int i = 0; i < nc; i++)
        cst_push_encoded(&w, c[i]);
    uint32_t host = cst_intern_cstr(&w, "mpi.host=test");
    cst_push(&w, 5100, CST_EV_MARK, 0, CST_NO_SITE, host);
    if (cst_flush(&w) != 0 || cst_finish(&w, 6000) != 0) {
        fprintf(stderr, "test_vectors: writing %s failed\n", argv[1]);
        return 1;
    }
    cst_free(&w);
    if (close(fd) != 0) {
        perror("close");
        return 1;
    }
    if (argc > 2 && write_many(argv[2]) != 0)
        return 1;
    printf("test_vectors: all records match; stream written to %s\n", argv[1]);
    return 0;
}
