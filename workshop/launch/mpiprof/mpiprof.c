/*
 * mpiprof: a small PMPI interposition profiler writing mpitrace-layout text files.
 *
 * Preload it (LD_PRELOAD=libmpiprof.so) into every rank of an MPI program. It counts calls,
 * bytes and time of the MPI routines below, and at MPI_Finalize writes
 * <dir>/mpi_profile.<jobid>.<rank> in the layout of IBM's mpitrace (github.com/IBM/mpitrace):
 * a routine table, the totals, a message-size distribution (power-of-two bins), and in rank 0's
 * file the all-task summary. As in mpitrace, only rank 0 and the ranks with the minimum, median
 * and maximum communication time write a file, unless SAVE_ALL_TASKS=yes.
 *
 * Environment:
 *   WORKSHOP_MPI_PROFILE_DIR    directory for the files (default: the current directory)
 *   WORKSHOP_MPI_PROFILE_JOBID  job id in the file names; else COBALT_JOBID, PBS_JOBID,
 *                               SLURM_JOB_ID; else rank 0's process id
 *   SAVE_ALL_TASKS=yes          every rank writes its file
 *
 * Bytes counted per call (what this rank sends or contributes): point-to-point sends, Bcast,
 * Reduce, Allreduce, Scan: count x type size; Recv: bytes actually received; Irecv: posted size;
 * Gather(v), Allgather(v), Scatter(v) at the sender: sendcount x type size (with MPI_IN_PLACE:
 * this rank's receive block); Alltoall: sendcount x type size x communicator size; Alltoallv,
 * Reduce_scatter: the sum of the counts; Barrier, Wait*, Test*, Probe, Comm_rank/size: 0.
 *
 * Counters are updated with atomic adds, so calls from several threads (MPI_THREAD_MULTIPLE,
 * as Horovod's background thread plus the framework's) are counted exactly.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NBINS 48
#define HOSTLEN 64
#define JOBLEN 64

/* X-macro: the order here is the order of the routine table. HAS_BYTES=1 routines get a
 * message-size distribution. */
#define ROUTINES(X)                       \
    X(Comm_rank, 0)                       \
    X(Comm_size, 0)                       \
    X(Send, 1)                            \
    X(Ssend, 1)                           \
    X(Rsend, 1)                           \
    X(Bsend, 1)                           \
    X(Isend, 1)                           \
    X(Issend, 1)                          \
    X(Recv, 1)                            \
    X(Irecv, 1)                           \
    X(Sendrecv, 1)                        \
    X(Sendrecv_replace, 1)                \
    X(Probe, 0)                           \
    X(Iprobe, 0)                          \
    X(Test, 0)                            \
    X(Testall, 0)                         \
    X(Testany, 0)                         \
    X(Testsome, 0)                        \
    X(Wait, 0)                            \
    X(Waitall, 0)                         \
    X(Waitany, 0)                         \
    X(Waitsome, 0)                        \
    X(Bcast, 1)                           \
    X(Barrier, 0)                         \
    X(Reduce, 1)                          \
    X(Allreduce, 1)                       \
    X(Reduce_scatter, 1)                  \
    X(Reduce_scatter_block, 1)            \
    X(Scan, 1)                            \
    X(Exscan, 1)                          \
    X(Gather, 1)                          \
    X(Gatherv, 1)                         \
    X(Scatter, 1)                         \
    X(Scatterv, 1)                        \
    X(Allgather, 1)                       \
    X(Allgatherv, 1)                      \
    X(Alltoall, 1)                        \
    X(Alltoallv, 1)                       \
    X(Ibcast, 1)                          \
    X(Ibarrier, 0)                        \
    X(Ireduce, 1)                         \
    X(Iallreduce, 1)                      \
    X(Iallgather, 1)                      \
    X(Iallgatherv, 1)                     \
    X(Ialltoall, 1)

enum {
#define ENUM_ENTRY(name, has_bytes) R_##name,
    ROUTINES(ENUM_ENTRY)
#undef ENUM_ENTRY
    NROUTINES
};

static const char *routine_names[NROUTINES] = {
#define NAME_ENTRY(name, has_bytes) "MPI_" #name,
    ROUTINES(NAME_ENTRY)
#undef NAME_ENTRY
};

