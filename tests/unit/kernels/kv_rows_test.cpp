// Storing and copying quantized K/V rows (kernels/kv_rows.h): every slot of a block reads back
// what was stored at it whatever the other slots hold (the V layout interleaves quads of 4
// slots, so neighbours share bytes), and copy_kv_slots copies exactly slots [0, n): the
// copied rows read back equal to the source's, and every byte of the target that belongs to
// a later slot is left as it was (the prefix cache copies the matched part of a block into
// a block whose other slots are about to be written).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "base/cpu_features.h"
#include "base/fp16.h"
#include "formats/tensor_type.h"
#include "kernels/kv_rows.h"
#include "kernels/matmul.h"

namespace rapide {
namespace {

std::vector<float> random_row(std::mt19937& rng, int n) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(n);
  for (float& x : row) x = dist(rng);
  return row;
}

// Rows of every (layer, K/V, head, slot) of a block, as load_kv_row reads them.
std::vector<float> read_block(const KvLayout& layout, const uint8_t* block, int n_slots) {
  std::vector<float> out;
  std::vector<float> row(layout.head_dim);
  for (int layer = 0; layer < layout.n_layers; ++layer) {
    for (int is_value = 0; is_value < 2; ++is_value) {
      for (int head = 0; head < layout.n_kv_heads; ++head) {
        const uint8_t* part = block + layout.offset(layer, is_value != 0, head);
        for (int slot = 0; slot < n_slots; ++slot) {
          load_kv_row(layout, part, is_value != 0, slot, row.data());
          out.insert(out.end(), row.begin(), row.end());
        }
      }
    }
  }
  return out;
}

void fill_block(const KvLayout& layout, uint8_t* block, std::mt19937& rng) {
  for (int layer = 0; layer < layout.n_layers; ++layer) {
    for (int is_value = 0; is_value < 2; ++is_value) {
      for (int head = 0; head < layout.n_kv_heads; ++head) {
        for (int slot = 0; slot < layout.block_size; ++slot) {
          store_kv_row(layout, block + layout.offset(layer, is_value != 0, head), is_value != 0,
                       slot, random_row(rng, layout.head_dim).data());
        }
      }
    }
  }
}

TEST(KvRows, QuantizedSlotsAreIndependentAndCopiesTouchOnlyTheirSlots) {
  for (const KvType type : {KvType::kQ8_0, KvType::kQ4_0}) {
    for (const int block_size : {16, 7}) {
      const KvLayout layout{2, 2, 32, block_size, type};
      std::mt19937 rng(7);
      std::vector<uint8_t> from(layout.block_bytes()), to(layout.block_bytes());
      fill_block(layout, from.data(), rng);
      // Rewriting one slot of a filled block leaves every other slot's row as it was.
      const std::vector<float> before = read_block(layout, from.data(), block_size);
      const std::vector<float> row = random_row(rng, layout.head_dim);
      store_kv_row(layout, from.data() + layout.offset(1, true, 1), true, 2, row.data());
      const std::vector<float> after = read_block(layout, from.data(), block_size);
      std::vector<float> stored(layout.head_dim);
      load_kv_row(layout, from.data() + layout.offset(1, true, 1), true, 2, stored.data());
      size_t changed = 0;
      for (size_t i = 0; i < before.size(); ++i) changed += before[i] != after[i];
      EXPECT_LE(changed, static_cast<size_t>(layout.head_dim)) << kv_type_name(type);
      for (int d = 0; d < layout.head_dim; ++d) {
        EXPECT_NEAR(stored[d], row[d], type == KvType::kQ8_0 ? 0.03 : 0.5);
      }
      for (int n = 0; n <= block_size; ++n) {
        fill_block(layout, to.data(), rng);
        const std::vector<uint8_t> original = to;
        const std::vector<float> target_rows = read_block(layout, to.data(), block_size);
        copy_kv_slots(layout, from.data(), to.data(), n);
        const std::vector<float> source = read_block(layout, from.data(), n);
        EXPECT_EQ(read_block(layout, to.data(), n), source) << kv_type_name(type) << " n " << n;
        // Slots [n, block_size) of the target read back unchanged.
        const std::vector<float> copied = read_block(layout, to.data(), block_size);
        for (size_t i = 0, per_part = static_cast<size_t>(block_size) * layout.head_dim;
             i < copied.size(); ++i) {
          const size_t slot = i % per_part / layout.head_dim;
          if (slot >= static_cast<size_t>(n)) {
            ASSERT_EQ(copied[i], target_rows[i]) << kv_type_name(type) << " n " << n;
          }
        }
        EXPECT_NE(n == 0, original != to) << kv_type_name(type) << " n " << n;
      }
    }
  }
}

// A q8_0 row reads back as Q8_0's rule makes it (quantize_row on each zero-padded group of
// the layout, halves rounded away from zero), for keys and values, at every slot of blocks
// of 16 and 7 positions, whatever the CPU's path (AVX-512 quantizer and word stores here).
TEST(KvRows, Q8_0RowsReadBackAsQuantizeRowMakesThem) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const int head_dim : {64, 128, 48, 8, 4}) {
    for (const int block_size : {16, 7}) {
      const KvLayout layout{1, 1, head_dim, block_size, KvType::kQ8_0};
      const int group = layout.group_size();
      std::vector<uint8_t> part(layout.part_bytes());
      for (int slot = 0; slot < block_size; ++slot) {
        for (const bool is_value : {false, true}) {
          std::vector<float> x(head_dim);
          for (int i = 0; i < head_dim; ++i) {
            // Odd slots: exact halves after scaling by 127 / 127 (ties round away from 0).
            x[i] = slot % 2 == 0 ? normal(rng)
                   : i % group == 0
                       ? 127.0f
                       : static_cast<float>(static_cast<int>(rng() % 253) - 126) + 0.5f;
          }
          store_kv_row(layout, part.data(), is_value, slot, x.data());
          std::vector<float> back(head_dim);
          load_kv_row(layout, part.data(), is_value, slot, back.data());
          for (int g = 0; g < head_dim / group; ++g) {
            float padded[kQuantBlock] = {};
            std::copy(x.begin() + g * group, x.begin() + (g + 1) * group, padded);
            BlockQ8_0 block;
            quantize_row(TensorType::kQ8_0, padded, &block, kQuantBlock);
            for (int i = 0; i < group; ++i) {
              ASSERT_EQ(back[g * group + i], fp16_to_fp32(block.d) * block.qs[i])
                  << "head_dim " << head_dim << " block " << block_size << " slot " << slot
                  << (is_value ? " value" : " key") << " dim " << g * group + i;
            }
          }
        }
      }
    }
  }
}

