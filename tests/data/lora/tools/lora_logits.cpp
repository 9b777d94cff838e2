// Records llama.cpp's logits for one token sequence, optionally with LoRA adapters applied,
// exactly as shared/reference/llamacpp/README.md section 5 describes the originals: default
// model params (mmap, CPU), n_ctx = n_batch = n_ubatch = n_tokens, 1 thread, F16 KV cache,
// flash attention off, one llama_batch of every token (seq 0, positions 0..n-1, logits on
// every row), a single llama_decode, then llama_get_logits_ith(i) for i = 0..n-1 as float32.
//
//   lora_logits MODEL TOKENS_TXT SEQ_NAME OUT [ADAPTER SCALE]...
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 5 || (argc - 5) % 2 != 0) {
    std::fprintf(stderr, "usage: %s MODEL TOKENS_TXT SEQ_NAME OUT [ADAPTER SCALE]...\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> tokens;
  {
    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream f(line);
      std::string name;
      size_t n = 0;
      f >> name >> n;
      if (name != argv[3]) continue;
      tokens.resize(n);
      for (auto& t : tokens) f >> t;
    }
  }
  if (tokens.empty()) {
    std::fprintf(stderr, "sequence %s not found\n", argv[3]);
    return 1;
  }
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return 1;
  const int n = static_cast<int>(tokens.size());
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = cp.n_batch = cp.n_ubatch = n;
  // NOISE_UBATCH=1: the README's noise-floor variant (section 6.6 of reference/llamacpp):
  // the same single llama_decode call cut into micro-batches of that many tokens.
  if (const char* u = std::getenv("NOISE_UBATCH")) cp.n_ubatch = std::atoi(u);
  cp.n_threads = cp.n_threads_batch = 1;
  cp.type_k = cp.type_v = GGML_TYPE_F16;
  cp.flash_attn = false;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  for (int a = 5; a + 1 < argc; a += 2) {
    llama_adapter_lora* lora = llama_adapter_lora_init(model, argv[a]);
    if (!lora || llama_set_adapter_lora(ctx, lora, std::strtof(argv[a + 1], nullptr)) != 0) {
      std::fprintf(stderr, "cannot apply %s\n", argv[a]);
      return 1;
    }
  }
  llama_batch batch = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = i;
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;
  }
  batch.n_tokens = n;
  if (llama_decode(ctx, batch) != 0) return 1;
  const int vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  FILE* out = std::fopen(argv[4], "wb");
  for (int i = 0; i < n; ++i) std::fwrite(llama_get_logits_ith(ctx, i), sizeof(float), vocab, out);
  std::fclose(out);
  llama_batch_free(batch);
  llama_free(ctx);
  llama_model_free(model);
  std::printf("%s: %d x %d logits\n", argv[4], n, vocab);
  return 0;
}