static const int routine_has_bytes[NROUTINES] = {
#define BYTES_ENTRY(name, has_bytes) has_bytes,
    ROUTINES(BYTES_ENTRY)
#undef BYTES_ENTRY
};

typedef struct {
    uint64_t calls, bytes, ns;
    uint64_t bin_calls[NBINS], bin_bytes[NBINS], bin_ns[NBINS];
} counter_t;

static counter_t counters[NROUTINES];
static double t_init = -1.0; /* seconds on CLOCK_MONOTONIC at MPI_Init */

/* Per-task record gathered to rank 0 at MPI_Finalize. */
typedef struct {
    double comm_s, elapsed_s, user_s, system_s, mem_mib, switches;
    int taskid, cpu;
    char host[HOSTLEN];
} task_t;

static inline uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline int size_bin(uint64_t bytes) {
    if (bytes <= 4) return 0;
    int bin = (63 - __builtin_clzll(bytes - 1)) - 1; /* (2^(bin+1), 2^(bin+2)] */
    return bin < NBINS ? bin : NBINS - 1;
}

static inline void record(int routine, uint64_t bytes, uint64_t t0) {
    uint64_t ns = now_ns() - t0;
    counter_t *c = &counters[routine];
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&c->ns, ns, __ATOMIC_RELAXED);
    if (routine_has_bytes[routine]) {
        int bin = size_bin(bytes);
        __atomic_fetch_add(&c->bytes, bytes, __ATOMIC_RELAXED);
        __atomic_fetch_add(&c->bin_calls[bin], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&c->bin_bytes[bin], bytes, __ATOMIC_RELAXED);
        __atomic_fetch_add(&c->bin_ns[bin], ns, __ATOMIC_RELAXED);
    }
}

/* count x size of a datatype; 0 for MPI_DATATYPE_NULL or an error. */
static inline uint64_t type_bytes(int count, MPI_Datatype type) {
    int size = 0;
    if (count <= 0 || type == MPI_DATATYPE_NULL) return 0;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS || size < 0) return 0;
    return (uint64_t)count * (uint64_t)size;
}

static inline uint64_t sum_bytes(const int counts[], int n, MPI_Datatype type) {
    uint64_t total = 0;
    if (counts == NULL) return 0;
    for (int i = 0; i < n; i++) total += type_bytes(counts[i], type);
    return total;
}

static inline int comm_size(MPI_Comm comm) {
    int n = 0;
    PMPI_Comm_size(comm, &n);
    return n;
}

static inline int comm_rank(MPI_Comm comm) {
    int r = 0;
    PMPI_Comm_rank(comm, &r);
    return r;
}

static void mark_init(void) {
    if (t_init < 0) t_init = (double)now_ns() * 1e-9;
}

/* ---------------------------------------------------------------- init and rank queries */

int MPI_Init(int *argc, char ***argv) {
    mark_init();
    return PMPI_Init(argc, argv);
}

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    mark_init();
    return PMPI_Init_thread(argc, argv, required, provided);
}

int MPI_Comm_rank(MPI_Comm comm, int *rank) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Comm_rank(comm, rank);
    record(R_Comm_rank, 0, t0);
    return rc;
}

int MPI_Comm_size(MPI_Comm comm, int *size) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Comm_size(comm, size);
    record(R_Comm_size, 0, t0);
    return rc;
}

/* ---------------------------------------------------------------- point to point */

