#include "kv/offload_file.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <system_error>
#include <type_traits>

namespace rapide {

namespace {

constexpr char kMagic[8] = {'R', 'P', 'K', 'V', 'B', 'L', 'K', '1'};
constexpr uint32_t kVersion = 1;

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
BlockFileStatus read_header(std::ifstream& in, uint64_t file_bytes, uint64_t identity,
                            const KvLayout& layout, FileHeader& h, std::vector<int32_t>& tokens) {
  if (!in.read(reinterpret_cast<char*>(&h), sizeof(h))) return BlockFileStatus::kCorrupt;
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 || h.version != kVersion ||
      h.n_tokens > 1u << 16) {
    return BlockFileStatus::kCorrupt;
  }
  tokens.resize(h.n_tokens);
  if (!in.read(reinterpret_cast<char*>(tokens.data()),
               static_cast<std::streamsize>(tokens.size() * sizeof(int32_t)))) {
    return BlockFileStatus::kCorrupt;
  }
  if (header_checksum(h, tokens) != h.header_checksum) return BlockFileStatus::kCorrupt;
  // Only a header that is intact can be called foreign: it really came from elsewhere.
  if (h.identity != identity || !same_layout(h, layout)) return BlockFileStatus::kForeign;
  if (h.codec > static_cast<uint32_t>(OffloadCodec::kZstd) ||
      file_bytes != sizeof(h) + tokens.size() * sizeof(int32_t) + h.stored_bytes) {
    return BlockFileStatus::kCorrupt;
  }
  return BlockFileStatus::kOk;
}

uint64_t size_of_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
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
  std::ifstream in(path, std::ios::binary);
  if (!in) return BlockFileStatus::kMissing;
  info.file_bytes = size_of_file(path);
  FileHeader h;
  const BlockFileStatus status =
      read_header(in, info.file_bytes, identity, layout, h, info.meta.tokens);
  info.meta.hash = h.hash;
  info.meta.parent = h.parent;
  return status;
}

BlockFileStatus read_block_file(const std::filesystem::path& path, uint64_t identity,
                                const KvLayout& layout, uint64_t expected_hash,
                                std::span<uint8_t> out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return BlockFileStatus::kMissing;
  FileHeader h;
  std::vector<int32_t> tokens;
  const BlockFileStatus status = read_header(in, size_of_file(path), identity, layout, h, tokens);
  if (status != BlockFileStatus::kOk) return status;
  if (h.hash != expected_hash || out.size() != h.raw_bytes) return BlockFileStatus::kCorrupt;
  std::vector<uint8_t> stored(h.stored_bytes);
  if (!in.read(reinterpret_cast<char*>(stored.data()),
               static_cast<std::streamsize>(stored.size())) ||
      XXH3_64bits(stored.data(), stored.size()) != h.payload_checksum ||
      !decompress_block(static_cast<OffloadCodec>(h.codec), stored, out) ||
      XXH3_64bits(out.data(), out.size()) != h.raw_checksum) {
    return BlockFileStatus::kCorrupt;
  }
  return BlockFileStatus::kOk;
}

}  // namespace rapide
