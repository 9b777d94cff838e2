#include "formats/llama2c_loader.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <filesystem>
#include <initializer_list>

#include "base/error.h"
#include "base/logging.h"
#include "base/mapped_file.h"
#include "formats/byte_reader.h"
#include "formats/model_checks.h"

namespace rapide {
namespace {

constexpr size_t kLegacyHeaderBytes = 7 * 4;
constexpr size_t kV1HeaderBytes = 256;
// Far above any llama2.c model; rejects garbage that happens to parse as seven ints.
constexpr int kMaxSize = 1 << 20;

// Walks the weights in file order and hands out consecutive f32 views.
class WeightCursor {
 public:
  WeightCursor(const uint8_t* data, size_t offset) : data_(data), offset_(offset) {}
  const uint8_t* take(int64_t floats) {
    const uint8_t* p = data_ + offset_;
    offset_ += static_cast<size_t>(floats) * 4;
    return p;
  }
  void skip(int64_t floats) { offset_ += static_cast<size_t>(floats) * 4; }

 private:
  const uint8_t* data_;
  size_t offset_;
};

void add(ModelFile& m, std::string name, std::vector<int64_t> shape, const uint8_t* data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  m.tensors.push_back(
      {std::move(name), TensorType::kF32, std::move(shape), data, static_cast<size_t>(n) * 4});
}

// Per-layer tensors stored as one block of n_layers consecutive [rows x cols] matrices.
void add_layers(ModelFile& m, WeightCursor& w, const char* suffix, int n_layers,
                std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  for (int l = 0; l < n_layers; ++l) add(m, fmt::format("blk.{}.{}", l, suffix), shape, w.take(n));
}

std::string find_tokenizer(const std::string& path, const LoadOptions& options, int vocab) {
  namespace fs = std::filesystem;
  if (!options.tokenizer_path.empty()) {
    if (!fs::exists(options.tokenizer_path)) {
      fail(ErrorCode::kNotFound, "tokenizer '{}' does not exist", options.tokenizer_path);
    }
    return options.tokenizer_path;
  }
  const fs::path dir = fs::path(path).parent_path();
  for (const fs::path& candidate : {dir / "tokenizer.bin", dir / fmt::format("tok{}.bin", vocab)}) {
    if (fs::exists(candidate)) return candidate.string();
  }
  return "";
}

}  // namespace

Llama2cHeader parse_llama2c_header(const uint8_t* data, size_t size, const std::string& file) {
  ByteReader r(data, size, file);
  Llama2cHeader h;
  if (size >= 8 && r.read<uint32_t>("magic") == kLlama2cMagic) {
    h.version = r.read<int32_t>("version");
    if (h.version != 1) {
      fail(ErrorCode::kUnsupported,
           "'{}': llama2.c checkpoint version {} is not supported (only legacy and v1 fp32{})",
           file, h.version, h.version == 2 ? "; v2 is the int8-quantized export" : "");
    }
    h.header_bytes = kV1HeaderBytes;
  } else {
    r = ByteReader(data, size, file);
    h.header_bytes = kLegacyHeaderBytes;
  }
  if (size < h.header_bytes) {
    fail(ErrorCode::kCorrupt, "'{}': {} bytes is too small for a llama2.c checkpoint", file, size);
  }
  int* fields[] = {&h.dim,        &h.hidden_dim, &h.n_layers, &h.n_heads,
                   &h.n_kv_heads, &h.vocab_size, &h.seq_len};
  for (int* f : fields) *f = r.read<int32_t>("header");
  if (h.version == 0) {
    // Legacy: a negative vocabulary size flags a separate classifier matrix.
    h.shared_classifier = h.vocab_size > 0;
    if (h.vocab_size < 0 && h.vocab_size != INT32_MIN) h.vocab_size = -h.vocab_size;
  } else {
    h.shared_classifier = r.read<uint8_t>("shared_classifier flag") != 0;
  }
  const auto describe = [&] {
    return fmt::format("dim {}, hidden {}, layers {}, heads {}, kv heads {}, vocab {}, seq_len {}",
                       h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size,
                       h.seq_len);
  };
  for (int* f : fields) {
    if (*f <= 0 || *f > kMaxSize) {
      fail(ErrorCode::kCorrupt,
           "'{}': not a model file: not GGUF, and as a llama2.c header ({}) "
           "the sizes are implausible",
           file, describe());
    }
  }
  if (h.dim % h.n_heads != 0 || h.n_heads % h.n_kv_heads != 0 || (h.dim / h.n_heads) % 2 != 0) {
    fail(ErrorCode::kCorrupt,
         "'{}': llama2.c header ({}): heads must divide dim and KV heads must divide heads, "
         "with an even head size",
         file, describe());
  }
  const int64_t dim = h.dim, hidden = h.hidden_dim, layers = h.n_layers, vocab = h.vocab_size;
  const int64_t head = dim / h.n_heads, kv_dim = head * h.n_kv_heads;
  // Sizes up to kMaxSize each can take the total past int64: every product and sum is
  // checked (a wrapped total is undefined behaviour, and could even equal the file size).
  bool overflow = false;
  const auto product = [&](std::initializer_list<int64_t> factors) {
    int64_t p = 1;
    for (const int64_t f : factors) overflow |= __builtin_mul_overflow(p, f, &p);
    return p;
  };
  int64_t floats = 0;
  const auto add = [&](int64_t v) { overflow |= __builtin_add_overflow(floats, v, &floats); };
  add(product({vocab, dim}));                            // token embedding
  add(product({layers, dim, 2}));                        // rms_att, rms_ffn
  add(product({layers, dim, dim + 2 * kv_dim + dim}));   // wq, wk, wv, wo
  add(product({layers, dim, hidden, 3}));                // w1, w2, w3
  add(dim);                                              // rms_final
  if (!h.shared_classifier) add(product({vocab, dim}));  // classifier
  if (h.version == 0) add(product({h.seq_len, head}));   // freq_cis real+imag
  const int64_t header_bytes = static_cast<int64_t>(h.header_bytes);
  overflow |= __builtin_mul_overflow(floats, int64_t{4}, &h.expected_file_bytes) ||
              __builtin_add_overflow(h.expected_file_bytes, header_bytes, &h.expected_file_bytes);
  if (overflow) {
    fail(ErrorCode::kCorrupt,
         "'{}': not a model file: not GGUF, and as a llama2.c header ({}) its sizes overflow "
         "64-bit arithmetic",
         file, describe());
  }
  if (h.expected_file_bytes != static_cast<int64_t>(size)) {
    fail(ErrorCode::kCorrupt,
         "'{}': llama2.c {} checkpoint is {} bytes but its header ({}, {} classifier) implies {} "
         "bytes",
         file, h.version == 0 ? "legacy" : "v1", size, describe(),
         h.shared_classifier ? "shared" : "separate", h.expected_file_bytes);
  }
  return h;
}

ModelFile load_llama2c(const std::string& path, const LoadOptions& options) {
  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  const Llama2cHeader h = parse_llama2c_header(file->data(), file->size(), path);
  ModelFile m;
  m.path = path;
  m.format = "llama2c";
  m.storage.push_back(file);
  ModelConfig& c = m.config;
  c.architecture = "llama";
  c.name = std::filesystem::path(path).stem().string();
  c.dim = h.dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.head_dim = h.dim / h.n_heads;
  c.ffn_dim = h.hidden_dim;
  c.vocab_size = h.vocab_size;
  c.max_context = h.seq_len;
  c.rms_eps = 1e-5f;  // llama2.c run.c hard-codes these
  c.rope_theta = 10000.0f;
  c.rope_style = RopeStyle::kNormal;
  c.tied_embeddings = h.shared_classifier;

  const int64_t dim = c.dim, q = c.q_dim(), kv = c.kv_dim(), ffn = c.ffn_dim;
  WeightCursor w(file->data(), h.header_bytes);
  if (h.version == 0) {
    add(m, "token_embd.weight", {dim, c.vocab_size}, w.take(dim * c.vocab_size));
    add_layers(m, w, "attn_norm.weight", c.n_layers, {dim});
    add_layers(m, w, "attn_q.weight", c.n_layers, {dim, q});
    add_layers(m, w, "attn_k.weight", c.n_layers, {dim, kv});
    add_layers(m, w, "attn_v.weight", c.n_layers, {dim, kv});
    add_layers(m, w, "attn_output.weight", c.n_layers, {q, dim});
    add_layers(m, w, "ffn_norm.weight", c.n_layers, {dim});
    add_layers(m, w, "ffn_gate.weight", c.n_layers, {dim, ffn});
    add_layers(m, w, "ffn_down.weight", c.n_layers, {ffn, dim});
    add_layers(m, w, "ffn_up.weight", c.n_layers, {dim, ffn});
    add(m, "output_norm.weight", {dim}, w.take(dim));
    w.skip(static_cast<int64_t>(h.seq_len) * c.head_dim);  // precomputed RoPE tables
  } else {
    add_layers(m, w, "attn_norm.weight", c.n_layers, {dim});
    add_layers(m, w, "ffn_norm.weight", c.n_layers, {dim});
    add(m, "output_norm.weight", {dim}, w.take(dim));
    add(m, "token_embd.weight", {dim, c.vocab_size}, w.take(dim * c.vocab_size));
    add_layers(m, w, "attn_q.weight", c.n_layers, {dim, q});
    add_layers(m, w, "attn_k.weight", c.n_layers, {dim, kv});
    add_layers(m, w, "attn_v.weight", c.n_layers, {dim, kv});
    add_layers(m, w, "attn_output.weight", c.n_layers, {q, dim});
    add_layers(m, w, "ffn_gate.weight", c.n_layers, {dim, ffn});
    add_layers(m, w, "ffn_down.weight", c.n_layers, {ffn, dim});
    add_layers(m, w, "ffn_up.weight", c.n_layers, {dim, ffn});
  }
  if (!h.shared_classifier) {
    add(m, "output.weight", {dim, c.vocab_size}, w.take(dim * c.vocab_size));
  }
  // List tensors as a GGUF does (embedding, then layer by layer, then the head) rather than
  // in llama2.c's storage order, which groups each kind across layers.
  const auto rank = [](const std::string& name) -> int64_t {
    if (name == "token_embd.weight") return -1;
    if (name.starts_with("blk.")) return std::stoll(name.substr(4));
    return INT32_MAX;
  };
  std::stable_sort(
      m.tensors.begin(), m.tensors.end(),
      [&](const TensorView& a, const TensorView& b) { return rank(a.name) < rank(b.name); });

  const std::string tokenizer = find_tokenizer(path, options, c.vocab_size);
  if (tokenizer.empty()) {
    spdlog::warn(
        "'{}': no tokenizer.bin or tok{}.bin next to the checkpoint; loading without a "
        "vocabulary (pass a tokenizer path)",
        path, c.vocab_size);
  } else {
    m.tokenizer = read_llama2c_tokenizer(tokenizer, c.vocab_size);
  }
  check_model(m);
  return m;
}

TokenizerData read_llama2c_tokenizer(const std::string& path, int vocab_size) {
  std::shared_ptr<MappedFile> file = MappedFile::open(path);
  return parse_llama2c_tokenizer(file->data(), file->size(), path, vocab_size);
}

TokenizerData parse_llama2c_tokenizer(const uint8_t* data, size_t size, const std::string& file,
                                      int vocab_size) {
  ByteReader r(data, size, file);
  const int32_t max_token_length = r.read<int32_t>("max_token_length");
  if (max_token_length < 0) {
    fail(ErrorCode::kCorrupt, "'{}': negative max_token_length {}", file, max_token_length);
  }
  TokenizerData t;
  t.kind = TokenizerKind::kSentencePiece;
  t.bos_id = 1;
  t.eos_id = 2;
  t.unk_id = 0;
  t.tokens.reserve(vocab_size);
  for (int i = 0; i < vocab_size; ++i) {
    const std::string what = fmt::format("token {}", i);
    t.scores.push_back(r.read<float>(what));
    const int32_t length = r.read<int32_t>(what);
    if (length < 0 || length > max_token_length) {
      fail(ErrorCode::kCorrupt, "'{}': token {} has length {} (max_token_length is {})", file, i,
           length, max_token_length);
    }
    const uint8_t* bytes = r.take(static_cast<uint64_t>(length), what);
    std::string text(reinterpret_cast<const char*>(bytes), static_cast<size_t>(length));
    // export.py wrote BOS/EOS with newlines around them and spaces for U+2581; undo both so
    // the vocabulary matches the SentencePiece model (and a GGUF converted from it).
    if (i == 1 && text == "\n<s>\n") text = "<s>";
    if (i == 2 && text == "\n</s>\n") text = "</s>";
    std::string piece;
    for (char ch : text) {
      if (ch == ' ') {
        piece += "\xe2\x96\x81";
      } else {
        piece += ch;
      }
    }
    TokenType type = TokenType::kNormal;
    if (i == 0) {
      type = TokenType::kUnknown;
    } else if (i == 1 || i == 2) {
      type = TokenType::kControl;
    } else if (piece.size() == 6 && piece.starts_with("<0x") && piece.back() == '>' &&
               std::isxdigit(static_cast<unsigned char>(piece[3])) &&
               std::isxdigit(static_cast<unsigned char>(piece[4]))) {
      type = TokenType::kByte;
    }
    t.tokens.push_back(std::move(piece));
    t.types.push_back(type);
  }
  if (r.remaining() != 0) {
    fail(ErrorCode::kCorrupt,
         "'{}': {} bytes follow the model's {} tokens (a tokenizer for a larger vocabulary?)", file,
         r.remaining(), vocab_size);
  }
  return t;
}

}  // namespace rapide
