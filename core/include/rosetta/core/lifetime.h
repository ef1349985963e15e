// Results that cannot outlive what they refer into.
//
// ROSETTA_LIFETIMEBOUND, written after a member function's parameter list, says that its result
// refers into the object (a getter returning a reference or pointer into it): clang then warns
// (-Wdangling, an error in scripts/lint.sh) where the result is kept past the end of a
// temporary's statement, as in `const Shape& s = a.matmul(b).shape();`. Other compilers ignore it.
//
// ROSETTA_SETTER declares a chainable setter of an options struct that cannot dangle either: on
// an lvalue it returns a reference to it, on a temporary (`BatchOptions().seed(1)`) the struct
// itself, moved, so that `const auto& o = BatchOptions().seed(1);` holds a value.
#pragma once

#include <utility>

#if defined(__clang__)
#define ROSETTA_LIFETIMEBOUND [[clang::lifetimebound]]
#else
#define ROSETTA_LIFETIMEBOUND
#endif

// ROSETTA_SETTER(Self, name, T, field): `Self& name(T v) &` and `Self name(T v) &&` set `field`.
#define ROSETTA_SETTER(Self, name, T, field) \
  Self& name(T v)& {                         \
    field = std::move(v);                    \
    return *this;                            \
  }                                          \
  Self name(T v)&& {                         \
    field = std::move(v);                    \
    return std::move(*this);                 \
  }
