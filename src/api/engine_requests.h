// A parsed request -> the engine requests that run it: the one place `rapide serve` and
// `rapide batch` turn a GenerationSpec into engine work, so both admit, refuse and seed a
// request the same way.
//
// Choice index = prompt * n + i. Choice i of a prompt samples with
// seed + i * 0x9E3779B97F4A7C15 (the 64-bit golden-ratio increment): choice 0 keeps the
// request's seed, so n=1 and n>1 agree on the first choice, and the others get well-spread
// seeds that are still a pure function of the request's (so "seed" reproduces every choice).
//
// Engine refusals become ApiErrors whose param is the request field the prompt came from
// ("messages" for chat, "prompt" for completions) unless the message names its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "api/openai_protocol.h"
#include "engine/engine.h"

namespace rapide::api {

// The request field an engine refusal of a prompt is about.
const char* prompt_param(Endpoint endpoint);

// The seed choice `i` (0-based, within its prompt) samples with.
uint64_t choice_seed(uint64_t request_seed, int i);

// The most token entries one response may hold: a generated token is one entry, and with
// logprobs it brings 1 + top_logprobs. Bounds a response's size and the memory to build it
// (n=128 x logprobs 20 x 2000 tokens took 1.41 GB before this bound).
constexpr uint64_t kMaxResponseEntries = 1u << 19;

// Engine::check_admissible for every prompt of `spec`, refused as ApiError, then the response
// budget: n x the tokens each choice can generate (max_tokens, bounded by the context) x
// entries per token must stay within kMaxResponseEntries (400 "response_too_large"). Every
// prompt is checked before any choice is queued, so a refused request queues nothing.
void check_admissible(const Engine& engine, const GenerationSpec& spec);

// Submits every choice of `spec` (prompts x n, in choice order); `sink_for(choice)` gives a
// choice's event sink. If the engine refuses one, the choices already submitted are aborted
// and the refusal is thrown as ApiError. Returns the engine ids by choice index.
std::vector<RequestId> submit_choices(
    Engine& engine, const GenerationSpec& spec,
    const std::function<std::shared_ptr<EventSink>(size_t choice)>& sink_for);

}  // namespace rapide::api
