// Open MPI in a container (as root, no ssh, few cores): container_friendly_mpi_env lets mpiexec
// run as root, start more ranks than cores, launch locally without an rsh agent, and use shared
// memory without the cross-process copy mechanism containers often forbid.
#pragma once

#include <cstdlib>
#include <string>

namespace rosetta::test {

inline void container_friendly_mpi_env() {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
  setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
  setenv("OMPI_MCA_plm_rsh_agent", "", 0);  // local launch needs no ssh
  setenv("OMPI_MCA_btl", "self,vader", 0);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
  setenv("OMPI_MCA_hwloc_base_binding_policy", "none", 0);
  // ASan builds: Open MPI 4.1 unloads its components in MPI_Finalize, before LeakSanitizer
  // looks, so the frames of what they keep until exit are nameless; whole stacks (slow
  // unwinding) reach the frames in libmpi/libopen-pal that scripts/lsan.supp names. (Not
  // needed when leak detection is off.)
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string opts = asan ? asan : "";
  if (opts.find("fast_unwind_on_malloc") == std::string::npos && opts.find("detect_leaks=0") == std::string::npos)
    setenv("ASAN_OPTIONS", (opts.empty() ? "" : opts + ":").append("fast_unwind_on_malloc=0").c_str(), 1);
}

}  // namespace rosetta::test
