// `rapide lora merge BASE ADAPTER -o OUT.gguf [--scale S]`: one adapter folded into a copy of
// its base model (lora/lora_merge.h), llama-export-lora's job.
#include <cstdio>
#include <memory>
#include <string>

#include "apps/rapide/commands.h"
#include "lora/lora_merge.h"

namespace rapide::cli {

namespace {

struct MergeOptions {
  std::string base;
  std::string adapter;
  std::string output;
  float scale = 1.0f;
};

void run_merge(const MergeOptions& o) {
  const LoraSpec spec{"merged", o.adapter, o.scale};
  const LoraMergeReport r = merge_lora(o.base, spec, o.output);
  const std::string converted = r.converted_f16 > 0 ? ", " + std::to_string(r.converted_f16) +
                                                          " quantized ones written as F16"
                                                    : "";
  std::printf("wrote %s: %d matrices merged (scale %g)%s, %.1f MiB of tensor data\n",
              o.output.c_str(), r.merged, o.scale, converted.c_str(),
              static_cast<double>(r.bytes) / (1 << 20));
}

}  // namespace

void register_lora(CLI::App& app) {
  CLI::App* lora = app.add_subcommand("lora", "LoRA adapter tools");
  lora->require_subcommand(1);
  auto o = std::make_shared<MergeOptions>();
  CLI::App* merge = lora->add_subcommand(
      "merge", "Write a GGUF of the base model with one adapter merged into its matrices");
  merge->add_option("base", o->base, "base model GGUF")->required();
  merge->add_option("adapter", o->adapter, "LoRA GGUF or PEFT folder for that base")->required();
  merge->add_option("-o,--output", o->output, "GGUF to write")->required();
  merge->add_option("--scale", o->scale, "the adapter's scale (multiplies alpha/r)")
      ->capture_default_str();
  merge->callback([o] { run_merge(*o); });
}

}  // namespace rapide::cli
