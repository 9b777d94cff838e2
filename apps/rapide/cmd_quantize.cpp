// rapide quantize: rewrites a GGUF with its matrices in another weight type, as llama.cpp's
// llama-quantize does with round-to-nearest (no importance matrix): one type for every matrix
// (like `llama-quantize --pure`) or a preset mixing types by tensor role (Q4_K_M ...; the rules
// are in formats/quant_plan.h). Metadata and the tokenizer are copied; 1-D tensors (norms,
// biases) are copied unchanged. A quantized source is dequantized to f32 first (noted on
// stderr, since re-quantizing loses more than quantizing the original floats).
//
// Calibrated quantization (--method awq|gptq, --calibration, --imatrix, --imatrix-out,
// --smooth) replaces the matrices of every layer and the head with the values
// quant/calibrated_quantizer.h computes; the file's layout stays that of --type.
#include <fmt/format.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/rapide/commands.h"
#include "apps/rapide/write_progress.h"
#include "base/cpu_features.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "base/thread_pool.h"
#include "formats/gguf_reader.h"
#include "formats/gguf_writer.h"
#include "formats/quant_plan.h"
#include "kernels/matmul.h"
#include "quant/calibrated_quantizer.h"
#include "quant/imatrix.h"
#include "tokenizer/tokenizer.h"

namespace rapide::cli {
namespace {

struct QuantizeOptions {
  std::string input;
  std::string output;
  std::string type;
  std::string method = "rtn";
  std::string calibration;  // text file
  int calibration_tokens = 8192;
  std::string imatrix_in;
  std::string imatrix_out;
  float smooth = -1.0f;
  int threads = 0;

  bool calibrated() const {
    return method != "rtn" || !calibration.empty() || !imatrix_in.empty() || !imatrix_out.empty() ||
           smooth >= 0.0f;
  }
};

using quant::layer_of;

// Runs the calibration over the float model and returns the tensors it replaces.
quant::CalibrationResult run_calibration(const QuantizeOptions& o, const QuantPlan& plan,
                                         const QuantModelFacts& facts) {
  quant::CalibrationOptions c;
  c.method = o.method == "awq"    ? quant::CalibrationMethod::kAwq
             : o.method == "gptq" ? quant::CalibrationMethod::kGptq
                                  : quant::CalibrationMethod::kRtn;
  c.smooth_alpha = o.smooth;
  auto file = std::make_shared<const ModelFile>(load_model(o.input));
  if (!o.calibration.empty()) {
    const std::unique_ptr<Tokenizer> tokenizer = Tokenizer::create(file->tokenizer);
    c.tokens = tokenizer->encode(read_text_file(o.calibration), /*add_bos=*/true);
    if (static_cast<int>(c.tokens.size()) > o.calibration_tokens) {
      c.tokens.resize(static_cast<size_t>(o.calibration_tokens));
    }
    c.dataset = o.calibration;
    std::fprintf(stderr, "calibration: %zu tokens of %s\n", c.tokens.size(), o.calibration.c_str());
  }
  quant::Imatrix imatrix;
  if (!o.imatrix_in.empty()) {
    imatrix = quant::read_imatrix(o.imatrix_in);
    c.imatrix = &imatrix;
  }
  c.progress = calibration_progress_printer();
  ThreadPool pool(o.threads > 0 ? o.threads : physical_core_count());
  quant::CalibrationResult result = quant::calibrate(file, plan, facts, c, pool);
  for (const std::string& note : result.notes) std::fprintf(stderr, "  %s\n", note.c_str());
  if (!o.imatrix_out.empty()) {
    if (result.imatrix.entries.empty()) {
      fail(ErrorCode::kInvalidArgument, "--imatrix-out needs --calibration TEXT_FILE");
    }
    quant::write_imatrix(o.imatrix_out, result.imatrix);
    std::fprintf(stderr, "wrote importance matrix %s (%zu entries)\n", o.imatrix_out.c_str(),
                 result.imatrix.entries.size());
  }
  return result;
}

void run_quantize(const QuantizeOptions& o) {
  const std::optional<QuantPlan> plan = parse_quant_plan(o.type);
  if (!plan)
    fail(ErrorCode::kInvalidArgument, "--type '{}': use one of {} (any case)", o.type,
         quant_plan_names());
  std::error_code ec;
  if (o.input == o.output ||
      std::filesystem::equivalent(o.input, o.output, ec)) {  // ec set when OUT does not exist
    fail(ErrorCode::kInvalidArgument, "quantize: input and output are the same file ({})",
         o.output);
  }
  const GgufFile in = GgufFile::open(o.input);  // throws a clear error when unreadable

  QuantModelFacts facts;
  facts.has_output = in.find_tensor("output.weight") != nullptr;
  bool quantized_source = false;
  for (const GgufTensorInfo& t : in.tensors()) {
    if (!is_quantizable_tensor(t.name, t.shape)) continue;
    facts.n_attn_v += t.name.find("attn_v.weight") != std::string::npos;
    facts.n_ffn_down += t.name.find("ffn_down") != std::string::npos;
    quantized_source |= !is_float_type(t.type);
  }
  quant::CalibrationResult calibrated;
  if (o.calibrated()) calibrated = run_calibration(o, *plan, facts);
  if (quantized_source) {
    std::fprintf(stderr,
                 "note: %s has quantized matrices; they are dequantized to f32 and quantized "
                 "again (quality is lower than quantizing the original f16/f32 weights)\n",
                 o.input.c_str());
  }

  GgufWriter w;
  for (const GgufKeyValue& kv : in.metadata()) w.set(kv.key, kv.value);
  w.set("general.file_type", GgufValue::u32(quant_plan_file_type(*plan)));
  w.set("general.quantization_version", GgufValue::u32(2));

  // Unchanged tensors are copied from the mapping at write time, so a large model is never
  // held in memory twice.
  auto copy = [&w](const GgufTensorInfo& t) {
    const uint8_t* src = t.data;
    const size_t size = t.size_bytes;
    w.add_tensor(t.name, t.type, t.shape, [=](uint8_t* out) { std::memcpy(out, src, size); });
  };
  std::map<std::string, int> type_counts;
  uint64_t in_bytes = 0;
  for (const GgufTensorInfo& t : in.tensors()) {
    in_bytes += t.size_bytes;
    if (!is_quantizable_tensor(t.name, t.shape)) {
      if (auto it = calibrated.tensors.find(t.name); it != calibrated.tensors.end()) {
        // A norm weight that absorbed channel scales: same type and shape, new values.
        auto data = std::make_shared<std::vector<uint8_t>>(std::move(it->second.data));
        w.add_tensor(t.name, t.type, t.shape,
                     [data](uint8_t* out) { std::memcpy(out, data->data(), data->size()); });
        ++type_counts[std::string(tensor_type_name(t.type))];
        continue;
      }
      copy(t);
      ++type_counts[std::string(tensor_type_name(t.type))];
      continue;
    }
    const TensorType to = choose_tensor_type(t.name, t.shape, layer_of(t.name), *plan, facts);
    ++type_counts[std::string(tensor_type_name(to))];
    if (auto it = calibrated.tensors.find(t.name); it != calibrated.tensors.end()) {
      auto data = std::make_shared<std::vector<uint8_t>>(std::move(it->second.data));
      w.add_tensor(t.name, it->second.type, t.shape,
                   [data](uint8_t* out) { std::memcpy(out, data->data(), data->size()); });
      continue;
    }
    if (to == t.type) {
      copy(t);
      continue;
    }
    const int64_t cols = t.shape[0];
    int64_t rows = 1;
    for (size_t d = 1; d < t.shape.size(); ++d) rows *= t.shape[d];
    const TensorType from = t.type;
    const uint8_t* src = t.data;
    w.add_tensor(t.name, to, t.shape, [=](uint8_t* out) {
      std::vector<float> row(static_cast<size_t>(cols));
      const int64_t in_row = tensor_row_bytes(from, cols), out_row = tensor_row_bytes(to, cols);
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(from, src + r * in_row, row.data(), cols);
        quantize_row(to, row.data(), out + r * out_row, cols);
      }
    });
  }

