// MPI link figures for bench/distributed_model.py (issue 21): one-way latency of a small
// message (ping-pong / 2), bandwidth of a large one, and MPI_Allreduce time of the sizes a
// tensor-parallel forward pass reduces (rows x dim floats). Run with mpirun -np 2.
// Prints one JSON object on rank 0.
#include <mpi.h>

#include <cstdio>
#include <vector>

namespace {

double ping_pong_seconds(int rank, size_t bytes, int reps) {
  std::vector<char> buf(bytes);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < reps; ++i) {
    if (rank == 0) {
      MPI_Send(buf.data(), static_cast<int>(bytes), MPI_CHAR, 1, 0, MPI_COMM_WORLD);
      MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_CHAR, 1, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    } else if (rank == 1) {
      MPI_Recv(buf.data(), static_cast<int>(bytes), MPI_CHAR, 0, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      MPI_Send(buf.data(), static_cast<int>(bytes), MPI_CHAR, 0, 0, MPI_COMM_WORLD);
    }
  }
  return (MPI_Wtime() - start) / reps / 2;  // one way
}

double allreduce_seconds(size_t floats, int reps) {
  std::vector<float> buf(floats, 1.0f);
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < reps; ++i) {
    MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(floats), MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
  }
  return (MPI_Wtime() - start) / reps;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size < 2) {
    if (rank == 0) std::fprintf(stderr, "mpi_link: run with mpirun -np 2\n");
    MPI_Finalize();
    return 2;
  }
  const double latency = ping_pong_seconds(rank, 8, 2000);
  const size_t big = 64u << 20;
  const double big_seconds = ping_pong_seconds(rank, big, 10);
  const double reduce_dim = allreduce_seconds(768, 2000);       // one decode row of synth100m
  const double reduce_256 = allreduce_seconds(768 * 256, 100);  // a 256-token prefill chunk
  if (rank == 0) {
    std::printf(
        "{\"latency_s\": %.3e, \"bandwidth_bytes_per_s\": %.4e, \"allreduce_768_s\": %.3e, "
        "\"allreduce_768x256_s\": %.3e}\n",
        latency, big / big_seconds, reduce_dim, reduce_256);
  }
  MPI_Finalize();
  return 0;
}
