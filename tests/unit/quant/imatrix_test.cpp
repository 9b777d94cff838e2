// The importance-matrix file in llama.cpp's layout (imatrix.cpp save_imatrix): bytes of a
// tiny case written out by hand, a round trip, and clear errors for damaged files.
#include "quant/imatrix.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace rapide::quant {
namespace {

Imatrix tiny() {
  Imatrix m;
  m.entries.push_back({"a", 2, {1.0f, 0.5f}});
  m.last_call = 2;
  m.dataset.assign(1, 'd');  // (= "d" trips a GCC 12 -Wrestrict false positive)
  return m;
}

// int32 1 entry; int32 name length 1, "a"; int32 ncall 2; int32 nval 2; f32 1.0, 0.5;
// int32 last_call 2; int32 dataset length 1, "d". Little-endian.
const unsigned char kTinyBytes[] = {0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 'a',
                                    0x02, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
                                    0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0x3f, 0x02, 0x00,
                                    0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 'd'};

TEST(Imatrix, WritesLlamaCppLayout) {
  const std::string bytes = serialize_imatrix(tiny());
  ASSERT_EQ(bytes.size(), sizeof(kTinyBytes));
  EXPECT_EQ(bytes, std::string(reinterpret_cast<const char*>(kTinyBytes), sizeof(kTinyBytes)));
}

TEST(Imatrix, RoundTrip) {
  const Imatrix m = parse_imatrix(serialize_imatrix(tiny()), "tiny");
  ASSERT_EQ(m.entries.size(), 1u);
  EXPECT_EQ(m.entries[0].name, "a");
  EXPECT_EQ(m.entries[0].ncall, 2);
  EXPECT_EQ(m.entries[0].values, (std::vector<float>{1.0f, 0.5f}));
  EXPECT_EQ(m.entries[0].mean_sq(), (std::vector<float>{0.5f, 0.25f}));
  EXPECT_EQ(m.last_call, 2);
  EXPECT_EQ(m.dataset, "d");
  EXPECT_NE(m.find("a"), nullptr);
  EXPECT_EQ(m.find("b"), nullptr);
}

TEST(Imatrix, DamagedFilesAreCorrupt) {
  const std::string bytes = serialize_imatrix(tiny());
  for (size_t cut : {size_t{0}, size_t{3}, size_t{10}, size_t{20}}) {
    try {
      parse_imatrix(bytes.substr(0, cut), "cut");
      ADD_FAILURE() << "accepted a file cut at " << cut;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kCorrupt) << e.what();
    }
  }
  std::string huge = bytes;
  huge[4] = 0x7f;  // name length far past the end
  EXPECT_THROW(parse_imatrix(huge, "huge"), Error);
}

}  // namespace
}  // namespace rapide::quant