#define WRAP_SEND(name)                                                                  \
    int MPI_##name(const void *buf, int count, MPI_Datatype type, int dest, int tag,     \
                   MPI_Comm comm) {                                                      \
        uint64_t t0 = now_ns();                                                          \
        int rc = PMPI_##name(buf, count, type, dest, tag, comm);                         \
        record(R_##name, type_bytes(count, type), t0);                                   \
        return rc;                                                                       \
    }
WRAP_SEND(Send)
WRAP_SEND(Ssend)
WRAP_SEND(Rsend)
WRAP_SEND(Bsend)

#define WRAP_ISEND(name)                                                                 \
    int MPI_##name(const void *buf, int count, MPI_Datatype type, int dest, int tag,     \
                   MPI_Comm comm, MPI_Request *request) {                                \
        uint64_t t0 = now_ns();                                                          \
        int rc = PMPI_##name(buf, count, type, dest, tag, comm, request);                \
        record(R_##name, type_bytes(count, type), t0);                                   \
        return rc;                                                                       \
    }
WRAP_ISEND(Isend)
WRAP_ISEND(Issend)

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *status) {
    MPI_Status local;
    MPI_Status *st = (status == MPI_STATUS_IGNORE) ? &local : status;
    uint64_t t0 = now_ns();
    int rc = PMPI_Recv(buf, count, type, source, tag, comm, st);
    int received = 0;
    uint64_t bytes = type_bytes(count, type);
    if (rc == MPI_SUCCESS && PMPI_Get_count(st, MPI_BYTE, &received) == MPI_SUCCESS &&
        received != MPI_UNDEFINED)
        bytes = (uint64_t)received;
    record(R_Recv, bytes, t0);
    return rc;
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *request) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Irecv(buf, count, type, source, tag, comm, request);
    record(R_Irecv, type_bytes(count, type), t0);
    return rc;
}

int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest,
                 int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source,
                 int recvtag, MPI_Comm comm, MPI_Status *status) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                           recvtype, source, recvtag, comm, status);
    record(R_Sendrecv, type_bytes(sendcount, sendtype), t0);
    return rc;
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int sendtag,
                         int source, int recvtag, MPI_Comm comm, MPI_Status *status) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Sendrecv_replace(buf, count, type, dest, sendtag, source, recvtag, comm,
                                   status);
    record(R_Sendrecv_replace, type_bytes(count, type), t0);
    return rc;
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Probe(source, tag, comm, status);
    record(R_Probe, 0, t0);
    return rc;
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Iprobe(source, tag, comm, flag, status);
    record(R_Iprobe, 0, t0);
    return rc;
}

/* ---------------------------------------------------------------- completion */

int MPI_Wait(MPI_Request *request, MPI_Status *status) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Wait(request, status);
    record(R_Wait, 0, t0);
    return rc;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Waitall(count, requests, statuses);
    record(R_Waitall, 0, t0);
    return rc;
}

int MPI_Waitany(int count, MPI_Request requests[], int *index, MPI_Status *status) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Waitany(count, requests, index, status);
    record(R_Waitany, 0, t0);
    return rc;
}

int MPI_Waitsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                 MPI_Status statuses[]) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    record(R_Waitsome, 0, t0);
    return rc;
}

int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Test(request, flag, status);
    record(R_Test, 0, t0);
    return rc;
}

int MPI_Testall(int count, MPI_Request requests[], int *flag, MPI_Status statuses[]) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Testall(count, requests, flag, statuses);
    record(R_Testall, 0, t0);
    return rc;
}

int MPI_Testany(int count, MPI_Request requests[], int *index, int *flag, MPI_Status *status) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Testany(count, requests, index, flag, status);
    record(R_Testany, 0, t0);
    return rc;
}

int MPI_Testsome(int incount, MPI_Request requests[], int *outcount, int indices[],
                 MPI_Status statuses[]) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    record(R_Testsome, 0, t0);
    return rc;
}

/* ---------------------------------------------------------------- collectives */

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Bcast(buf, count, type, root, comm);
    record(R_Bcast, type_bytes(count, type), t0);
    return rc;
}

int MPI_Barrier(MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Barrier(comm);
    record(R_Barrier, 0, t0);
    return rc;
}

int MPI_Reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
               int root, MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
    record(R_Reduce, type_bytes(count, type), t0);
    return rc;
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
    record(R_Allreduce, type_bytes(count, type), t0);
    return rc;
}

int MPI_Reduce_scatter(const void *sendbuf, void *recvbuf, const int recvcounts[],
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
    record(R_Reduce_scatter, sum_bytes(recvcounts, comm_size(comm), type), t0);
    return rc;
}

int MPI_Reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                             MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
    record(R_Reduce_scatter_block, type_bytes(recvcount, type) * (uint64_t)comm_size(comm), t0);
    return rc;
}

int MPI_Scan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
             MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
    record(R_Scan, type_bytes(count, type), t0);
    return rc;
}

