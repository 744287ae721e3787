#pragma once
// <immintrin.h> for the per-ISA files. GCC 12.1/12.2 warn -W(maybe-)uninitialized
// inside many AVX-512 intrinsics (their deliberately undefined pass-through
// operands; GCC bug 105593, fixed in 12.3). The warning points into the
// header, so silencing it for the header alone keeps it on for our code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
