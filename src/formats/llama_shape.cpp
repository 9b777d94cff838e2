#include "formats/llama_shape.h"

#include <algorithm>
#include <charconv>
#include <map>

#include "base/error.h"

namespace rapide {

LlamaShape parse_llama_shape(const std::string& text, LlamaShape s, const std::string& option) {
  std::map<std::string, int*> fields = {{"dim", &s.dim},     {"layers", &s.layers},
                                        {"heads", &s.heads}, {"kv_heads", &s.kv_heads},
                                        {"ffn", &s.ffn},     {"ctx", &s.ctx}};
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    auto it = eq == std::string::npos ? fields.end() : fields.find(item.substr(0, eq));
    int value = 0;
    const char* last = item.data() + item.size();
    if (it == fields.end() || std::from_chars(item.data() + eq + 1, last, value).ptr != last ||
        value <= 0) {
      fail(ErrorCode::kInvalidArgument,
           "{}: '{}' is not key=positive-integer with key one of dim, layers, heads, "
           "kv_heads, ffn, ctx",
           option, item);
    }
    *it->second = value;
    start = end + 1;
  }
  if (s.dim % s.heads != 0 || s.heads % s.kv_heads != 0 || (s.dim / s.heads) % 2 != 0) {
    fail(ErrorCode::kInvalidArgument,
         "{}: heads must divide dim (with an even head size) and kv_heads must divide heads",
         option);
  }
  return s;
}

void set_llama_hyperparameters(GgufWriter& w, const LlamaShape& s) {
  w.set("general.architecture", GgufValue::string("llama"));
  w.set("llama.context_length", GgufValue::u32(static_cast<uint32_t>(s.ctx)));
  w.set("llama.embedding_length", GgufValue::u32(static_cast<uint32_t>(s.dim)));
  w.set("llama.block_count", GgufValue::u32(static_cast<uint32_t>(s.layers)));
  w.set("llama.feed_forward_length", GgufValue::u32(static_cast<uint32_t>(s.ffn)));
  w.set("llama.attention.head_count", GgufValue::u32(static_cast<uint32_t>(s.heads)));
  w.set("llama.attention.head_count_kv", GgufValue::u32(static_cast<uint32_t>(s.kv_heads)));
  w.set("llama.attention.layer_norm_rms_epsilon", GgufValue::f32(s.rms_eps));
  w.set("llama.rope.freq_base", GgufValue::f32(s.rope_base));
  w.set("llama.rope.dimension_count", GgufValue::u32(static_cast<uint32_t>(s.head_dim())));
  w.set("llama.vocab_size", GgufValue::u32(static_cast<uint32_t>(s.vocab)));
}

}  // namespace rapide
