// The loop nest of the k-quant panel kernels (kernels/kpanel.h), shared by the per-ISA
// files: Tile<kType, T>::run(w, a, panel, token, y) multiplies one panel by T tokens, and
// drive() (matmul_drive.h) walks panels x tokens with it, kDecodeT tokens at a time for a
// decode step (t1 - t0 <= kDecodeT), kPrefillT for a batch. Included only by the per-ISA
// kernel files; the anonymous namespace keeps each file's instantiations apart.
#pragma once

#include "kernels/matmul_drive.h"

namespace rapide::matmul {
namespace {

template <template <TensorType, int> class Tile, TensorType kType>
struct KPanelTiles {
  template <int R, int T>
  struct Of {
    static_assert(R == 1, "one panel per tile: the weights' unpacking is shared by the tokens");
    static void run(const PackedWeights& w, const Activations& a, int64_t p, int64_t t, float* y) {
      Tile<kType, T>::run(w, a, p, t, y);
    }
  };
};

template <template <TensorType, int> class Tile, TensorType kType, int kDecodeT, int kPrefillT>
void kpanel_drive_type(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1,
                       int64_t t0, int64_t t1, float* y) {
  if (t1 - t0 <= kDecodeT) {
    drive<1, kDecodeT, KPanelTiles<Tile, kType>::template Of>(w, a, p0, p1, t0, t1, y, a.stride);
  } else {
    drive<1, kPrefillT, KPanelTiles<Tile, kType>::template Of>(w, a, p0, p1, t0, t1, y, a.stride);
  }
}

template <template <TensorType, int> class Tile, int kDecodeT, int kPrefillT>
void kpanel_drive(const PackedWeights& w, const Activations& a, int64_t p0, int64_t p1, int64_t t0,
                  int64_t t1, float* y) {
  switch (w.type) {
    case TensorType::kQ4_K:
      return kpanel_drive_type<Tile, TensorType::kQ4_K, kDecodeT, kPrefillT>(w, a, p0, p1, t0, t1,
                                                                             y);
    case TensorType::kQ5_K:
      return kpanel_drive_type<Tile, TensorType::kQ5_K, kDecodeT, kPrefillT>(w, a, p0, p1, t0, t1,
                                                                             y);
    default:
      return kpanel_drive_type<Tile, TensorType::kQ6_K, kDecodeT, kPrefillT>(w, a, p0, p1, t0, t1,
                                                                             y);
  }
}

}  // namespace
}  // namespace rapide::matmul
