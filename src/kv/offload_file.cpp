#include "kv/offload_file.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <system_error>
#include <type_traits>

#include "base/regular_file.h"

namespace rapide {

namespace {

constexpr char kMagic[8] = {'R', 'P', 'K', 'V', 'B', 'L', 'K', '1'};
// 2: the q8_0 / q4_0 V layout interleaves quads of positions (kv/kv_store.h); version 1
// files of those types hold the old layout, the f16 / f32 ones are still valid.
constexpr uint32_t kVersion = 2;

// Fixed-size, padding-free header; host byte order (a cache file is not an exchange
// format, and a foreign byte order fails the checks like any corruption).
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t codec;
  uint64_t identity;
  int32_t n_layers;
  int32_t n_kv_heads;
  int32_t head_dim;
  int32_t block_size;
  uint32_t kv_type;
  uint32_t n_tokens;
  uint64_t hash;
  uint64_t parent;
  uint64_t raw_bytes;
  uint64_t stored_bytes;
  uint64_t raw_checksum;
  uint64_t payload_checksum;
  uint64_t header_checksum;  // of every field above and the token ids
};
static_assert(std::is_trivially_copyable_v<FileHeader>);
static_assert(sizeof(FileHeader) == 104, "FileHeader must have no padding");

bool readable_version(const FileHeader& h) {
  return h.version == kVersion ||
         (h.version == 1 && !kv_type_quantized(static_cast<KvType>(h.kv_type)));
}

uint64_t header_checksum(const FileHeader& h, std::span<const int32_t> tokens) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, &h, offsetof(FileHeader, header_checksum));
  XXH3_64bits_update(state, tokens.data(), tokens.size_bytes());
  const uint64_t sum = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return sum;
}

bool same_layout(const FileHeader& h, const KvLayout& layout) {
  return h.n_layers == layout.n_layers && h.n_kv_heads == layout.n_kv_heads &&
         h.head_dim == layout.head_dim && h.block_size == layout.block_size &&
         h.kv_type == static_cast<uint32_t>(layout.type) && h.raw_bytes == layout.block_bytes() &&
         h.n_tokens == static_cast<uint32_t>(layout.block_size);
}

// Reads and checks the header and token ids. Leaves the stream at the payload.
BlockFileStatus read_header(RegularFile& in, uint64_t identity, const KvLayout& layout,
                            FileHeader& h, std::vector<int32_t>& tokens) {
  const uint64_t file_bytes = in.size();
  if (!in.read_exact(&h, sizeof(h))) return BlockFileStatus::kCorrupt;
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || !readable_version(h) ||
      h.n_tokens > 1u << 16) {
    return BlockFileStatus::kCorrupt;
  }
  tokens.resize(h.n_tokens);
  if (!in.read_exact(tokens.data(), tokens.size() * sizeof(int32_t))) {
    return BlockFileStatus::kCorrupt;
  }
  if (header_checksum(h, tokens) != h.header_checksum) return BlockFileStatus::kCorrupt;
  // Only a header that is intact can be called foreign: it really came from elsewhere.
  if (h.identity != identity || !same_layout(h, layout)) return BlockFileStatus::kForeign;
  // The stored size is bounded before it is added to anything (a forged 2^64-ish value could
  // wrap the sum to the real file size) or allocated (a sparse 90 GB file would pass the
  // size comparison and then fail the allocation).
  if (h.codec > static_cast<uint32_t>(OffloadCodec::kZstd) ||
      h.stored_bytes > max_stored_bytes(h.raw_bytes) ||
      file_bytes != sizeof(h) + tokens.size() * sizeof(int32_t) + h.stored_bytes) {
    return BlockFileStatus::kCorrupt;
  }
  return BlockFileStatus::kOk;
}

}  // namespace

std::string block_file_name(uint64_t identity, uint64_t hash) {
  return fmt::format("{:016x}-{:016x}.kvblock", identity, hash);
}

bool is_block_file_name(const std::filesystem::path& path) {
  return path.extension() == ".kvblock";
}

uint64_t write_block_file(const std::filesystem::path& path, uint64_t identity,
                          const KvLayout& layout, const OffloadedBlockMeta& meta,
                          OffloadCodec codec, std::span<const uint8_t> stored, uint64_t raw_bytes,
                          uint64_t raw_checksum) {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.codec = static_cast<uint32_t>(codec);
  h.identity = identity;
  h.n_layers = layout.n_layers;
  h.n_kv_heads = layout.n_kv_heads;
  h.head_dim = layout.head_dim;
  h.block_size = layout.block_size;
  h.kv_type = static_cast<uint32_t>(layout.type);
  h.n_tokens = static_cast<uint32_t>(meta.tokens.size());
  h.hash = meta.hash;
  h.parent = meta.parent;
  h.raw_bytes = raw_bytes;
  h.stored_bytes = stored.size();
  h.raw_checksum = raw_checksum;
  h.payload_checksum = XXH3_64bits(stored.data(), stored.size());
  h.header_checksum = header_checksum(h, meta.tokens);
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    // Whatever sits at the temporary name goes first: opening a FIFO planted there for
    // writing would block until someone reads it.
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&h), sizeof(h));
    out.write(reinterpret_cast<const char*>(meta.tokens.data()),
              static_cast<std::streamsize>(meta.tokens.size() * sizeof(int32_t)));
    out.write(reinterpret_cast<const char*>(stored.data()),
              static_cast<std::streamsize>(stored.size()));
    if (!out.flush()) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return 0;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return 0;
  }
  return sizeof(h) + meta.tokens.size() * sizeof(int32_t) + stored.size();
}

BlockFileStatus read_block_file_header(const std::filesystem::path& path, uint64_t identity,
                                       const KvLayout& layout, BlockFileInfo& info) {
  RegularFile in(path.string());
  if (!in.is_open()) return in.wrong_type() ? BlockFileStatus::kCorrupt : BlockFileStatus::kMissing;
  info.file_bytes = in.size();
  FileHeader h;
  const BlockFileStatus status = read_header(in, identity, layout, h, info.meta.tokens);
  info.meta.hash = h.hash;
  info.meta.parent = h.parent;
  return status;
}

BlockFileStatus read_block_file(const std::filesystem::path& path, uint64_t identity,
                                const KvLayout& layout, uint64_t expected_hash,
                                std::span<uint8_t> out) {
  RegularFile in(path.string());
  if (!in.is_open()) return in.wrong_type() ? BlockFileStatus::kCorrupt : BlockFileStatus::kMissing;
  FileHeader h;
  std::vector<int32_t> tokens;
  const BlockFileStatus status = read_header(in, identity, layout, h, tokens);
  if (status != BlockFileStatus::kOk) return status;
  if (h.hash != expected_hash || out.size() != h.raw_bytes) return BlockFileStatus::kCorrupt;
  std::vector<uint8_t> stored(h.stored_bytes);
  if (!in.read_exact(stored.data(), stored.size()) ||
      XXH3_64bits(stored.data(), stored.size()) != h.payload_checksum ||
      !decompress_block(static_cast<OffloadCodec>(h.codec), stored, out) ||
      XXH3_64bits(out.data(), out.size()) != h.raw_checksum) {
    return BlockFileStatus::kCorrupt;
  }
  return BlockFileStatus::kOk;
}

}  // namespace rapide
