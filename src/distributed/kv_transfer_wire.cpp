#include "distributed/kv_transfer_wire.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "base/error.h"
#include "kv/block_hash.h"

namespace rapide {

namespace {

constexpr uint32_t kMagic = 0x54564b52;  // "RKVT" read as a little-endian uint32
constexpr uint32_t kVersion = 1;

// Fixed-size fields, in this order; memcpy'd one by one (no struct padding on the wire).
struct Header {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint64_t request_id = 0;
  uint64_t identity = 0;
  uint32_t n_blocks = 0;
  uint32_t block_bytes = 0;
  uint64_t prefill_us = 0;
  uint32_t error_bytes = 0;
  uint64_t checksum = 0;
};
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8 + 4 + 4 + 8 + 4 + 8;
constexpr size_t kChecksumOffset = kHeaderBytes - 8;  // the checksum is the header's last field

template <typename T>
void put(std::vector<uint8_t>& out, size_t& at, const T& value) {
  std::memcpy(out.data() + at, &value, sizeof(T));
  at += sizeof(T);
}

template <typename T>
T get(std::span<const uint8_t> in, size_t& at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  at += sizeof(T);
  return value;
}

uint64_t hash_span(std::span<const uint8_t> bytes) {
  return hash_bytes(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

// Over the whole frame but the checksum field itself: the header's fields, then the body.
uint64_t checksum(std::span<const uint8_t> frame) {
  const uint64_t parts[2] = {hash_span(frame.first(kChecksumOffset)),
                             hash_span(frame.subspan(kHeaderBytes))};
  return hash_span(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(parts), sizeof(parts)));
}

}  // namespace

std::vector<int32_t> encode_prefill_request(RequestId id, std::span<const int32_t> tokens) {
  std::vector<int32_t> words;
  words.reserve(tokens.size() + 2);
  words.push_back(static_cast<int32_t>(static_cast<uint32_t>(id & 0xffffffffu)));
  words.push_back(static_cast<int32_t>(static_cast<uint32_t>(id >> 32)));
  words.insert(words.end(), tokens.begin(), tokens.end());
  return words;
}

RequestId decode_prefill_request(std::span<const int32_t> words, std::vector<int32_t>& tokens) {
  if (words.size() < 2) {
    fail(ErrorCode::kInvalidArgument, "prefill request: {} words, fewer than the 2 of its id",
         words.size());
  }
  const RequestId id = static_cast<uint64_t>(static_cast<uint32_t>(words[0])) |
                       (static_cast<uint64_t>(static_cast<uint32_t>(words[1])) << 32);
  tokens.assign(words.begin() + 2, words.end());
  return id;
}

std::vector<uint8_t> encode_kv_frame(const PrefilledKv& kv) {
  if (kv.blocks.size() != kv.hashes.size() * kv.block_bytes) {
    fail(ErrorCode::kInternal, "KV frame: {} bytes for {} blocks of {} bytes", kv.blocks.size(),
         kv.hashes.size(), kv.block_bytes);
  }
  Header h;
  h.request_id = kv.request_id;
  h.identity = kv.identity;
  h.n_blocks = static_cast<uint32_t>(kv.hashes.size());
  h.block_bytes = kv.block_bytes;
  h.prefill_us = static_cast<uint64_t>(std::llround(std::max(0.0, kv.prefill_seconds) * 1e6));
  h.error_bytes = static_cast<uint32_t>(kv.error.size());
  const size_t hash_bytes_total = kv.hashes.size() * sizeof(uint64_t);
  std::vector<uint8_t> out(kHeaderBytes + kv.error.size() + hash_bytes_total + kv.blocks.size());
  size_t at = kHeaderBytes;
  std::memcpy(out.data() + at, kv.error.data(), kv.error.size());
  at += kv.error.size();
  if (hash_bytes_total > 0) std::memcpy(out.data() + at, kv.hashes.data(), hash_bytes_total);
  at += hash_bytes_total;
  if (!kv.blocks.empty()) std::memcpy(out.data() + at, kv.blocks.data(), kv.blocks.size());
  at = 0;
  put(out, at, h.magic);
  put(out, at, h.version);
  put(out, at, h.request_id);
  put(out, at, h.identity);
  put(out, at, h.n_blocks);
  put(out, at, h.block_bytes);
  put(out, at, h.prefill_us);
  put(out, at, h.error_bytes);
  h.checksum = checksum(out);
  put(out, at, h.checksum);
  return out;
}

PrefilledKv decode_kv_frame(std::span<const uint8_t> frame) {
  if (frame.size() < kHeaderBytes) {
    fail(ErrorCode::kInvalidArgument, "KV frame: truncated: {} bytes, shorter than its header",
         frame.size());
  }
  size_t at = 0;
  Header h;
  h.magic = get<uint32_t>(frame, at);
  h.version = get<uint32_t>(frame, at);
  h.request_id = get<uint64_t>(frame, at);
  h.identity = get<uint64_t>(frame, at);
  h.n_blocks = get<uint32_t>(frame, at);
  h.block_bytes = get<uint32_t>(frame, at);
  h.prefill_us = get<uint64_t>(frame, at);
  h.error_bytes = get<uint32_t>(frame, at);
  h.checksum = get<uint64_t>(frame, at);
  if (h.magic != kMagic) fail(ErrorCode::kInvalidArgument, "KV frame: bad magic {:#x}", h.magic);
  if (h.version != kVersion) {
    fail(ErrorCode::kInvalidArgument, "KV frame: version {}, this rapide reads {}", h.version,
         kVersion);
  }
  // In 64 bits: 32-bit counts cannot overflow it.
  const uint64_t expected = kHeaderBytes + uint64_t{h.error_bytes} +
                            uint64_t{h.n_blocks} * sizeof(uint64_t) +
                            uint64_t{h.n_blocks} * uint64_t{h.block_bytes};
  if (frame.size() != expected) {
    fail(ErrorCode::kInvalidArgument,
         "KV frame: {} bytes, but its header announces {} ({} blocks of {} bytes){}", frame.size(),
         expected, h.n_blocks, h.block_bytes, frame.size() < expected ? ": truncated" : "");
  }
  if (checksum(frame) != h.checksum) {
    fail(ErrorCode::kInvalidArgument, "KV frame of request {}: checksum mismatch (corrupt)",
         h.request_id);
  }
  PrefilledKv kv;
  kv.request_id = h.request_id;
  kv.identity = h.identity;
  kv.block_bytes = h.block_bytes;
  kv.prefill_seconds = static_cast<double>(h.prefill_us) * 1e-6;
  kv.error.assign(reinterpret_cast<const char*>(frame.data() + at), h.error_bytes);
  at += h.error_bytes;
  kv.hashes.resize(h.n_blocks);
  if (h.n_blocks > 0) std::memcpy(kv.hashes.data(), frame.data() + at, h.n_blocks * 8u);
  at += h.n_blocks * sizeof(uint64_t);
  kv.blocks.assign(frame.begin() + static_cast<ptrdiff_t>(at), frame.end());
  kv.wire_bytes = frame.size();
  return kv;
}

}  // namespace rapide
