#include "kv/offload_codec.h"

#include <lz4.h>
#include <zstd.h>

#include <climits>
#include <cstring>

#include "base/error.h"

namespace rapide {

namespace {
// Level 1: the tier compresses on the eviction path, inside an engine step.
constexpr int kZstdLevel = 1;
}  // namespace

OffloadCodec parse_offload_codec(const std::string& text) {
  if (text == "none") return OffloadCodec::kNone;
  if (text == "lz4") return OffloadCodec::kLz4;
  if (text == "zstd") return OffloadCodec::kZstd;
  fail(ErrorCode::kInvalidArgument, "KV offload codec must be none, lz4 or zstd, got '{}'", text);
}

const char* offload_codec_name(OffloadCodec codec) {
  switch (codec) {
    case OffloadCodec::kNone:
      return "none";
    case OffloadCodec::kLz4:
      return "lz4";
    case OffloadCodec::kZstd:
      return "zstd";
  }
  return "?";
}

OffloadCodec compress_block(OffloadCodec codec, std::span<const uint8_t> raw,
                            std::vector<uint8_t>& out) {
  size_t n = 0;
  if (codec == OffloadCodec::kLz4 && raw.size() <= static_cast<size_t>(LZ4_MAX_INPUT_SIZE)) {
    const int src = static_cast<int>(raw.size());
    out.resize(static_cast<size_t>(LZ4_compressBound(src)));
    const int r = LZ4_compress_default(reinterpret_cast<const char*>(raw.data()),
                                       reinterpret_cast<char*>(out.data()), src,
                                       static_cast<int>(out.size()));
    n = r > 0 ? static_cast<size_t>(r) : 0;
  } else if (codec == OffloadCodec::kZstd) {
    out.resize(ZSTD_compressBound(raw.size()));
    const size_t r = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), kZstdLevel);
    n = ZSTD_isError(r) ? 0 : r;
  }
  if (n == 0 || n >= raw.size()) {
    out.assign(raw.begin(), raw.end());
    return OffloadCodec::kNone;
  }
  out.resize(n);
  return codec;
}

bool decompress_block(OffloadCodec codec, std::span<const uint8_t> stored, std::span<uint8_t> out) {
  switch (codec) {
    case OffloadCodec::kNone:
      if (stored.size() != out.size()) return false;
      std::memcpy(out.data(), stored.data(), out.size());
      return true;
    case OffloadCodec::kLz4: {
      if (stored.size() > INT_MAX || out.size() > INT_MAX) return false;
      const int r = LZ4_decompress_safe(
          reinterpret_cast<const char*>(stored.data()), reinterpret_cast<char*>(out.data()),
          static_cast<int>(stored.size()), static_cast<int>(out.size()));
      return r >= 0 && static_cast<size_t>(r) == out.size();
    }
    case OffloadCodec::kZstd: {
      const size_t r = ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size());
      return !ZSTD_isError(r) && r == out.size();
    }
  }
  return false;
}

}  // namespace rapide
