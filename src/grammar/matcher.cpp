#include "grammar/matcher.h"

#include <algorithm>

#include "base/error.h"

namespace rapide::grammar {

Matcher::Matcher(const Grammar& grammar) : grammar_(grammar) {}

void Matcher::set_limit(uint64_t limit, const std::atomic<bool>* cancelled) {
  limit_ = limit;
  cancelled_ = cancelled;
  reset_work();
}

void Matcher::reset_work() {
  work_ = 0;
  schedule_check();
}

void Matcher::schedule_check() {
  // The first unit past the limit, or sooner when there is a flag to poll.
  check_at_ = limit_ == UINT64_MAX ? limit_ : limit_ + 1;
  if (cancelled_ != nullptr) check_at_ = std::min(check_at_, work_ + kCheckEvery);
}

void Matcher::check_work() {
  const bool cancelled = cancelled_ != nullptr && cancelled_->load(std::memory_order_relaxed);
  if (cancelled || work_ > limit_) {
    work_list_.clear();  // an expansion cut short: the next one starts clean
    if (cancelled) fail(ErrorCode::kCancelled, "grammar: the request was cancelled");
    fail(ErrorCode::kExceedsCapacity,
         "grammar: following the grammar for one token took more than {} matcher steps (the "
         "per-token limit); the grammar is too expensive to follow",
         limit_);
  }
  schedule_check();
}

int32_t Matcher::intern(uint32_t pos, int32_t parent) {
  const uint64_t k = (uint64_t{pos} << 32) | static_cast<uint32_t>(parent + 1);
  auto [it, inserted] = index_.emplace(k, static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

bool Matcher::first_visit(uint64_t pair) {
  // Most expansions visit a handful of pairs: a linear scan of those, and a table (marked with
  // the call's number, so nothing is cleared per call) only for the rest.
  for (size_t i = 0; i < n_recent_; ++i) {
    if (recent_[i] == pair) return false;
  }
  if (n_recent_ < recent_.size()) {
    recent_[n_recent_++] = pair;
    return true;
  }
  const auto [it, inserted] = expanded_in_.try_emplace(pair, expansion_);
  if (inserted) return true;
  if (it->second == expansion_) return false;
  it->second = expansion_;
  return true;
}

void Matcher::expand(MatchState& out) {
  // A work list rather than recursion: a chain of leading references, or of rules ending
  // together, can be as long as the (untrusted) grammar. Each (position, parent) is expanded
  // once per call: `x1 ::= x2 | x2`, `x2 ::= x3 | x3`, ... would otherwise expand 2^n times
  // into the same stacks.
  ++expansion_;
  n_recent_ = 0;
  const std::vector<Element>& elements = grammar_.elements();
  while (!work_list_.empty()) {
    charge(1);
    const Node w = work_list_.back();
    work_list_.pop_back();
    if (!first_visit((uint64_t{w.pos} << 32) | static_cast<uint32_t>(w.parent + 1))) continue;
    const Element& e = elements[w.pos];
    switch (e.kind) {
      case ElementKind::kBytes:
        out.stacks.push_back(intern(w.pos, w.parent));
        break;
      case ElementKind::kEnd:
      case ElementKind::kRuleEnd:
        if (w.parent < 0) {
          out.accepts = true;
        } else {
          work_list_.push_back(nodes_[static_cast<size_t>(w.parent)]);
        }
        break;
      case ElementKind::kRule: {
        // Tail position: returning would only pop again, so push nothing.
        const int32_t ret =
            elements[w.pos + 1].kind == ElementKind::kEnd ? w.parent : intern(w.pos + 1, w.parent);
        for (const uint32_t alt : grammar_.alternatives(e.rule)) work_list_.push_back({alt, ret});
        break;
      }
    }
  }
}

void Matcher::normalize(MatchState& state) {
  std::sort(state.stacks.begin(), state.stacks.end());
  state.stacks.erase(std::unique(state.stacks.begin(), state.stacks.end()), state.stacks.end());
}

MatchState Matcher::initial() {
  MatchState state;
  for (const uint32_t alt : grammar_.alternatives(grammar_.root())) work_list_.push_back({alt, -1});
  expand(state);
  normalize(state);
  return state;
}

void Matcher::advance(const MatchState& from, uint8_t b, MatchState& to) {
  to.stacks.clear();
  to.accepts = false;
  charge(from.stacks.size());
  for (const int32_t id : from.stacks) {
    const Node n = nodes_[static_cast<size_t>(id)];
    if (grammar_.elements()[n.pos].bytes.has(b)) work_list_.push_back({n.pos + 1, n.parent});
  }
  expand(to);
  normalize(to);
}

bool Matcher::advance(MatchState& state, std::string_view bytes) {
  MatchState next;
  for (const char c : bytes) {
    advance(state, static_cast<uint8_t>(c), next);
    std::swap(state, next);
    if (state.stacks.empty() && !state.accepts) return false;
  }
  return true;
}

ByteSet Matcher::next_bytes(const MatchState& state) const {
  ByteSet set;
  for (const int32_t id : state.stacks) {
    set |= grammar_.elements()[nodes_[static_cast<size_t>(id)].pos].bytes;
  }
  return set;
}

std::string Matcher::key(const MatchState& state) const {
  std::vector<std::string> stacks;
  stacks.reserve(state.stacks.size());
  for (int32_t id : state.stacks) {
    std::string s;
    for (; id >= 0; id = nodes_[static_cast<size_t>(id)].parent) {
      const uint32_t pos = nodes_[static_cast<size_t>(id)].pos;
      s.append(reinterpret_cast<const char*>(&pos), sizeof pos);
    }
    stacks.push_back(std::move(s));
  }
  std::sort(stacks.begin(), stacks.end());
  std::string key(state.accepts ? "A" : "-");
  for (const std::string& s : stacks) {
    const uint32_t size = static_cast<uint32_t>(s.size());
    key.append(reinterpret_cast<const char*>(&size), sizeof size);
    key += s;
  }
  return key;
}

int32_t Matcher::intern_state(MatchState&& state) {
  if (state.dead()) return kDead;
  std::string k(reinterpret_cast<const char*>(state.stacks.data()),
                state.stacks.size() * sizeof(int32_t));
  k += state.accepts ? 'A' : '-';
  auto [it, inserted] = dfa_index_.emplace(std::move(k), static_cast<int32_t>(dfa_states_.size()));
  if (inserted) {
    const size_t stacks = state.stacks.size();
    dfa_stacks_ += stacks;
    dfa_states_.push_back(std::move(state));
    std::array<int32_t, 256> unknown;
    unknown.fill(kUnknown);
    transitions_.push_back(unknown);
    keys_.emplace_back();
    charge(kStateCost + stacks);  // may throw: the tables are consistent already
  }
  return it->second;
}

int32_t Matcher::initial_id() {
  return intern_state(initial());
}

int32_t Matcher::step(int32_t id, uint8_t b) {
  const int32_t known = transitions_[static_cast<size_t>(id)][b];
  if (known != kUnknown) return known;
  advance(dfa_states_[static_cast<size_t>(id)], b, scratch_);
  // Interning grows the tables: store through the index afterwards.
  const int32_t result = intern_state(std::move(scratch_));
  scratch_ = MatchState{};
  transitions_[static_cast<size_t>(id)][b] = result;
  return result;
}

size_t Matcher::footprint() const {
  // A node: its entry and a hash-map slot; a DFA state: its transition table, index entry
  // and stacks (the keys are a few per state and as long as its stacks).
  constexpr size_t kNodeBytes = sizeof(Node) + 40;
  constexpr size_t kStateBytes = sizeof(std::array<int32_t, 256>) + sizeof(MatchState) + 80;
  return nodes_.size() * kNodeBytes + dfa_states_.size() * kStateBytes +
         dfa_stacks_ * 3 * sizeof(int32_t) + expanded_in_.size() * 40;
}

int32_t Matcher::restart_from(int32_t id) {
  MatchState kept = dfa_states_[static_cast<size_t>(id)];
  const std::vector<Node> old = std::move(nodes_);
  nodes_.clear();
  index_.clear();
  expanded_in_.clear();
  // Each kept stack is interned again bottom up, sharing the parents already moved.
  std::unordered_map<int32_t, int32_t> moved;
  std::vector<int32_t> chain;
  for (int32_t& top : kept.stacks) {
    chain.clear();
    for (int32_t n = top; n >= 0 && !moved.count(n); n = old[static_cast<size_t>(n)].parent) {
      chain.push_back(n);
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const Node& node = old[static_cast<size_t>(*it)];
      moved[*it] = intern(node.pos, node.parent < 0 ? -1 : moved.at(node.parent));
    }
    top = moved.at(top);
  }
  normalize(kept);
  dfa_states_.clear();
  transitions_.clear();
  keys_.clear();
  dfa_index_.clear();
  dfa_stacks_ = 0;
  return intern_state(std::move(kept));
}

const std::string& Matcher::key_of(int32_t id) {
  std::string& k = keys_[static_cast<size_t>(id)];
  if (k.empty()) {
    k = key(dfa_states_[static_cast<size_t>(id)]);
    charge(k.size() / sizeof(uint32_t));
  }
  return k;
}

}  // namespace rapide::grammar
