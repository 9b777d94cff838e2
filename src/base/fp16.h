// Scalar conversions between float and the 16-bit float formats stored in model files.
// Bit-exact with the hardware instructions (F16C vcvtps2ph with round-to-nearest-even,
// and AVX512-BF16 vcvtneps2bf16), so scalar reference kernels agree with SIMD ones.
#pragma once

#include <cstdint>
#include <cstring>

namespace rapide {

inline float f32_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
inline uint32_t bits_from_f32(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mantissa << 13));  // inf/nan
  if (exponent == 0) {
    if (mantissa == 0) return f32_from_bits(sign);
    // Subnormal: normalise.
    int e = -1;
    do {
      e++;
      mantissa <<= 1;
    } while ((mantissa & 0x400) == 0);
    mantissa &= 0x3ff;
    return f32_from_bits(sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mantissa << 13));
  }
  return f32_from_bits(sign | (exponent + 112) << 23 | (mantissa << 13));
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = bits_from_f32(f);
  const uint32_t sign = (x >> 16) & 0x8000;
  const uint32_t abs = x & 0x7fffffff;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 | ((abs >> 13) & 0x3ff) : 0));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // rounds to inf
  if (abs < 0x38800000u) {                                               // subnormal or zero
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);           // below half the min subnormal
    const uint32_t e = abs >> 23;
    const uint32_t m = (abs & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // value = m * 2^(e - 150) / 2^-24
    uint32_t value = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (value & 1))) value++;
    return static_cast<uint16_t>(sign | value);
  }
  // Normal: rebias exponent and round the mantissa to nearest even.
  uint32_t value = ((abs >> 13) - (112u << 10));
  const uint32_t rem = abs & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (value & 1))) value++;
  return static_cast<uint16_t>(sign | value);
}

inline float bf16_to_fp32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  uint32_t x = bits_from_f32(f);
  if ((x & 0x7fffffff) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 64);  // quiet nan
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace rapide
