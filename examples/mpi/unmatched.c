/*
 * unmatched: messages whose partner is not in the traces, which the analysis must count and
 * show, not guess.
 *
 * 2 ranks.
 * - Rank 0 sends one int to rank 1 with MPI_Send (tag 5, small enough to be sent eagerly, so
 *   the send returns) that rank 1 never receives: an unmatched send.
 * - Rank 0 then sleeps DELAY_MS and sends rank 1 another int (tag 6) with PMPI_Send, which
 *   the wrapper does not see; rank 1 receives it with MPI_Recv, waiting about DELAY_MS: a
 *   receive whose send is not in the traces. Had the analysis paired it with the tag-5 send,
 *   it would report a Late Sender of about DELAY_MS; it must report none.
 * Then a barrier and MPI_Finalize (the tag-5 message is still queued at rank 1: MPI allows
 * this for a send that completed).
 *
 * Expected: 1 unmatched send (rank 0 to rank 1, tag 5), 1 unmatched receive (rank 1 from
 * rank 0, tag 6), no point-to-point wait state. Prints `sent: unmatched_sends=1
 * unmatched_receives=1` from rank 0 at the end.
 *
 * usage: mpirun -np 2 unmatched [DELAY_MS]     default 100
 * build: mpicc -O2 -g -Wall -Wextra unmatched.c -o unmatched
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    long delay_ms = argc > 1 ? atol(argv[1]) : 100;
    if (size != 2 || delay_ms < 0 || delay_ms > 60000) {
        if (rank == 0)
            fprintf(stderr, "usage: mpirun -np 2 unmatched [delay_ms]\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int msg = 42;
    if (rank == 0) {
        MPI_Send(&msg, 1, MPI_INT, 1, 5, MPI_COMM_WORLD); /* never received */
        struct timespec req = {delay_ms / 1000, (delay_ms % 1000) * 1000000L}, rem;
        while (nanosleep(&req, &rem) != 0 && errno == EINTR)
            req = rem;
        PMPI_Send(&msg, 1, MPI_INT, 1, 6, MPI_COMM_WORLD); /* unseen by the wrapper */
    } else {
        MPI_Recv(&msg, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("sent: unmatched_sends=1 unmatched_receives=1\n");
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