  std::string summary;
  for (const auto& [name, count] : type_counts) summary += fmt::format(" {}x{}", count, name);
  std::fprintf(stderr, "quantizing %s -> %s as %s (%s): %zu tensors (%s)\n", o.input.c_str(),
               o.output.c_str(), plan->name.c_str(), o.method.c_str(), in.tensors().size(),
               summary.c_str() + 1);
  w.write(o.output, write_progress_printer());
  std::printf("wrote %s: %.1f MiB of tensor data (from %.1f MiB), %s\n", o.output.c_str(),
              static_cast<double>(w.tensor_data_bytes()) / (1 << 20),
              static_cast<double>(in_bytes) / (1 << 20), plan->name.c_str());
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Rewrite a GGUF with quantized weights (a single type or a Q4_K_M-style mix)");
  cmd->add_option("input", o->input, "source GGUF (f32/f16/bf16; quantized ones are dequantized)")
      ->required();
  cmd->add_option("output", o->output, "GGUF to write")->required();
  cmd->add_option("--type", o->type,
                  "q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs "
                  "(every matrix that type) or Q3_K_M, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M (mixed "
                  "by tensor role as llama-quantize)")
      ->required();
  cmd->add_option("--method", o->method,
                  "rtn (round-to-nearest), awq (activation-aware channel scales) or gptq "
                  "(AWQ's scales, then Hessian-compensated rounding); awq and gptq need "
                  "--calibration")
      ->check(CLI::IsMember({"rtn", "awq", "gptq"}));
  cmd->add_option("--calibration", o->calibration,
                  "text file the float model runs over to collect activation statistics")
      ->check(CLI::ExistingFile);
  cmd->add_option("--calibration-tokens", o->calibration_tokens,
                  "use at most this many tokens of the calibration text (default 8192)")
      ->check(CLI::Range(16, 1 << 24));
  cmd->add_option("--imatrix", o->imatrix_in,
                  "llama.cpp importance matrix (imatrix.dat): weights the rounding, and stands "
                  "in for --calibration in awq / --smooth")
      ->check(CLI::ExistingFile);
  cmd->add_option("--imatrix-out", o->imatrix_out,
                  "write the calibration's importance matrix in llama.cpp's imatrix format");
  cmd->add_option("--smooth", o->smooth,
                  "SmoothQuant: migrate activation outliers into the weights with strength "
                  "ALPHA in [0, 1] before quantizing")
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("-t,--threads", o->threads, "threads of the calibration runs")
      ->check(CLI::Range(0, 1024));
  cmd->callback([o] { run_quantize(*o); });
}

}  // namespace rapide::cli
