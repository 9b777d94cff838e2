// The tokenizers of the shared test models, loaded through rapide_formats: every route to the
// same vocabulary (GGUF, llama2.c tokenizer.bin, Hugging Face tokenizer.json) must give the
// same ids, and the reference prompts must encode as llama.cpp encoded them.
#include <gtest/gtest.h>

#include <filesystem>

#include "conformance_files.h"
#include "formats/hf_tokenizer.h"
#include "formats/model_file.h"
#include "llama2c_run_encode.h"
#include "tokenizer/tokenizer.h"

namespace rapide {
namespace {

using testing::read_file;
using testing::shared_path;
using Ids = std::vector<int32_t>;

struct Prompt {
  std::string file_suffix;  // reference/greedy/<model>__<suffix>.txt
  std::string text;
};
const std::vector<Prompt> kPrompts = {
    {"Once_upon_a_time", "Once upon a time"},
    {"Lily_and_Tom_went_to_the_park", "Lily and Tom went to the park"},
    {"One_day__a_boy_named_Tim_found_a", "One day, a boy named Tim found a"},
    {"The_little_dog_was_sad_because", "The little dog was sad because"},
};

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& relative) {
  return Tokenizer::create(load_model(shared_path(relative)).tokenizer);
}

// The reference greedy outputs of `model` (BOS text and prompt stripped off) plus the
// perplexity text: a few KB of the stories these vocabularies were trained on.
std::vector<std::string> story_texts(const std::string& model, const std::string& bos_text) {
  std::vector<std::string> texts;
  for (const Prompt& p : kPrompts) {
    std::string text =
        read_file(shared_path("reference/greedy/" + model + "__" + p.file_suffix + ".txt"));
    if (text.starts_with(bos_text + " ")) text.erase(0, bos_text.size() + 1);
    texts.push_back(text);
  }
  texts.push_back(read_file(shared_path("reference/text/stories-eval.txt")));
  return texts;
}

// What llama.cpp's llama-simple printed before the continuation: each prompt token rendered
// with special tokens visible, BOS included.
std::string rendered(const Tokenizer& tok, const Ids& ids) {
  std::string text;
  for (const int32_t id : ids) text += tok.token_to_piece(id, /*render_special=*/true);
  return text;
}

TEST(Stories260KTokenizer, BinAndGgufAgreeWithEachOtherAndWithRunC) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  // stories260K.bin has no vocabulary: the loader picks tok512.bin next to it.
  const auto from_bin = load_tokenizer("models/stories260K/stories260K.bin");
  const auto from_gguf = load_tokenizer("models/stories260K/stories260K.gguf");
  ASSERT_EQ(from_bin->vocab_size(), 512);
  ASSERT_EQ(from_gguf->vocab_size(), 512);
  const testing::Llama2cRunEncoder run_c(shared_path("models/stories260K/tok512.bin"), 512);

  for (const std::string& text : story_texts("stories260K", "<s>")) {
    const Ids ids = from_gguf->encode(text, true);
    EXPECT_EQ(from_bin->encode(text, true), ids);
    EXPECT_EQ(from_gguf->decode(ids), text);
    // run.c encodes one call's text at a time; compare line by line to keep its O(n^2) short.
    size_t start = 0;
    while (start < text.size()) {
      const size_t end = std::min(text.find('\n', start), text.size());
      const std::string line = text.substr(start, end - start);
      EXPECT_EQ(from_bin->encode(line, true), run_c.encode(line, true)) << line;
      start = end + 1;
    }
  }
}