int MPI_Exscan(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
               MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
    record(R_Exscan, type_bytes(count, type), t0);
    return rc;
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    uint64_t bytes = sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype)
                                             : type_bytes(sendcount, sendtype);
    record(R_Gather, bytes, t0);
    return rc;
}

int MPI_Gatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                          root, comm);
    uint64_t bytes = 0;
    if (sendbuf == MPI_IN_PLACE) {
        if (recvcounts != NULL) bytes = type_bytes(recvcounts[comm_rank(comm)], recvtype);
    } else {
        bytes = type_bytes(sendcount, sendtype);
    }
    record(R_Gatherv, bytes, t0);
    return rc;
}

int MPI_Scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc =
        PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
    uint64_t bytes = comm_rank(comm) == root ? type_bytes(sendcount, sendtype) : 0;
    record(R_Scatter, bytes, t0);
    return rc;
}

int MPI_Scatterv(const void *sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                           root, comm);
    uint64_t bytes =
        comm_rank(comm) == root ? sum_bytes(sendcounts, comm_size(comm), sendtype) : 0;
    record(R_Scatterv, bytes, t0);
    return rc;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    uint64_t bytes = sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype)
                                             : type_bytes(sendcount, sendtype);
    record(R_Allgather, bytes, t0);
    return rc;
}

int MPI_Allgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                             recvtype, comm);
    uint64_t bytes = 0;
    if (sendbuf == MPI_IN_PLACE) {
        if (recvcounts != NULL) bytes = type_bytes(recvcounts[comm_rank(comm)], recvtype);
    } else {
        bytes = type_bytes(sendcount, sendtype);
    }
    record(R_Allgatherv, bytes, t0);
    return rc;
}

int MPI_Alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
    uint64_t bytes = sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype)
                                             : type_bytes(sendcount, sendtype);
    record(R_Alltoall, bytes * (uint64_t)comm_size(comm), t0);
    return rc;
}

int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                            recvtype, comm);
    uint64_t bytes = sendbuf == MPI_IN_PLACE ? sum_bytes(recvcounts, comm_size(comm), recvtype)
                                             : sum_bytes(sendcounts, comm_size(comm), sendtype);
    record(R_Alltoallv, bytes, t0);
    return rc;
}

/* ---------------------------------------------------------------- non-blocking collectives */

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request *request) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Ibcast(buf, count, type, root, comm, request);
    record(R_Ibcast, type_bytes(count, type), t0);
    return rc;
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *request) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Ibarrier(comm, request);
    record(R_Ibarrier, 0, t0);
    return rc;
}

int MPI_Ireduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *request) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, request);
    record(R_Ireduce, type_bytes(count, type), t0);
    return rc;
}

int MPI_Iallreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request *request) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request);
    record(R_Iallreduce, type_bytes(count, type), t0);
    return rc;
}

int MPI_Iallgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                             request);
    uint64_t bytes = sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype)
                                             : type_bytes(sendcount, sendtype);
    record(R_Iallgather, bytes, t0);
    return rc;
}

int MPI_Iallgatherv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request *request) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                              recvtype, comm, request);
    uint64_t bytes = 0;
    if (sendbuf == MPI_IN_PLACE) {
        if (recvcounts != NULL) bytes = type_bytes(recvcounts[comm_rank(comm)], recvtype);
    } else {
        bytes = type_bytes(sendcount, sendtype);
    }
    record(R_Iallgatherv, bytes, t0);
    return rc;
}

int MPI_Ialltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request) {
    uint64_t t0 = now_ns();
    int rc = PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                            request);
    uint64_t bytes = sendbuf == MPI_IN_PLACE ? type_bytes(recvcount, recvtype)
                                             : type_bytes(sendcount, sendtype);
    record(R_Ialltoall, bytes * (uint64_t)comm_size(comm), t0);
    return rc;
}

/* ---------------------------------------------------------------- the report */

static const char *DASHES71 =
    "-----------------------------------------------------------------------";
static const char *DASHES65 =
    "-----------------------------------------------------------------";

