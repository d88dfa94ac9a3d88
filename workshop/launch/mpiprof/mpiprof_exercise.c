/*
 * A small MPI program with a known call pattern, to check the mpiprof library (tests) and to
 * time it (benchmarks/mpi_profiler_overhead.py). Not part of the profiler itself.
 *
 *   exercise SMALL  Each rank makes exactly, in MPI_COMM_WORLD and a duplicate of it:
 *       MPI_Comm_rank 1, MPI_Comm_size 1,
 *       MPI_Allreduce SMALL x 8 bytes (one long long, as Horovod's negotiation) on the main
 *         thread, plus SMALL x 8 bytes on a second thread when MPI_THREAD_MULTIPLE is provided,
 *         plus 3 x 4 MiB (1 Mi floats),
 *       MPI_Iallreduce 2 x 4 bytes, MPI_Wait 2,
 *       MPI_Bcast 2 (4 bytes, 1000 bytes), MPI_Barrier 3, MPI_Reduce 1 x 80 bytes,
 *       MPI_Gather 1 x 4 bytes, MPI_Gatherv 1 x (rank+1) bytes,
 *       MPI_Allgather 1 x 8 bytes, MPI_Allgatherv 1 x 16 bytes,
 *       MPI_Alltoall 1 x 4 bytes per peer, MPI_Alltoallv 1 x 8 bytes per peer,
 *       MPI_Sendrecv 1 x 64 bytes (ring), MPI_Isend 1 x 128 bytes, MPI_Irecv 1 x 128 bytes,
 *       MPI_Waitall 1, MPI_Send 1 x 256 bytes and MPI_Recv 1 x 256 bytes (ring, even ranks
 *       first), and prints "threads=<provided>" on rank 0.
 *   bench ITERS BYTES  ITERS MPI_Allreduce of BYTES bytes (floats) after 10 warm-up calls;
 *       rank 0 prints "seconds=<time of the loop>".
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int small_calls = 0;
static MPI_Comm thread_comm;

static void *thread_main(void *arg) {
    (void)arg;
    long long v = 1, out = 0;
    for (int i = 0; i < small_calls; i++)
        MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG_INT, MPI_BAND, thread_comm);
    return NULL;
}

static int exercise(int small) {
    int rank, size, provided;
    MPI_Query_thread(&provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    small_calls = small;
    pthread_t thread;
    int threaded = provided == MPI_THREAD_MULTIPLE;
    if (threaded) {
        MPI_Comm_dup(MPI_COMM_WORLD, &thread_comm);
        pthread_create(&thread, NULL, thread_main, NULL);
    }
    long long v = 1, out = 0;
    for (int i = 0; i < small; i++)
        MPI_Allreduce(&v, &out, 1, MPI_LONG_LONG_INT, MPI_BAND, MPI_COMM_WORLD);
    if (threaded) pthread_join(thread, NULL);

    const int big = 1 << 20;
    float *fa = calloc(big, sizeof(float)), *fb = calloc(big, sizeof(float));
    for (int i = 0; i < 3; i++) MPI_Allreduce(fa, fb, big, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);

    int iv = rank, io = 0;
    MPI_Request req;
    for (int i = 0; i < 2; i++) {
        MPI_Iallreduce(&iv, &io, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    char text[1000];
    memset(text, 'x', sizeof text);
    MPI_Bcast(&iv, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(text, 1000, MPI_CHAR, 0, MPI_COMM_WORLD);
    for (int i = 0; i < 3; i++) MPI_Barrier(MPI_COMM_WORLD);
    double d10[10] = {0}, r10[10];
    MPI_Reduce(d10, r10, 10, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    int *counts = calloc(size, sizeof(int)), *displs = calloc(size, sizeof(int));
    int *ints = calloc(4 * size, sizeof(int));
    char *bytes = calloc((size_t)size * (size + 1), 1);
    for (int i = 0, off = 0; i < size; i++) {
        counts[i] = i + 1;
        displs[i] = off;
        off += i + 1;
    }
    MPI_Gather(&iv, 1, MPI_INT, ints, 1, MPI_INT, 0, MPI_COMM_WORLD);
    char mine[64];
    memset(mine, 'y', sizeof mine);
    MPI_Gatherv(mine, rank + 1, MPI_CHAR, bytes, counts, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
    long long two[2] = {rank, rank};
    long long *all2 = calloc(2 * size, sizeof(long long));
    MPI_Allgather(&two[0], 1, MPI_LONG_LONG_INT, all2, 1, MPI_LONG_LONG_INT, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++) {
        counts[i] = 2;
        displs[i] = 2 * i;
    }
    MPI_Allgatherv(two, 2, MPI_LONG_LONG_INT, all2, counts, displs, MPI_LONG_LONG_INT,
                   MPI_COMM_WORLD);
    int *a2a = calloc(2 * size, sizeof(int)), *a2b = calloc(2 * size, sizeof(int));
    MPI_Alltoall(a2a, 1, MPI_INT, a2b, 1, MPI_INT, MPI_COMM_WORLD);
    MPI_Alltoallv(a2a, counts, displs, MPI_INT, a2b, counts, displs, MPI_INT, MPI_COMM_WORLD);

    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    char s64[64] = {0}, r64[64], s128[128] = {0}, r128[128], s256[256] = {0}, r256[256];
    MPI_Sendrecv(s64, 64, MPI_BYTE, next, 1, r64, 64, MPI_BYTE, prev, 1, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Request reqs[2];
    MPI_Irecv(r128, 128, MPI_BYTE, prev, 2, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(s128, 128, MPI_BYTE, next, 2, MPI_COMM_WORLD, &reqs[1]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    if (rank % 2 == 0) {
        MPI_Send(s256, 256, MPI_BYTE, next, 3, MPI_COMM_WORLD);
        MPI_Recv(r256, 256, MPI_BYTE, prev, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(r256, 256, MPI_BYTE, prev, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(s256, 256, MPI_BYTE, next, 3, MPI_COMM_WORLD);
    }
    if (rank == 0) printf("threads=%d\n", threaded ? 2 : 1);
    if (threaded) MPI_Comm_free(&thread_comm);
    free(fa), free(fb), free(counts), free(displs), free(ints), free(bytes), free(all2);
    free(a2a), free(a2b);
    return 0;
}

static int bench(long iters, long nbytes) {
    int rank;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank); /* PMPI_: not counted, keeps the loop pure */
    int count = (int)(nbytes / (long)sizeof(float));
    if (count < 1) count = 1;
    float *a = calloc(count, sizeof(float)), *b = calloc(count, sizeof(float));
    for (int i = 0; i < 10; i++) MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = PMPI_Wtime();
    for (long i = 0; i < iters; i++)
        MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = PMPI_Wtime() - t0;
    double tmax = 0;
    PMPI_Reduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) printf("seconds=%.6f\n", tmax);
    free(a), free(b);
    return 0;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    int rc = 2;
    if (argc >= 3 && strcmp(argv[1], "exercise") == 0) {
        rc = exercise(atoi(argv[2]));
    } else if (argc >= 4 && strcmp(argv[1], "bench") == 0) {
        rc = bench(atol(argv[2]), atol(argv[3]));
    } else {
        fprintf(stderr, "usage: %s exercise SMALL | bench ITERS BYTES\n", argv[0]);
    }
    MPI_Finalize();
    return rc;
}
