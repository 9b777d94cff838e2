#include "distributed/step_wire.h"

#include <algorithm>

#include "base/error.h"

namespace rapide {

namespace {

constexpr int32_t kMagic = 0x52505031;  // "RPP1"

class Reader {
 public:
  explicit Reader(std::span<const int32_t> words) : words_(words) {}
  int32_t next() {
    if (at_ >= words_.size()) fail(ErrorCode::kCorrupt, "pass message truncated at word {}", at_);
    return words_[at_++];
  }
  std::vector<int32_t> take(int32_t n) {
    if (n < 0 || words_.size() - at_ < static_cast<size_t>(n)) {
      fail(ErrorCode::kCorrupt, "pass message: {} words announced, {} left", n,
           words_.size() - at_);
    }
    std::vector<int32_t> out(words_.begin() + at_, words_.begin() + at_ + n);
    at_ += n;
    return out;
  }
  bool done() const { return at_ == words_.size(); }

 private:
  std::span<const int32_t> words_;
  size_t at_ = 0;
};

}  // namespace

PassMessage make_pass_message(const Batch& batch, const KvStore& kv, bool hidden_only) {
  PassMessage m;
  m.hidden_only = hidden_only;
  m.layout = kv.layout();
  m.batch = batch;
  std::vector<int32_t> seqs(batch.seq_ids);
  std::sort(seqs.begin(), seqs.end());
  seqs.erase(std::unique(seqs.begin(), seqs.end()), seqs.end());
  for (int32_t seq : seqs) {
    const std::span<const int32_t> table = kv.block_table(seq);
    m.block_tables.emplace_back(seq, std::vector<int32_t>(table.begin(), table.end()));
  }
  return m;
}

std::vector<int32_t> encode_pass(const PassMessage& m) {
  const KvLayout& l = m.layout;
  std::vector<int32_t> w = {
      kMagic,       m.hidden_only ? 1 : 0,        l.n_layers,    l.n_kv_heads, l.head_dim,
      l.block_size, static_cast<int32_t>(l.type), m.batch.size()};
  w.insert(w.end(), m.batch.tokens.begin(), m.batch.tokens.end());
  w.insert(w.end(), m.batch.seq_ids.begin(), m.batch.seq_ids.end());
  w.insert(w.end(), m.batch.positions.begin(), m.batch.positions.end());
  w.insert(w.end(), m.batch.needs_logits.begin(), m.batch.needs_logits.end());
  w.push_back(static_cast<int32_t>(m.block_tables.size()));
  for (const auto& [seq, blocks] : m.block_tables) {
    w.push_back(seq);
    w.push_back(static_cast<int32_t>(blocks.size()));
    w.insert(w.end(), blocks.begin(), blocks.end());
  }
  w.push_back(static_cast<int32_t>(m.kv_ops.size()));
  for (const KvOp& op : m.kv_ops) {
    if (op.kind != KvOp::Kind::kCopy && op.kind != KvOp::Kind::kCopySlots) {
      fail(ErrorCode::kUnsupported,
           "KV op '{}' cannot be sent to tensor/pipeline-parallel ranks: the offload tier and "
           "disaggregation are not supported with --tp / --pp",
           kv_op_kind_name(op.kind));
    }
    w.insert(w.end(), {static_cast<int32_t>(op.kind), op.src, op.dst, op.slots});
  }
  return w;
}

PassMessage decode_pass(std::span<const int32_t> words) {
  Reader r(words);
  if (r.next() != kMagic) fail(ErrorCode::kCorrupt, "not a pass message (bad magic)");
  PassMessage m;
  m.hidden_only = r.next() != 0;
  m.layout.n_layers = r.next();
  m.layout.n_kv_heads = r.next();
  m.layout.head_dim = r.next();
  m.layout.block_size = r.next();
  const int32_t type = r.next();
  if (type < 0 || type > static_cast<int32_t>(KvType::kQ4_0)) {
    fail(ErrorCode::kCorrupt, "pass message: unknown KV type {}", type);
  }
  m.layout.type = static_cast<KvType>(type);
  const int32_t n = r.next();
  m.batch.tokens = r.take(n);
  m.batch.seq_ids = r.take(n);
  m.batch.positions = r.take(n);
  for (int32_t flag : r.take(n)) m.batch.needs_logits.push_back(flag != 0 ? 1 : 0);
  const int32_t n_tables = r.next();
  for (int32_t i = 0; i < n_tables; ++i) {
    const int32_t seq = r.next();
    m.block_tables.emplace_back(seq, r.take(r.next()));
  }
  const int32_t n_ops = r.next();
  if (n_ops < 0) fail(ErrorCode::kCorrupt, "pass message: {} KV ops", n_ops);
  for (int32_t i = 0; i < n_ops; ++i) {
    KvOp op;
    const int32_t kind = r.next();
    if (kind != static_cast<int32_t>(KvOp::Kind::kCopy) &&
        kind != static_cast<int32_t>(KvOp::Kind::kCopySlots)) {
      fail(ErrorCode::kCorrupt, "pass message: KV op kind {}", kind);
    }
    op.kind = static_cast<KvOp::Kind>(kind);
    op.src = r.next();
    op.dst = r.next();
    op.slots = r.next();
    m.kv_ops.push_back(op);
  }
  if (!r.done()) fail(ErrorCode::kCorrupt, "pass message: trailing words");
  return m;
}

}  // namespace rapide
