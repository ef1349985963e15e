// What the AMX kernels (bf16_amx.cpp, int8_amx.cpp) share: the tile state's grant, the tiles'
// configuration, and the tile loads.
//
// A tile kernel runs on a configuration loaded into the thread's tile registers (LDTILECFG: a
// 64-byte block naming the palette and each tile's rows and bytes per row). Every AMX kernel here
// runs on one: palette 1, tiles 0-7 of 16 rows x 64 bytes (tile_config()). The configuration is
// loaded and read back by inline assembly whose memory operand is the whole 64-byte block: GCC
// 12's _tile_loadconfig names only its first 8 bytes, and the optimizer dropped the stores of the
// rows and columns as dead (rosetta 0.2.0 then ran TDPBF16PS on unconfigured tiles: SIGILL). The
// start-up check (kernel_check.cpp) reads the configuration back (STTILECFG) and compares it with
// tile_config() before any product runs on the tiles.
#pragma once

#include <cstdint>

namespace rosetta::detail::amx {

// The LDTILECFG block, palette 1.
struct alignas(64) TileConfig {
  uint8_t palette = 0, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tiles 0-15 (0-7 exist)
  uint8_t rows[16] = {};    // rows of tiles 0-15
};
static_assert(sizeof(TileConfig) == 64);

// What every kernel here runs on: palette 1; tiles 0-7 of 16 rows of 64 bytes (C, A and B tiles
// alike; the kernels' comments name which tile holds what); the rest unused (0).
TileConfig tile_config();

// True where both configurations hold the same 64 bytes.
bool same_config(const TileConfig& a, const TileConfig& b);

// Whether the OS lets this process use the AMX tile state: Linux hands out its 8 KiB only to
// processes that ask (kernel 5.16 and later; asked here with arch_prctl); false elsewhere. The
// bf16 and int8 AMX kernels' runs_on ask it.
bool tile_state_granted();

// The following run only where the CPU has AMX-TILE and tile_state_granted().

// Loads `cfg` into this thread's tile registers (LDTILECFG, the whole block as its operand).
void load_config(const TileConfig& cfg);
// This thread's tile configuration as the CPU holds it (STTILECFG; all zero where none is loaded).
TileConfig stored_config();
// load_config(tile_config()), before a kernel's tile products on this thread.
void configure_tiles();
// Returns the tiles to their initial state (TILERELEASE), after them.
void release_tiles();

}  // namespace rosetta::detail::amx

#if defined(__x86_64__)
// TILELOADD of tile `t` (a literal 0-7) from rows `stride` bytes apart at `base`. GCC 12's
// _tile_loadd declares no memory input: stores to the rows it reads could be sunk past it or
// dropped as dead. The clobber orders every store before the load.
#define ROSETTA_TILE_LOADD(t, base, stride)                                              \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t                                      \
                   :                                                                    \
                   : "r"(static_cast<const void*>(base)), "r"(static_cast<long>(stride)) \
                   : "memory")
#endif
