// Data-parallel training across processes: the few collective operations a trainer needs,
// over MPI when rosetta is built with it (cmake -DROSETTA_MPI=ON/AUTO), otherwise those of a
// group of one process. Only this layer (rosetta::train) knows of MPI; it is a private
// dependency, so programs using the layer need no MPI headers.
//
// Every rank runs the same loop on the same (identically seeded) data, so a collective is
// called by all ranks in the same order; one that some rank skips hangs the job. Rank 0 (the
// root) alone logs and writes files.
//
// Errors: a rank that throws calls fail() (see there), so the job ends instead of hanging in the
// next collective of the ranks that did not throw.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace rosetta::train {

// True when an MPI launcher started this process: Open MPI's mpirun, MPICH's Hydra, PMIx
// launchers (srun --mpi=pmix).
inline bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

// The number of processes the launcher started, when its environment says (else 1).
inline int launched_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"})
    if (const char* n = std::getenv(v)) return std::max(1, std::atoi(n));
  return 1;
}

// True when this build can join an MPI job.
bool mpi_built();

class ProcessGroup {
 public:
  // A group of one process: every collective is the identity. No MPI call is ever made.
  ProcessGroup() = default;
  // MPI_COMM_WORLD. Initializes MPI on the first call (MPI_THREAD_FUNNELED: only the main
  // thread communicates; OpenMP threads compute); MPI is finalized when the process exits.
  // Throws when this build has no MPI.
  static ProcessGroup world();

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_size() const { return local_size_; }  // ranks on this machine (this one included)
  bool is_root() const { return rank_ == 0; }

  // x[i] = sum over ranks of x[i], in place (MPI_Allreduce). The result is the same on every
  // rank; the order of the summation is MPI's.
  void sum(float* x, int64_t n) const;
  void sum(double* x, int64_t n) const;
  double sum(double v) const {
    sum(&v, 1);
    return v;
  }
  // True on every rank if `flag` is true on any rank.
  bool any(bool flag) const;
  uint64_t max(uint64_t v) const;
  float max(float v) const;
  // Overwrites x (or s) with the root's.
  void broadcast(float* x, int64_t n) const;
  void broadcast(std::string& s) const;
  // The `s` of every rank, in rank order, on the root; empty elsewhere.
  std::vector<std::string> gather(const std::string& s) const;

  // Call when this rank gives up with an error (before rethrowing it): at exit the whole job
  // is aborted (MPI_Abort) instead of leaving the other ranks waiting in a collective.
  void fail() const;

 private:
  int rank_ = 0;
  int size_ = 1;
  int local_size_ = 1;
};

}  // namespace rosetta::train