static void job_id(char out[JOBLEN]) {
    const char *vars[] = {"WORKSHOP_MPI_PROFILE_JOBID", "COBALT_JOBID", "PBS_JOBID",
                          "SLURM_JOB_ID"};
    const char *value = NULL;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0] && value == NULL; i++) {
        const char *v = getenv(vars[i]);
        if (v != NULL && v[0] != '\0') value = v;
    }
    if (value == NULL) {
        snprintf(out, JOBLEN, "%ld", (long)getpid());
        return;
    }
    /* Keep file names portable: anything but [A-Za-z0-9._-] becomes '_'. */
    size_t n = 0;
    for (; value[n] != '\0' && n < JOBLEN - 1; n++) {
        char ch = value[n];
        int ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
                 ch == '.' || ch == '-' || ch == '_';
        out[n] = ok ? ch : '_';
    }
    out[n] = '\0';
}

static int by_comm(const void *a, const void *b) {
    const task_t *x = a, *y = b;
    if (x->comm_s < y->comm_s) return -1;
    if (x->comm_s > y->comm_s) return 1;
    return x->taskid - y->taskid;
}

static void write_routine_table(FILE *f) {
    fprintf(f, "%s\n", DASHES71);
    fprintf(f, "MPI Routine                        #calls     avg. bytes      time(sec)\n");
    fprintf(f, "%s\n", DASHES71);
    for (int r = 0; r < NROUTINES; r++) {
        const counter_t *c = &counters[r];
        if (c->calls == 0) continue;
        double avg = (double)c->bytes / (double)c->calls;
        fprintf(f, "%-30s %10llu %14.1f %14.3f\n", routine_names[r], (unsigned long long)c->calls,
                avg, (double)c->ns * 1e-9);
    }
    fprintf(f, "%s\n", DASHES65);
}

static void write_size_tables(FILE *f) {
    fprintf(f, "%s\n", DASHES65);
    fprintf(f, "Message size distributions:\n\n");
    for (int r = 0; r < NROUTINES; r++) {
        const counter_t *c = &counters[r];
        if (!routine_has_bytes[r] || c->calls == 0 || c->bytes == 0) continue;
        fprintf(f, "%-26s#calls    avg. bytes      time(sec)\n", routine_names[r]);
        for (int b = 0; b < NBINS; b++) {
            if (c->bin_calls[b] == 0) continue;
            fprintf(f, "%32llu%14.1f%15.3f\n", (unsigned long long)c->bin_calls[b],
                    (double)c->bin_bytes[b] / (double)c->bin_calls[b], (double)c->bin_ns[b] * 1e-9);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "%s\n", DASHES65);
}

static void write_profile(const char *path, int rank, int ntasks, const task_t *me,
                          const int roles[3], const task_t *all, const int extremes[3]) {
    static const char *role_names[3] = {"minimum", "median", "maximum"};
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "mpiprof: rank %d cannot write %s: %s\n", rank, path, strerror(errno));
        return;
    }
    fprintf(f, "Data for MPI rank %d of %d:\n", rank, ntasks);
    fprintf(f, "Times from MPI_Init() to MPI_Finalize().\n");
    write_routine_table(f);
    for (int k = 0; k < 3; k++)
        if (roles[k])
            fprintf(f, "MPI task %d of %d had the %s communication time.\n", rank, ntasks,
                    role_names[k]);
    fprintf(f, "total communication time = %.3f seconds.\n", me->comm_s);
    fprintf(f, "total elapsed time       = %.3f seconds.\n", me->elapsed_s);
    fprintf(f, "user cpu time            = %.3f seconds.\n", me->user_s);
    fprintf(f, "system time              = %.3f seconds.\n", me->system_s);
    fprintf(f, "max resident set size    = %.3f MiB.\n\n", me->mem_mib);
    write_size_tables(f);
    if (all != NULL) {
        int mem_rank = 0, elapsed_rank = 0;
        for (int i = 1; i < ntasks; i++) {
            if (all[i].mem_mib > all[mem_rank].mem_mib) mem_rank = i;
            if (all[i].elapsed_s > all[elapsed_rank].elapsed_s) elapsed_rank = i;
        }
        fprintf(f, "\nSummary for all tasks:\n\n");
        fprintf(f, "  Rank %d reported the largest memory utilization : %.2f MiB\n", mem_rank,
                all[mem_rank].mem_mib);
        fprintf(f, "  Rank %d reported the largest elapsed time : %.2f sec\n\n", elapsed_rank,
                all[elapsed_rank].elapsed_s);
        fprintf(f, "  minimum communication time = %.3f sec for task %d\n",
                all[extremes[0]].comm_s, extremes[0]);
        fprintf(f, "  median  communication time = %.3f sec for task %d\n",
                all[extremes[1]].comm_s, extremes[1]);
        fprintf(f, "  maximum communication time = %.3f sec for task %d\n\n\n",
                all[extremes[2]].comm_s, extremes[2]);
        fprintf(f, "MPI timing summary for all ranks:\n");
        fprintf(f, "taskid             host    cpu    comm(s)  elapsed(s)     user(s)   system(s)"
                   "   size(MiB)    switches\n");
        for (int i = 0; i < ntasks; i++) {
            const task_t *t = &all[i];
            fprintf(f, "%6d %16s %6d %10.2f %11.2f %11.2f %11.2f %11.2f %11.0f\n", t->taskid,
                    t->host, t->cpu, t->comm_s, t->elapsed_s, t->user_s, t->system_s, t->mem_mib,
                    t->switches);
        }
    }
    if (fclose(f) != 0)
        fprintf(stderr, "mpiprof: rank %d could not finish %s: %s\n", rank, path, strerror(errno));
}

