// The disaggregation wire (distributed/kv_transfer_wire.h): a KV frame and a prefill request
// survive the round trip bit for bit, and a frame that is truncated, padded, of another
// version or byte order, or damaged anywhere is refused rather than adopted as K/V.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "distributed/kv_transfer_wire.h"

namespace rapide {
namespace {

PrefilledKv sample_kv() {
  PrefilledKv kv;
  kv.request_id = 0x1234567890abcdefull;
  kv.identity = 0xfeedfacecafebeefull;
  kv.block_bytes = 24;
  kv.hashes = {11, 22, 0xffffffffffffffffull};
  kv.blocks.resize(kv.hashes.size() * kv.block_bytes);
  for (size_t i = 0; i < kv.blocks.size(); ++i) kv.blocks[i] = static_cast<uint8_t>(i * 7 + 3);
  kv.prefill_seconds = 0.125;
  return kv;
}

std::string refusal(const std::vector<uint8_t>& frame) {
  try {
    decode_kv_frame(frame);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  }
  return "accepted";
}

TEST(KvTransferWire, FrameRoundTripKeepsEveryField) {
  const PrefilledKv kv = sample_kv();
  const std::vector<uint8_t> frame = encode_kv_frame(kv);
  const PrefilledKv back = decode_kv_frame(frame);
  EXPECT_EQ(back.request_id, kv.request_id);
  EXPECT_EQ(back.identity, kv.identity);
  EXPECT_EQ(back.block_bytes, kv.block_bytes);
  EXPECT_EQ(back.hashes, kv.hashes);
  EXPECT_EQ(back.blocks, kv.blocks);
  EXPECT_DOUBLE_EQ(back.prefill_seconds, kv.prefill_seconds);
  EXPECT_TRUE(back.error.empty());
  EXPECT_EQ(back.wire_bytes, frame.size());
  EXPECT_EQ(frame.size(), 52 + 3 * 8 + 3 * 24u);
}

TEST(KvTransferWire, ErrorFrameCarriesTheMessageAndNoBlocks) {
  PrefilledKv kv;
  kv.request_id = 7;
  kv.block_bytes = 64;
  kv.error = "prompt token id 99999 is outside the vocabulary";
  const PrefilledKv back = decode_kv_frame(encode_kv_frame(kv));
  EXPECT_EQ(back.request_id, 7u);
  EXPECT_EQ(back.error, kv.error);
  EXPECT_TRUE(back.hashes.empty());
  EXPECT_TRUE(back.blocks.empty());
}

TEST(KvTransferWire, RefusesTruncatedAndPaddedFrames) {
  const std::vector<uint8_t> frame = encode_kv_frame(sample_kv());
  EXPECT_NE(refusal({frame.begin(), frame.begin() + 20}).find("shorter than its header"),
            std::string::npos);
  for (size_t cut : {size_t{52}, frame.size() / 2, frame.size() - 1}) {
    EXPECT_NE(
        refusal({frame.begin(), frame.begin() + static_cast<ptrdiff_t>(cut)}).find("truncated"),
        std::string::npos)
        << cut;
  }
  std::vector<uint8_t> padded = frame;
  padded.push_back(0);
  EXPECT_NE(refusal(padded).find("header announces"), std::string::npos);
}

TEST(KvTransferWire, RefusesEveryDamagedByte) {
  const std::vector<uint8_t> frame = encode_kv_frame(sample_kv());
  // Every byte is covered by the magic, the version, the sizes or the checksum...
  for (size_t i = 0; i < frame.size(); ++i) {
    std::vector<uint8_t> damaged = frame;
    damaged[i] ^= 0x10;
    EXPECT_NE(refusal(damaged), "accepted") << "byte " << i;
  }
  // ...and a frame from another byte order fails the magic check.
  std::vector<uint8_t> swapped = frame;
  std::swap(swapped[0], swapped[3]);
  std::swap(swapped[1], swapped[2]);
  EXPECT_NE(refusal(swapped).find("bad magic"), std::string::npos);
}

TEST(KvTransferWire, PrefillRequestRoundTrip) {
  const std::vector<int32_t> tokens = {1, 500, 12, 44, 0, 31999};
  const RequestId id = 0xffffffff00000001ull;
  std::vector<int32_t> back;
  EXPECT_EQ(decode_prefill_request(encode_prefill_request(id, tokens), back), id);
  EXPECT_EQ(back, tokens);
  EXPECT_THROW(decode_prefill_request(std::vector<int32_t>{5}, back), Error);
}

}  // namespace
}  // namespace rapide