TEST(Stories260KTokenizer, ReferencePromptsEncodeLikeLlamaCpp) {
  RAPIDE_REQUIRE_SHARED("models/stories260K/stories260K.gguf");
  const auto tok = load_tokenizer("models/stories260K/stories260K.gguf");
  // Ids from llama2.c run.c (which llama.cpp matches on this vocabulary).
  const std::vector<Ids> expected = {
      {1, 403, 407, 261, 378},
      {1, 317, 269, 274, 287, 263, 377, 267, 265, 282, 295, 433},
      {1, 385, 328, 432, 261, 268, 414, 422, 395, 326, 272, 277, 264, 261},
      {1, 291, 376, 400, 428, 286, 296, 418, 329, 429, 412, 425, 372},
  };
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const Ids ids = tok->encode(kPrompts[i].text, true);
    EXPECT_EQ(ids, expected[i]) << kPrompts[i].text;
    const std::string reference =
        read_file(shared_path("reference/greedy/stories260K__" + kPrompts[i].file_suffix + ".txt"));
    EXPECT_TRUE(reference.starts_with(rendered(*tok, ids)))
        << "'" << rendered(*tok, ids) << "' does not start " << reference.substr(0, 60);
  }
}

TEST(TinyStories656KTokenizer, GgufAndHuggingFaceAgree) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k/TinyStories-656K-F16.gguf");
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k/hf/tokenizer.json");
  const auto from_gguf = load_tokenizer("models/tinystories-656k/TinyStories-656K-F16.gguf");
  // Straight from tokenizer.json (with config.json's values), so this checks the tokenizer
  // route without depending on the weights loading.
  HfTokenizerInputs hf;
  hf.tokenizer_json = read_file(shared_path("models/tinystories-656k/hf/tokenizer.json"));
  hf.tokenizer_config_json =
      read_file(shared_path("models/tinystories-656k/hf/tokenizer_config.json"));
  hf.vocab_size = 2048;
  hf.config_bos_id = 1;
  hf.config_eos_id = 2;
  hf.model_type = "llama";
  const auto from_hf = Tokenizer::create(parse_hf_tokenizer(hf, "tinystories-656k/hf"));
  ASSERT_EQ(from_gguf->vocab_size(), 2048);
  ASSERT_EQ(from_hf->vocab_size(), 2048);
  EXPECT_EQ(from_gguf->data().tokens, from_hf->data().tokens);
  EXPECT_EQ(from_gguf->bos_id(), from_hf->bos_id());
  EXPECT_EQ(from_gguf->eos_id(), from_hf->eos_id());
  for (const std::string& text : story_texts("TinyStories-656K-F16", "<|start_story|>")) {
    const Ids ids = from_gguf->encode(text, true);
    EXPECT_EQ(from_hf->encode(text, true), ids);
    EXPECT_EQ(from_gguf->decode(ids), text);
    EXPECT_EQ(from_hf->decode(ids), text);
  }
  EXPECT_TRUE(from_gguf->is_end_of_generation(2));  // <|end_story|>
}

TEST(TinyStories656KTokenizer, ReferencePromptsEncodeLikeLlamaCpp) {
  RAPIDE_REQUIRE_SHARED("models/tinystories-656k/TinyStories-656K-F16.gguf");
  // The GGUF's converter wrote score -1000 for every token, so llama.cpp merges the leftmost
  // mergeable pair first; these ids follow from that rule (not from the HF merges, which
  // would give e.g. 4 pieces instead of 8 for the second prompt).
  const std::vector<Ids> expected = {
      {1, 80, 147, 201, 282, 57},
      {1, 80, 669, 388, 1140, 66, 364, 93, 455},
      {1, 80, 429, 1705, 480, 148, 82, 53},
      {1, 80, 247, 158, 420, 177, 401, 1864, 164, 295, 823, 57},
  };
  for (const std::string model : {"TinyStories-656K-F16", "TinyStories-656K-Q8_0"}) {
    const auto tok = load_tokenizer("models/tinystories-656k/" + model + ".gguf");
    for (size_t i = 0; i < kPrompts.size(); ++i) {
      const Ids ids = tok->encode(kPrompts[i].text, true);
      EXPECT_EQ(ids, expected[i]) << model << ": " << kPrompts[i].text;
      const std::string reference = read_file(
          shared_path("reference/greedy/" + model + "__" + kPrompts[i].file_suffix + ".txt"));
      EXPECT_TRUE(reference.starts_with(rendered(*tok, ids)))
          << "'" << rendered(*tok, ids) << "' does not start " << reference.substr(0, 60);
    }
  }
}

}  // namespace
}  // namespace rapide
