// `rapide tokenize -m MODEL [--ids|--pieces] TEXT|-f FILE`: the token ids of a text, so a
// vocabulary can be checked against another engine without writing C++. Works on any model
// rapide loads and on vocabulary-only GGUF files (llama.cpp's models/ggml-vocab-*.gguf).
//
// Output, one token a line by default: "<id>\t<piece>", the piece quoted and escaped (see
// quoted_piece). --ids: the ids on one line separated by spaces, the format of llama.cpp's
// .out conformance files. --pieces: the quoted pieces only, one a line.
#include <fmt/format.h>

#include <cstdio>
#include <string>
#include <vector>

#include "apps/rapide/commands.h"
#include "apps/rapide/tokenizer_loading.h"
#include "base/error.h"
#include "base/mapped_file.h"
#include "tokenizer/utf8.h"

namespace rapide::cli {
namespace {

struct TokenizeOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string text;
  std::string file;
  bool ids = false;
  bool pieces = false;
  bool no_bos = false;
  bool special = false;
};

// A piece between single quotes, readable whatever its bytes: \n \r \t \\ \' escaped, other
// control bytes and bytes that are not (yet) a whole UTF-8 character as \xNN (a byte-level
// token may hold part of a character).
std::string quoted_piece(std::string_view piece) {
  std::string out = "'";
  while (!piece.empty()) {
    const auto byte = static_cast<unsigned char>(piece.front());
    size_t length = 1;
    switch (byte) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      default:
        if (byte < 0x20 || byte == 0x7F) {
          out += fmt::format("\\x{:02X}", byte);
        } else if (byte < 0x80) {
          out += static_cast<char>(byte);
        } else if (const utf8::CharCheck c = utf8::check_char(piece);
                   c.status == utf8::CharStatus::kComplete) {
          out += piece.substr(0, c.length);
          length = c.length;
        } else {
          out += fmt::format("\\x{:02X}", byte);
        }
    }
    piece.remove_prefix(length);
  }
  return out + "'";
}

void tokenize(const TokenizeOptions& options) {
  if (options.text.empty() == options.file.empty()) {
    fail(ErrorCode::kInvalidArgument, "give exactly one of TEXT and -f/--file");
  }
  if (options.ids && options.pieces) {
    fail(ErrorCode::kInvalidArgument, "--ids and --pieces exclude each other");
  }
  // The file's bytes exactly, trailing newline included: it is part of the text.
  const std::string text = options.file.empty() ? options.text : read_text_file(options.file);
  const auto tokenizer = load_tokenizer(options.model_path, options.tokenizer_path);
  const std::vector<int32_t> ids = tokenizer->encode(text, !options.no_bos, options.special);
  std::string out;
  if (options.ids) {
    for (size_t i = 0; i < ids.size(); ++i) out += fmt::format("{}{}", i ? " " : "", ids[i]);
    out += '\n';
  } else {
    for (const int32_t id : ids) {
      // Control tokens show their text: an empty piece would hide which token it is.
      const std::string piece = quoted_piece(tokenizer->token_to_piece(id, true));
      out += options.pieces ? piece + "\n" : fmt::format("{}\t{}\n", id, piece);
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = app.add_subcommand("tokenize", "print the tokens of a text");
  add_tokenizer_source_options(cmd, &options->model_path, &options->tokenizer_path);
  cmd->add_option("text", options->text, "the text to tokenize");
  cmd->add_option("-f,--file", options->file, "tokenize this file's bytes instead");
  cmd->add_flag("--ids", options->ids, "print only the ids, on one line");
  cmd->add_flag("--pieces", options->pieces, "print only the pieces, one a line");
  cmd->add_flag("--no-bos", options->no_bos, "do not prepend the BOS token");
  cmd->add_flag("--special", options->special,
                "parse special tokens (e.g. <|im_start|>) in the text");
  cmd->callback([options] { tokenize(*options); });
}

}  // namespace rapide::cli