// The AVX-512 query quantizer is the scalar one's twin: the same codes, scales and offset
// sums, bit for bit, including the rounding of exact halves (away from zero), all-zero
// groups, tiny and huge scales, and non-finite values (their codes are 0, and a NaN never
// becomes the group's largest magnitude).
TEST(KvRows, QueryQuantizerAvx512MatchesTheScalarOne) {
  if (cpu_features().best_level() < IsaLevel::kAvx512) GTEST_SKIP() << "no AVX-512 here";
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int cases = 0;
  for (const KvType type : {KvType::kQ8_0, KvType::kQ4_0}) {
    for (const int head_dim : {64, 128, 48, 16, 8, 4}) {
      const KvLayout layout{1, 1, head_dim, 16, type};
      for (int variant = 0; variant < 8; ++variant) {
        std::vector<float> x(head_dim);
        for (int i = 0; i < head_dim; ++i) {
          switch (variant) {
            case 0:
              x[i] = normal(rng);
              break;
            case 1:
              x[i] = 1e4f * normal(rng);
              break;
            case 2:
              x[i] = 1e-6f * normal(rng);
              break;  // scale below f16's normal range
            case 3:
              x[i] = 0.0f;
              break;
            case 4:  // the group's largest magnitude 127: codes are x itself, halves tie
              x[i] = i % layout.group_size() == 0
                         ? 127.0f
                         : static_cast<float>(static_cast<int>(rng() % 253) - 126) + 0.5f;
              break;
            case 5:
              x[i] = 1e38f * (i % 2 == 0 ? 1.0f : -1.0f);
              break;  // scale overflows f16
            case 6:
              x[i] = i % 7 == 3 ? nan : normal(rng);
              break;
            default:
              x[i] = i % 5 == 1 ? (i % 2 == 0 ? inf : -inf) : normal(rng);
              break;
          }
        }
        QuantizedQuery scalar, simd;
        std::memset(&scalar, 0x5A, sizeof(scalar));
        std::memset(&simd, 0x5A, sizeof(simd));
        quantize_query(layout, x.data(), scalar);
        quantize_query_avx512(layout, x.data(), simd);
        SCOPED_TRACE(::testing::Message()
                     << kv_type_name(type) << " head_dim " << head_dim << " variant " << variant);
        ASSERT_EQ(std::memcmp(scalar.q, simd.q, head_dim), 0);
        for (int g = 0; g < layout.n_groups(); ++g) {
          EXPECT_EQ(std::memcmp(&scalar.d[g], &simd.d[g], sizeof(float)), 0)
              << "group " << g << ": " << scalar.d[g] << " vs " << simd.d[g];
          EXPECT_EQ(scalar.offset_sum[g], simd.offset_sum[g]) << "group " << g;
        }
        ++cases;
      }
    }
  }
  EXPECT_EQ(cases, 96);
}

}  // namespace
}  // namespace rapide
