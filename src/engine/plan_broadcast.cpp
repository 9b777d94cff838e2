#include "engine/plan_broadcast.h"

#include <cstring>
#include <string>
#include <type_traits>

#include "base/error.h"

namespace rapide {

namespace {

constexpr uint32_t kMagic = 0x31535052;  // "RPS1"

class Writer {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &value, sizeof(T));
  }
  template <typename T>
  void put_all(const std::vector<T>& values) {
    put(static_cast<uint32_t>(values.size()));
    const size_t at = out_.size();
    out_.resize(at + values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(out_.data() + at, values.data(), values.size() * sizeof(T));
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  template <typename T>
  std::vector<T> get_all(const char* what) {
    const uint32_t n = get<uint32_t>(what);
    need(static_cast<size_t>(n) * sizeof(T), what);
    std::vector<T> values(n);
    if (n > 0) std::memcpy(values.data(), bytes_.data() + at_, values.size() * sizeof(T));
    at_ += values.size() * sizeof(T);
    return values;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  void need(size_t n, const char* what) {
    if (bytes_.size() - at_ < n) {
      fail(ErrorCode::kCorrupt, "plan broadcast truncated at byte {} (reading {})", at_, what);
    }
  }
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

void put_op(Writer& w, const KvOp& op) {
  w.put(static_cast<uint8_t>(op.kind));
  switch (op.kind) {
    case KvOp::Kind::kCopy:
    case KvOp::Kind::kCopySlots:
      w.put(op.src);
      w.put(op.dst);
      w.put(op.slots);
      break;
    case KvOp::Kind::kOffload:
      w.put(op.src);
      w.put(op.hash);
      w.put(op.parent);
      w.put_all(op.tokens);
      break;
    case KvOp::Kind::kRestore:
      w.put(op.dst);
      w.put(op.hash);
      break;
    case KvOp::Kind::kForget:
      w.put(op.hash);
      break;
    case KvOp::Kind::kImport:
      w.put(op.dst);
      w.put_all(op.bytes ? *op.bytes : std::vector<uint8_t>());
      break;
  }
}

KvOp get_op(Reader& r) {
  const uint8_t kind = r.get<uint8_t>("op kind");
  if (kind > static_cast<uint8_t>(KvOp::Kind::kForget)) {
    fail(ErrorCode::kCorrupt, "plan broadcast: unknown KV op kind {}", kind);
  }
  KvOp op;
  op.kind = static_cast<KvOp::Kind>(kind);
  switch (op.kind) {
    case KvOp::Kind::kCopy:
    case KvOp::Kind::kCopySlots:
      op.src = r.get<int32_t>("op src");
      op.dst = r.get<int32_t>("op dst");
      op.slots = r.get<int32_t>("op slots");
      break;
    case KvOp::Kind::kOffload:
      op.src = r.get<int32_t>("op src");
      op.hash = r.get<uint64_t>("op hash");
      op.parent = r.get<uint64_t>("op parent");
      op.tokens = r.get_all<int32_t>("op tokens");
      break;
    case KvOp::Kind::kRestore:
      op.dst = r.get<int32_t>("op dst");
      op.hash = r.get<uint64_t>("op hash");
      break;
    case KvOp::Kind::kForget:
      op.hash = r.get<uint64_t>("op hash");
      break;
    case KvOp::Kind::kImport:
      op.dst = r.get<int32_t>("op dst");
      op.bytes = std::make_shared<const std::vector<uint8_t>>(r.get_all<uint8_t>("op bytes"));
      break;
  }
  return op;
}

}  // namespace

std::vector<uint8_t> encode_plan_broadcast(const BroadcastHeader& h, const StepPlan& p) {
  Writer w;
  w.put(kMagic);
  w.put(static_cast<uint8_t>(h.hidden_only ? 1 : 0));
  w.put(h.kv_block_size);
  w.put(static_cast<uint8_t>(h.kv_type));
  w.put(static_cast<uint8_t>(h.tier ? 1 : 0));
  if (h.tier) {
    w.put(h.tier->ram_bytes);
    w.put(h.tier->disk_bytes);
    w.put(static_cast<uint32_t>(h.tier->codec));
    w.put_all(std::vector<char>(h.tier->dir.begin(), h.tier->dir.end()));
  }
  w.put(p.step);
  w.put(static_cast<uint32_t>(p.sequences.size()));
  for (const ScheduledSequence& s : p.sequences) {
    w.put(s.request_id);
    w.put(s.kv_id);
    w.put(s.start_position);
    w.put(s.logits_rows);
    w.put(static_cast<uint8_t>((s.is_decode ? 1 : 0) | (s.padding ? 2 : 0)));
    w.put_all(s.tokens);
    w.put_all(s.draft_tokens);
    w.put_all(s.block_table);
  }
  w.put_all(p.preempted);
  w.put(static_cast<uint32_t>(p.kv_ops.size()));
  for (const KvOp& op : p.kv_ops) put_op(w, op);
  w.put(static_cast<int32_t>(p.prefill_tokens));
  w.put(static_cast<int32_t>(p.decode_tokens));
  return w.take();
}

PlanBroadcast decode_plan_broadcast(std::span<const uint8_t> bytes) {
  Reader r(bytes);
  if (r.get<uint32_t>("magic") != kMagic) {
    fail(ErrorCode::kCorrupt, "not a plan broadcast (bad magic)");
  }
  PlanBroadcast m;
  BroadcastHeader& h = m.header;
  h.hidden_only = r.get<uint8_t>("hidden_only") != 0;
  h.kv_block_size = r.get<int32_t>("block size");
  const uint8_t type = r.get<uint8_t>("KV type");
  if (type > static_cast<uint8_t>(KvType::kQ4_0) || h.kv_block_size < 1) {
    fail(ErrorCode::kCorrupt, "plan broadcast: KV type {}, block size {}", type, h.kv_block_size);
  }
  h.kv_type = static_cast<KvType>(type);
  if (r.get<uint8_t>("tier flag") != 0) {
    OffloadTierOptions tier;
    tier.ram_bytes = r.get<uint64_t>("tier RAM");
    tier.disk_bytes = r.get<uint64_t>("tier disk");
    const uint32_t codec = r.get<uint32_t>("tier codec");
    if (codec > static_cast<uint32_t>(OffloadCodec::kZstd)) {
      fail(ErrorCode::kCorrupt, "plan broadcast: offload codec {}", codec);
    }
    tier.codec = static_cast<OffloadCodec>(codec);
    const std::vector<char> dir = r.get_all<char>("tier dir");
    tier.dir.assign(dir.begin(), dir.end());
    h.tier = tier;
  }
  StepPlan& p = m.plan;
  p.step = r.get<uint64_t>("step");
  const uint32_t n = r.get<uint32_t>("sequences");
  for (uint32_t i = 0; i < n; ++i) {
    ScheduledSequence s;
    s.request_id = r.get<RequestId>("request id");
    s.kv_id = r.get<int32_t>("kv id");
    s.start_position = r.get<int32_t>("start position");
    s.logits_rows = r.get<int32_t>("logits rows");
    const uint8_t flags = r.get<uint8_t>("flags");
    s.is_decode = (flags & 1) != 0;
    s.padding = (flags & 2) != 0;
    s.tokens = r.get_all<int32_t>("tokens");
    s.draft_tokens = r.get_all<int32_t>("draft tokens");
    s.block_table = r.get_all<int32_t>("block table");
    if (s.logits_rows < 0 || s.logits_rows > s.fed()) {
      fail(ErrorCode::kCorrupt, "plan broadcast: logits_rows {} outside 0..{}", s.logits_rows,
           s.fed());
    }
    p.sequences.push_back(std::move(s));
  }
  p.preempted = r.get_all<RequestId>("preempted");
  const uint32_t n_ops = r.get<uint32_t>("KV ops");
  for (uint32_t i = 0; i < n_ops; ++i) p.kv_ops.push_back(get_op(r));
  p.prefill_tokens = r.get<int32_t>("prefill tokens");
  p.decode_tokens = r.get<int32_t>("decode tokens");
  if (!r.done()) fail(ErrorCode::kCorrupt, "plan broadcast: trailing bytes");
  return m;
}

}  // namespace rapide
