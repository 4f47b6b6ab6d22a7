/* mpi_allreduce: MPI_Allreduce (float, sum, out-of-place) timed the way nccl-tests times a collective
 * (warm-up, then iters calls between barriers, time averaged over ranks). Built and run by
 * bench/cpu (go run ./bench/cpu); prints one JSON object per size on rank 0.
 * Usage: mpi_allreduce MINBYTES MAXBYTES ITERS */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    long minb = argc > 1 ? atol(argv[1]) : 8, maxb = argc > 2 ? atol(argv[2]) : 64L << 20;
    int iters = argc > 3 ? atoi(argv[3]) : 20;
    if (minb < 4 || maxb < minb || iters < 1) {
        if (rank == 0) fprintf(stderr, "mpi_allreduce: bad arguments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    float *in = malloc(maxb), *out = malloc(maxb);
    if (!in || !out) MPI_Abort(MPI_COMM_WORLD, 1);
    for (long i = 0; i < maxb / 4; i++) in[i] = (float)((rank + i) % 4);
    for (long b = minb; b <= maxb; b *= 2) {
        int count = (int)(b / 4);
        MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm-up */
        int it = b >= (16L << 20) ? (iters + 3) / 4 : iters;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < it; i++) MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t = (MPI_Wtime() - t0) / it, sum = 0;
        MPI_Reduce(&t, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        long wrong = 0;
        for (long i = 0; i < count; i++) {
            float want = 0;
            for (int r = 0; r < n; r++) want += (float)((r + i) % 4);
            if (out[i] != want) wrong++;
        }
        long twrong = 0;
        MPI_Reduce(&wrong, &twrong, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) printf("{\"bytes\":%ld,\"time_us\":%.3f,\"wrong\":%ld}\n", (long)count * 4, sum / n * 1e6, twrong);
        fflush(stdout);
    }
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
