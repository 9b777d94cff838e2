#include "train/checkpoint.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/error.h"

namespace rapide::train {

namespace {

constexpr char kMagic[8] = {'R', 'P', 'D', 'T', 'R', 'N', '0', '1'};

struct Header {
  char magic[8];
  int64_t step;
  int64_t parameters;
  int32_t dim, layers, heads, kv_heads, head_dim, ffn, vocab, ctx, tied, neox;
  float rms_eps, rope_theta, rope_scale, pad;
};

Header header_of(int64_t step, const TrainModel& model) {
  const TrainShape& s = model.shape();
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.step = step;
  h.parameters = model.parameter_count();
  h.dim = s.dim;
  h.layers = s.layers;
  h.heads = s.heads;
  h.kv_heads = s.kv_heads;
  h.head_dim = s.head_dim;
  h.ffn = s.ffn;
  h.vocab = s.vocab;
  h.ctx = s.ctx;
  h.tied = s.tied;
  h.neox = s.neox;
  h.rms_eps = s.rms_eps;
  h.rope_theta = s.rope_theta;
  h.rope_scale = s.rope_scale;
  return h;
}

using File = std::unique_ptr<FILE, int (*)(FILE*)>;

}  // namespace

void save_checkpoint(const std::string& path, int64_t step, const TrainModel& model,
                     AdamW& optimizer) {
  const std::string temporary = path + ".tmp";
  {
    File f(std::fopen(temporary.c_str(), "wb"), &std::fclose);
    if (!f) fail(ErrorCode::kUnavailable, "cannot write checkpoint '{}'", temporary);
    const Header h = header_of(step, model);
    const size_t n = model.params().size();
    bool ok = std::fwrite(&h, sizeof h, 1, f.get()) == 1;
    const std::vector<float>* parts[] = {&model.params(), &optimizer.m(), &optimizer.v()};
    for (const std::vector<float>* part : parts) {
      ok = ok && std::fwrite(part->data(), sizeof(float), n, f.get()) == n;
    }
    ok = ok && std::fwrite(&optimizer.updates(), sizeof(int64_t), 1, f.get()) == 1;
    if (!ok || std::fflush(f.get()) != 0) {
      fail(ErrorCode::kUnavailable, "writing checkpoint '{}' failed", temporary);
    }
  }
  std::filesystem::rename(temporary, path);
}

int64_t load_checkpoint(const std::string& path, TrainModel& model, AdamW& optimizer) {
  File f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) fail(ErrorCode::kNotFound, "cannot open checkpoint '{}'", path);
  Header h{};
  if (std::fread(&h, sizeof h, 1, f.get()) != 1 || std::memcmp(h.magic, kMagic, sizeof kMagic)) {
    fail(ErrorCode::kCorrupt, "'{}' is not a rapide training checkpoint", path);
  }
  Header expected = header_of(h.step, model);
  if (std::memcmp(&h, &expected, sizeof h) != 0) {
    fail(ErrorCode::kInvalidArgument,
         "checkpoint '{}' is of another model shape (dim {}, layers {}, ffn {}, {} parameters)",
         path, h.dim, h.layers, h.ffn, h.parameters);
  }
  const size_t n = model.params().size();
  bool ok = true;
  for (std::vector<float>* part : {&model.params(), &optimizer.m(), &optimizer.v()}) {
    ok = ok && std::fread(part->data(), sizeof(float), n, f.get()) == n;
  }
  ok = ok && std::fread(&optimizer.updates(), sizeof(int64_t), 1, f.get()) == 1;
  if (!ok) fail(ErrorCode::kCorrupt, "checkpoint '{}' is truncated", path);
  return h.step;
}

}  // namespace rapide::train
