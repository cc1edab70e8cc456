/*
 * mpi_bench times MPI_Allreduce (float32 sum) and MPI_Alltoall (float32) the
 * way nccl-tests times NCCL: for each size, warm-up calls, a barrier, then a
 * timed batch; each rank's mean time per call is averaged over the ranks and
 * turned into bus bandwidth with nccl-tests' factors:
 *   all-reduce  busbw = size / time * 2(n-1)/n
 *   all-to-all  busbw = size / time * (n-1)/n
 * where size is the bytes of one rank's buffer (for all-to-all, all n blocks).
 *
 * Usage: mpi_bench [-n iters] [-w warmup] [-c allreduce|alltoall] SIZE...
 * (SIZE in bytes, K/M suffix; -c runs that collective alone, both without it)
 * Output, rank 0 only, one line per collective and size:
 *   RESULT <collective> <bytes> <time_us> <algbw GB/s> <busbw GB/s> <wrong>
 * The result of the last call is checked against the sum every rank should
 * produce (all-reduce) or the block it should receive (all-to-all).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long parse_size(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v <= 0) return -1;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    }
    if (*end == 'B' || *end == 'b') end++;
    return *end == '\0' ? v : -1;
}

/* mean_over_ranks averages one double over all ranks. */
static double mean_over_ranks(double v, int n) {
    double sum = 0;
    MPI_Allreduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return sum / n;
}

/* fill_input writes rank r's input: element i is r+1+(i%7), exact in float. */
static void fill_input(float *a, long count, int r) {
    for (long i = 0; i < count; i++) a[i] = (float)(r + 1 + i % 7);
}

static long check_allreduce(const float *out, long count, int n) {
    long wrong = 0;
    for (long i = 0; i < count; i++) {
        float want = (float)(n * (n + 1) / 2 + n * (i % 7));
        if (out[i] != want) wrong++;
    }
    return wrong;
}

/* check_alltoall: block j of out came from rank j, whose element at global
 * index me*block+k was j+1+((me*block+k)%7). */
static long check_alltoall(const float *out, long block, int n, int me) {
    long wrong = 0;
    for (int j = 0; j < n; j++)
        for (long k = 0; k < block; k++) {
            long gi = (long)me * block + k;
            if (out[(long)j * block + k] != (float)(j + 1 + gi % 7)) wrong++;
        }
    return wrong;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int iters = 10, warmup = 2, only = -1;
    long sizes[64];
    int nsizes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-w") && i + 1 < argc) {
            warmup = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-c") && i + 1 < argc) {
            i++;
            only = !strcmp(argv[i], "allreduce") ? 0 : !strcmp(argv[i], "alltoall") ? 1 : -2;
            if (only == -2) {
                if (me == 0) fprintf(stderr, "mpi_bench: -c %s: want allreduce or alltoall\n", argv[i]);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        } else {
            long s = parse_size(argv[i]);
            if (s < 0 || nsizes == 64) {
                if (me == 0) fprintf(stderr, "mpi_bench: bad size %s (want bytes with K/M/G suffix, at most 64 sizes)\n", argv[i]);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
            sizes[nsizes++] = s;
        }
    }
    if (iters < 1 || warmup < 0 || nsizes == 0) {
        if (me == 0) fprintf(stderr, "usage: mpi_bench [-n iters>=1] [-w warmup>=0] [-c allreduce|alltoall] SIZE...\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int c = 0; c < 2; c++) {
        if (only >= 0 && c != only) continue;
        const char *name = c == 0 ? "allreduce" : "alltoall";
        double factor = c == 0 ? 2.0 * (n - 1) / n : (double)(n - 1) / n;
        for (int s = 0; s < nsizes; s++) {
            long count = sizes[s] / (long)sizeof(float);
            if (c == 1) count -= count % n; /* whole blocks */
            long bytes = count * (long)sizeof(float);
            float *in = malloc(bytes), *out = malloc(bytes);
            if (!in || !out) {
                fprintf(stderr, "mpi_bench: out of memory for %ld bytes\n", bytes);
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            fill_input(in, count, me);
            memset(out, 0, bytes);
            double t0 = 0;
            int block = (int)(count / n);
            for (int i = 0; i < warmup + iters; i++) {
                if (i == warmup) {
                    MPI_Barrier(MPI_COMM_WORLD);
                    t0 = MPI_Wtime();
                }
                if (c == 0)
                    MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                else
                    MPI_Alltoall(in, block, MPI_FLOAT, out, block, MPI_FLOAT, MPI_COMM_WORLD);
            }
            double us = mean_over_ranks((MPI_Wtime() - t0) / iters * 1e6, n);
            long wrong = c == 0 ? check_allreduce(out, count, n) : check_alltoall(out, block, n, me);
            long total = 0;
            MPI_Reduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
            double algbw = (double)bytes / (us * 1e3);
            if (me == 0) {
                printf("RESULT %s %ld %.2f %.3f %.3f %ld\n", name, bytes, us, algbw, algbw * factor, total);
                fflush(stdout);
            }
            free(in);
            free(out);
        }
    }
    MPI_Finalize();
    return 0;
}
