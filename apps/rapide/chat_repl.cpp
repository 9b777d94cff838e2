#include "apps/rapide/chat_repl.h"

#include <readline/history.h>
#include <readline/readline.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include <fmt/format.h>

#include "base/error.h"

namespace rapide::cli {

namespace {

using nlohmann::json;

constexpr const char* kHelp =
    "  /system TEXT       set the system message (the conversation is kept)\n"
    "  /reset             forget the conversation (the system message stays)\n"
    "  /save FILE         write the conversation as JSON ({\"messages\": [...]})\n"
    "  /params            show the sampling parameters; /params NAME VALUE sets one\n"
    "                     (temperature, top_p, top_k, min_p, max_tokens, seed)\n"
    "  /help, /quit       this text; leave (Ctrl-D too)\n"
    "  a line ending in \\ continues on the next; \"\"\" opens and closes a multi-line block\n";

// One line from readline (nullopt at end of input), added to the history when not blank.
std::optional<std::string> read_line(const char* prompt) {
  char* raw = readline(prompt);
  if (raw == nullptr) return std::nullopt;
  std::string line(raw);
  std::free(raw);
  if (line.find_first_not_of(" \t") != std::string::npos) add_history(line.c_str());
  return line;
}

// A whole user message: continuation lines ('\' at the end) and """ blocks joined with
// newlines. nullopt at end of input.
std::optional<std::string> read_message() {
  std::optional<std::string> line = read_line("> ");
  if (!line) return std::nullopt;
  if (*line == "\"\"\"") {
    std::string text;
    for (;;) {
      std::optional<std::string> next = read_line(". ");
      if (!next || *next == "\"\"\"") return text;
      text += (text.empty() ? "" : "\n") + *next;
    }
  }
  std::string text = *line;
  while (!text.empty() && text.back() == '\\') {
    text.back() = '\n';
    std::optional<std::string> next = read_line(". ");
    if (!next) break;
    text += *next;
  }
  return text;
}

std::string params_text(const SamplingParams& p) {
  return fmt::format("temperature {} | top_p {} | top_k {} | min_p {} | max_tokens {} | seed {}\n",
                     p.temperature, p.top_p, p.top_k, p.min_p, p.max_tokens, p.seed);
}

// "/params NAME VALUE": sets one parameter, or throws Error(kInvalidArgument).
void set_param(SamplingParams& p, const std::string& name, const std::string& value) {
  try {
    if (name == "temperature" || name == "temp") {
      p.temperature = std::stof(value);
    } else if (name == "top_p") {
      p.top_p = std::stof(value);
    } else if (name == "top_k") {
      p.top_k = std::stoi(value);
    } else if (name == "min_p") {
      p.min_p = std::stof(value);
    } else if (name == "max_tokens") {
      p.max_tokens = std::stoi(value);
    } else if (name == "seed") {
      p.seed = std::stoull(value);
    } else {
      fail(ErrorCode::kInvalidArgument,
           "unknown parameter '{}' (temperature, top_p, top_k, min_p, max_tokens, seed)", name);
    }
  } catch (const std::logic_error&) {  // stof / stoi: not a number
    fail(ErrorCode::kInvalidArgument, "'{}' is not a value for {}", value, name);
  }
}

json with_system(const json& history, const std::string& system) {
  json messages = json::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  for (const json& m : history) messages.push_back(m);
  return messages;
}

// Handles a /command; returns false for /quit.
bool run_command(const std::string& line, std::string& system, json& history,
                 SamplingParams& sampling) {
  const size_t space = line.find(' ');
  const std::string command = line.substr(0, space);
  std::string argument = space == std::string::npos ? "" : line.substr(space + 1);
  if (command == "/quit" || command == "/exit") return false;
  if (command == "/help") {
    std::fputs(kHelp, stdout);
  } else if (command == "/system") {
    system = argument;
    std::printf("system message %s\n", system.empty() ? "cleared" : "set");
  } else if (command == "/reset") {
    history = json::array();
    std::printf("conversation cleared\n");
  } else if (command == "/save") {
    if (argument.empty()) fail(ErrorCode::kInvalidArgument, "/save needs a file name");
    std::ofstream out(argument);
    out << json{{"messages", with_system(history, system)}}.dump(2) << "\n";
    out.close();  // written before "saved" is printed: a script may read it at once
    if (!out) fail(ErrorCode::kNotFound, "cannot write {}", argument);
    std::printf("saved %zu messages to %s\n", history.size() + (system.empty() ? 0 : 1),
                argument.c_str());
  } else if (command == "/params") {
    const size_t split = argument.find(' ');
    if (!argument.empty()) {
      if (split == std::string::npos) fail(ErrorCode::kInvalidArgument, "/params NAME VALUE");
      set_param(sampling, argument.substr(0, split), argument.substr(split + 1));
    }
    std::fputs(params_text(sampling).c_str(), stdout);
  } else {
    fail(ErrorCode::kInvalidArgument, "unknown command {} (/help lists them)", command);
  }
  return true;
}

}  // namespace

void run_chat_repl(ChatBackend& backend, SamplingParams sampling,
                   const std::string& initial_system) {
  std::string system = initial_system;
  json history = json::array();
  std::string history_file;
  if (const char* home = std::getenv("HOME")) {
    history_file = std::string(home) + "/.rapide_history";
    read_history(history_file.c_str());
  }
  std::printf("rapide chat: /help for commands, Ctrl-D to quit\n");
  for (;;) {
    std::fflush(stdout);
    std::optional<std::string> message = read_message();
    if (!message) break;
    if (message->find_first_not_of(" \t\n") == std::string::npos) continue;
    try {
      if (message->front() == '/') {
        if (!run_command(*message, system, history, sampling)) break;
        continue;
      }
      history.push_back({{"role", "user"}, {"content", *message}});
      std::string reply;
      const ChatReplyStats stats = backend.reply(
          with_system(history, system), sampling,
          [](const std::string& text) {
            std::fputs(text.c_str(), stdout);
            std::fflush(stdout);
          },
          reply);
      history.push_back({{"role", "assistant"}, {"content", reply}});
      std::printf("\n[prompt %d tokens | TTFT %.1f ms | TPOT %.2f ms | %d tokens, %s]\n",
                  stats.prompt_tokens, stats.ttft_seconds * 1e3, stats.tpot_seconds * 1e3,
                  stats.completion_tokens, stats.finish_reason.c_str());
    } catch (const std::exception& e) {
      // A failed turn leaves the conversation as it was before it.
      if (!history.empty() && history.back()["role"] == "user" && message->front() != '/') {
        history.erase(history.size() - 1);
      }
      std::printf("error: %s\n", e.what());
    }
  }
  std::printf("\n");
  if (!history_file.empty()) write_history(history_file.c_str());
}

}  // namespace rapide::cli