int MPI_Finalize(void) {
    double t_end = (double)now_ns() * 1e-9;
    int rank = 0, ntasks = 1;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &ntasks);

    task_t me;
    memset(&me, 0, sizeof me);
    uint64_t comm_ns = 0;
    for (int r = 0; r < NROUTINES; r++) comm_ns += __atomic_load_n(&counters[r].ns, __ATOMIC_RELAXED);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    me.comm_s = (double)comm_ns * 1e-9;
    me.elapsed_s = t_init >= 0 ? t_end - t_init : 0.0;
    me.user_s = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec;
    me.system_s = (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    me.mem_mib = (double)ru.ru_maxrss / 1024.0; /* ru_maxrss is in KiB on Linux */
    me.switches = (double)(ru.ru_nvcsw + ru.ru_nivcsw);
    me.taskid = rank;
    me.cpu = sched_getcpu();
    gethostname(me.host, HOSTLEN - 1);
    me.host[HOSTLEN - 1] = '\0';
    char *dot = strchr(me.host, '.');
    if (dot != NULL) *dot = '\0';

    /* Every rank learns every rank's record, so each knows whether it must write a file. */
    task_t *all = calloc((size_t)ntasks, sizeof(task_t));
    task_t *sorted = calloc((size_t)ntasks, sizeof(task_t));
    char jobid[JOBLEN];
    if (rank == 0) job_id(jobid);
    if (all != NULL && sorted != NULL) {
        PMPI_Allgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE,
                       MPI_COMM_WORLD);
        PMPI_Bcast(jobid, JOBLEN, MPI_CHAR, 0, MPI_COMM_WORLD);
        memcpy(sorted, all, (size_t)ntasks * sizeof(task_t));
        qsort(sorted, (size_t)ntasks, sizeof(task_t), by_comm);
        int extremes[3] = {sorted[0].taskid, sorted[ntasks / 2].taskid,
                           sorted[ntasks - 1].taskid};
        int roles[3] = {extremes[0] == rank, extremes[1] == rank, extremes[2] == rank};
        const char *save_all = getenv("SAVE_ALL_TASKS");
        int write_all = save_all != NULL && (save_all[0] == 'y' || save_all[0] == 'Y');
        if (rank == 0 || roles[0] || roles[1] || roles[2] || write_all) {
            const char *dir = getenv("WORKSHOP_MPI_PROFILE_DIR");
            if (dir == NULL || dir[0] == '\0') dir = ".";
            mkdir(dir, 0777); /* fine if it exists already */
            size_t len = strlen(dir) + strlen(jobid) + 64;
            char *path = malloc(len);
            if (path != NULL) {
                snprintf(path, len, "%s/mpi_profile.%s.%d", dir, jobid, rank);
                write_profile(path, rank, ntasks, &me, roles, rank == 0 ? all : NULL, extremes);
                free(path);
            }
        }
    } else {
        fprintf(stderr, "mpiprof: rank %d out of memory, no profile written\n", rank);
    }
    free(all);
    free(sorted);
    return PMPI_Finalize();
}
