#include "engine/step_json.h"

#include <string>

#include "base/error.h"

namespace rapide {

using nlohmann::json;

namespace {

// A required field of the expected JSON kind, or a clear error naming it.
const json& field(const json& object, const char* name, json::value_t kind) {
  if (!object.is_object()) fail(ErrorCode::kInvalidArgument, "step JSON: expected an object");
  const auto it = object.find(name);
  const bool number_ok =
      kind == json::value_t::number_integer && it != object.end() && it->is_number_integer();
  if (it == object.end() || (it->type() != kind && !number_ok)) {
    fail(ErrorCode::kInvalidArgument, "step JSON: '{}' is missing or of the wrong type", name);
  }
  return *it;
}

const json& array(const json& object, const char* name) {
  return field(object, name, json::value_t::array);
}

int64_t integer(const json& object, const char* name) {
  return field(object, name, json::value_t::number_integer).get<int64_t>();
}

uint64_t unsigned_integer(const json& object, const char* name) {
  const auto it = object.find(name);
  const bool ok = it != object.end() && (it->is_number_unsigned() ||
                                         (it->is_number_integer() && it->get<int64_t>() >= 0));
  if (!ok)
    fail(ErrorCode::kInvalidArgument, "step JSON: '{}' must be a non-negative integer", name);
  return it->get<uint64_t>();
}

bool boolean(const json& object, const char* name) {
  return field(object, name, json::value_t::boolean).get<bool>();
}

std::vector<int32_t> ints(const json& object, const char* name) {
  std::vector<int32_t> out;
  for (const json& v : array(object, name)) {
    if (!v.is_number_integer()) {
      fail(ErrorCode::kInvalidArgument, "step JSON: '{}' must hold integers", name);
    }
    out.push_back(v.get<int32_t>());
  }
  return out;
}

const char* reason_name(FinishReason r) {
  return finish_reason_name(r);
}

FinishReason reason_from(const std::string& name) {
  for (FinishReason r :
       {FinishReason::kLength, FinishReason::kStop, FinishReason::kAbort, FinishReason::kError}) {
    if (name == reason_name(r)) return r;
  }
  fail(ErrorCode::kInvalidArgument, "step JSON: unknown finish reason '{}'", name);
}

// Block bytes (imports) as hex: a log format, read back exactly.
std::string to_hex(const std::vector<uint8_t>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    out.push_back(kDigits[b >> 4]);
    out.push_back(kDigits[b & 15]);
  }
  return out;
}

std::vector<uint8_t> from_hex(const std::string& text) {
  const auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    fail(ErrorCode::kInvalidArgument, "step JSON: 'bytes' must be lowercase hex");
  };
  if (text.size() % 2 != 0) fail(ErrorCode::kInvalidArgument, "step JSON: 'bytes' has odd length");
  std::vector<uint8_t> out(text.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<uint8_t>(digit(text[2 * i]) << 4 | digit(text[2 * i + 1]));
  }
  return out;
}

json kv_op_to_json(const KvOp& op) {
  json j = {{"op", kv_op_kind_name(op.kind)}};
  switch (op.kind) {
    case KvOp::Kind::kCopy:
      j["src"] = op.src;
      j["dst"] = op.dst;
      break;
    case KvOp::Kind::kCopySlots:
      j["src"] = op.src;
      j["dst"] = op.dst;
      j["slots"] = op.slots;
      break;
    case KvOp::Kind::kOffload:
      j["src"] = op.src;
      j["hash"] = op.hash;
      j["parent"] = op.parent;
      j["tokens"] = op.tokens;
      break;
    case KvOp::Kind::kRestore:
      j["dst"] = op.dst;
      j["hash"] = op.hash;
      break;
    case KvOp::Kind::kForget:
      j["hash"] = op.hash;
      break;
    case KvOp::Kind::kImport:
      j["dst"] = op.dst;
      j["bytes"] = op.bytes ? to_hex(*op.bytes) : std::string();
      break;
  }
  return j;
}

KvOp kv_op_from_json(const json& j) {
  const std::string name = field(j, "op", json::value_t::string).get<std::string>();
  KvOp op;
  bool known = false;
  for (KvOp::Kind k : {KvOp::Kind::kCopy, KvOp::Kind::kCopySlots, KvOp::Kind::kOffload,
                       KvOp::Kind::kRestore, KvOp::Kind::kImport, KvOp::Kind::kForget}) {
    if (name == kv_op_kind_name(k)) {
      op.kind = k;
      known = true;
    }
  }
  if (!known) fail(ErrorCode::kInvalidArgument, "step JSON: unknown KV op '{}'", name);
  const auto block = [&](const char* key) { return static_cast<int32_t>(integer(j, key)); };
  switch (op.kind) {
    case KvOp::Kind::kCopy:
      op.src = block("src");
      op.dst = block("dst");
      break;
    case KvOp::Kind::kCopySlots:
      op.src = block("src");
      op.dst = block("dst");
      op.slots = block("slots");
      break;
    case KvOp::Kind::kOffload:
      op.src = block("src");
      op.hash = unsigned_integer(j, "hash");
      op.parent = unsigned_integer(j, "parent");
      op.tokens = ints(j, "tokens");
      break;
    case KvOp::Kind::kRestore:
      op.dst = block("dst");
      op.hash = unsigned_integer(j, "hash");
      break;
    case KvOp::Kind::kForget:
      op.hash = unsigned_integer(j, "hash");
      break;
    case KvOp::Kind::kImport:
      op.dst = block("dst");
      op.bytes = std::make_shared<const std::vector<uint8_t>>(
          from_hex(field(j, "bytes", json::value_t::string).get<std::string>()));
      break;
  }
  return op;
}

}  // namespace

