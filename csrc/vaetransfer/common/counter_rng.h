// Counter-based random numbers: the value for (seed, counter) does not depend on
// what else was drawn, so any subset of a procedural data set can be generated
// on its own and equals the same rows of the full set, with any thread count.
#pragma once
#include <cstdint>

namespace vaetransfer {

// SplitMix64 finaliser (Steele, Lea & Flood 2014): a bijective 64-bit mixer.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Uniform double in [0, 1) for draw `counter` of stream `seed`.
inline double counter_uniform(uint64_t seed, uint64_t counter) {
  const uint64_t bits = splitmix64(splitmix64(seed) ^ splitmix64(counter ^ 0xD1B54A32D192ED03ULL));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace vaetransfer
