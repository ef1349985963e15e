// The AMX tile state and configuration (amx.h).
#include "amx.h"

#include <cstring>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace rosetta::detail::amx {

TileConfig tile_config() {
  TileConfig cfg;
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  return cfg;
}

bool same_config(const TileConfig& a, const TileConfig& b) { return std::memcmp(&a, &b, sizeof(TileConfig)) == 0; }

bool tile_state_granted() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;  // arch_prctl(ARCH_REQ_XCOMP_PERM, ...)
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

#if defined(__x86_64__)
// The operands are the whole 64-byte blocks, so that the compiler keeps (and, reading back,
// expects) every byte. Inline assembly needs no target attribute: these run only where the
// kernels' runs_on found AMX.
void load_config(const TileConfig& cfg) { __asm__ volatile("ldtilecfg %0" : : "m"(cfg)); }

TileConfig stored_config() {
  TileConfig cfg;
  __asm__ volatile("sttilecfg %0" : "=m"(cfg));
  return cfg;
}

void configure_tiles() {
  const TileConfig cfg = tile_config();
  load_config(cfg);
}

void release_tiles() { __asm__ volatile("tilerelease" ::: "memory"); }
#else  // never called there
void load_config(const TileConfig&) {}
TileConfig stored_config() { return {}; }
void configure_tiles() {}
void release_tiles() {}
#endif

}  // namespace rosetta::detail::amx