json step_plan_to_json(const StepPlan& plan) {
  json sequences = json::array();
  for (const ScheduledSequence& s : plan.sequences) {
    sequences.push_back({{"request_id", s.request_id},
                         {"kv_id", s.kv_id},
                         {"start_position", s.start_position},
                         {"tokens", s.tokens},
                         {"draft_tokens", s.draft_tokens},
                         {"logits_rows", s.logits_rows},
                         {"block_table", s.block_table},
                         {"is_decode", s.is_decode},
                         {"adapter", s.adapter},
                         {"padding", s.padding}});
  }
  json kv_ops = json::array();
  for (const KvOp& op : plan.kv_ops) kv_ops.push_back(kv_op_to_json(op));
  return {{"step", plan.step},
          {"sequences", std::move(sequences)},
          {"kv_ops", std::move(kv_ops)},
          {"preempted", plan.preempted},
          {"prefill_tokens", plan.prefill_tokens},
          {"decode_tokens", plan.decode_tokens}};
}

StepPlan step_plan_from_json(const json& j) {
  StepPlan plan;
  plan.step = unsigned_integer(j, "step");
  for (const json& s : array(j, "sequences")) {
    ScheduledSequence out;
    out.request_id = unsigned_integer(s, "request_id");
    out.kv_id = static_cast<int32_t>(integer(s, "kv_id"));
    out.start_position = static_cast<int32_t>(integer(s, "start_position"));
    out.tokens = ints(s, "tokens");
    out.draft_tokens = ints(s, "draft_tokens");
    out.logits_rows = static_cast<int32_t>(integer(s, "logits_rows"));
    out.block_table = ints(s, "block_table");
    out.is_decode = boolean(s, "is_decode");
    // Absent in steps recorded before adapters existed: the model alone.
    if (s.contains("adapter")) out.adapter = static_cast<int32_t>(integer(s, "adapter"));
    out.padding = boolean(s, "padding");
    if (out.logits_rows < 0 || out.logits_rows > out.fed()) {
      fail(ErrorCode::kInvalidArgument, "step JSON: logits_rows {} outside 0..{}", out.logits_rows,
           out.fed());
    }
    plan.sequences.push_back(std::move(out));
  }
  for (const json& id : array(j, "preempted")) {
    if (!id.is_number_unsigned() && !id.is_number_integer()) {
      fail(ErrorCode::kInvalidArgument, "step JSON: 'preempted' must hold request ids");
    }
    plan.preempted.push_back(id.get<RequestId>());
  }
  // Optional: plans recorded before KV ops were part of the plan have none.
  if (j.contains("kv_ops")) {
    for (const json& op : array(j, "kv_ops")) plan.kv_ops.push_back(kv_op_from_json(op));
  }
  plan.prefill_tokens = static_cast<int>(integer(j, "prefill_tokens"));
  plan.decode_tokens = static_cast<int>(integer(j, "decode_tokens"));
  return plan;
}

json step_result_to_json(const StepResult& result) {
  json outputs = json::array();
  for (const SequenceOutput& o : result.outputs) {
    json tokens = json::array();
    for (const SampledToken& t : o.tokens) {
      json top = json::array();
      for (const TokenLogprob& l : t.top_logprobs) top.push_back({l.token, l.logprob});
      tokens.push_back({{"token", t.token}, {"logprob", t.logprob}, {"top_logprobs", top}});
    }
    json out = {{"request_id", o.request_id}, {"tokens", std::move(tokens)}};
    if (o.finish) out["finish"] = reason_name(*o.finish);
    if (!o.error.empty()) out["error"] = o.error;
    outputs.push_back(std::move(out));
  }
  return {{"step", result.step}, {"outputs", std::move(outputs)}};
}

StepResult step_result_from_json(const json& j) {
  StepResult result;
  result.step = unsigned_integer(j, "step");
  for (const json& o : array(j, "outputs")) {
    SequenceOutput out;
    out.request_id = unsigned_integer(o, "request_id");
    for (const json& t : array(o, "tokens")) {
      SampledToken token;
      token.token = static_cast<int32_t>(integer(t, "token"));
      token.logprob = field(t, "logprob", json::value_t::number_float).get<float>();
      for (const json& l : array(t, "top_logprobs")) {
        if (!l.is_array() || l.size() != 2) {
          fail(ErrorCode::kInvalidArgument, "step JSON: a top_logprobs entry is [token, logprob]");
        }
        token.top_logprobs.push_back({l[0].get<int32_t>(), l[1].get<float>()});
      }
      out.tokens.push_back(std::move(token));
    }
    if (const auto f = o.find("finish"); f != o.end()) {
      if (!f->is_string()) fail(ErrorCode::kInvalidArgument, "step JSON: 'finish' is a string");
      out.finish = reason_from(f->get<std::string>());
    }
    if (const auto e = o.find("error"); e != o.end() && e->is_string()) {
      out.error = e->get<std::string>();
    }
    result.outputs.push_back(std::move(out));
  }
  return result;
}

}  // namespace rapide
