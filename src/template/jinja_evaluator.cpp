#include "template/jinja_evaluator.h"

#include <algorithm>
#include <ctime>
#include <unordered_map>

#include <fmt/format.h>

#include "template/jinja_filters.h"
#include "template/jinja_methods.h"
#include "template/jinja_operators.h"
#include "template/jinja_tests.h"

namespace rapide::jinja {
namespace {

struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;

  const Value* lookup(const std::string& name) const {
    for (const Frame* f = this; f; f = f->parent.get()) {
      auto it = f->vars.find(name);
      if (it != f->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using FramePtr = std::shared_ptr<Frame>;

FramePtr child_of(const FramePtr& parent) {
  auto f = std::make_shared<Frame>();
  f->parent = parent;
  return f;
}

// Binds `for a, b in ...` / `set a, b = ...` targets, unpacking like Python.
void bind_targets(Frame& frame, const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    frame.vars[targets[0]] = value;
    return;
  }
  ValueList items = value.iterate();
  if (items.size() > targets.size()) {
    runtime_error("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
  }
  if (items.size() < targets.size()) {
    runtime_error("not enough values to unpack (expected " + std::to_string(targets.size()) +
                  ", got " + std::to_string(items.size()) + ")");
  }
  for (size_t i = 0; i < targets.size(); ++i) frame.vars[targets[i]] = items[i];
}

Value make_loop(size_t i, const ValueList& items) {
  size_t n = items.size();
  ValueDict loop;
  loop.set("index", Value(static_cast<int64_t>(i + 1)));
  loop.set("index0", Value(static_cast<int64_t>(i)));
  loop.set("revindex", Value(static_cast<int64_t>(n - i)));
  loop.set("revindex0", Value(static_cast<int64_t>(n - i - 1)));
  loop.set("first", Value(i == 0));
  loop.set("last", Value(i + 1 == n));
  loop.set("length", Value(static_cast<int64_t>(n)));
  loop.set("depth", Value(1));
  loop.set("depth0", Value(0));
  if (i > 0) loop.set("previtem", items[i - 1]);
  if (i + 1 < n) loop.set("nextitem", items[i + 1]);
  loop.set("cycle", Value::function("cycle", [i](const CallArgs& args) {
             if (args.positional.empty()) runtime_error("no items for cycling given");
             return args.positional[i % args.positional.size()];
           }));
  return Value(std::move(loop));
}

class Evaluator {
 public:
  explicit Evaluator(const ParsedTemplate& tmpl) : tmpl_(tmpl) {}

  std::string render(const ValueDict& variables) {
    auto globals = std::make_shared<Frame>();
    install_globals(*globals);
    FramePtr root = child_of(globals);
    for (const auto& [k, v] : variables.items) root->vars[k] = v;
    std::string out;
    exec(tmpl_.body, root, out);
    return out;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  static void install_globals(Frame& g) {
    g.vars["raise_exception"] =
        Value::function("raise_exception", [](const CallArgs& args) -> Value {
          throw RenderError(args.get(0, "message", Value("")).str(), true);
        });
    g.vars["strftime_now"] = Value::function("strftime_now", [](const CallArgs& args) {
      std::time_t now = std::time(nullptr);
      std::tm local{};
      localtime_r(&now, &local);
      char buf[256];
      size_t n =
          std::strftime(buf, sizeof buf, args.get(0, "format", Value("")).str().c_str(), &local);
      return Value(std::string(buf, n));
    });
    g.vars["namespace"] = Value::function("namespace", [](const CallArgs& args) {
      ValueDict attributes;
      for (const Value& p : args.positional) {
        if (!p.is_dict()) runtime_error("namespace() takes a mapping");
        for (const auto& [k, v] : p.as_dict().items) attributes.set(k, v);
      }
      for (const auto& [k, v] : args.keyword) attributes.set(k, v);
      return Value::make_namespace(std::move(attributes));
    });
    g.vars["dict"] = Value::function("dict", [](const CallArgs& args) {
      ValueDict d;
      for (const auto& [k, v] : args.keyword) d.set(k, v);
      return Value(std::move(d));
    });
    g.vars["range"] = Value::function("range", [](const CallArgs& args) {
      int64_t start = 0;
      int64_t stop = 0;
      int64_t step = 1;
      if (args.positional.size() == 1) {
        stop = args.positional[0].as_int();
      } else if (args.positional.size() >= 2) {
        start = args.positional[0].as_int();
        stop = args.positional[1].as_int();
        if (args.positional.size() > 2) step = args.positional[2].as_int();
      }
      if (step == 0) runtime_error("range() arg 3 must not be zero");
      ValueList out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
      return Value(std::move(out));
    });
  }

  int line_of(size_t offset) const {
    size_t end = std::min(offset, tmpl_.source.size());
    return 1 + static_cast<int>(std::count(tmpl_.source.begin(),
                                           tmpl_.source.begin() + static_cast<long>(end), '\n'));
  }

  Flow exec(const StmtList& body, const FramePtr& frame, std::string& out) {
    for (const StmtPtr& s : body) {
      Flow flow;
      try {
        flow = exec_stmt(*s, frame, out);
      } catch (RenderError& e) {
        if (e.line == 0) e.line = line_of(s->offset);
        throw;
      }
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Flow exec_stmt(const Stmt& s, const FramePtr& frame, std::string& out) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        out += s.text;
        break;
      case Stmt::Kind::kOutput:
        out += eval(*s.expr, frame).str();
        break;
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < s.conditions.size(); ++i) {
          if (eval(*s.conditions[i], frame).truthy()) return exec(s.bodies[i], frame, out);
        }
        if (s.bodies.size() > s.conditions.size()) return exec(s.bodies.back(), frame, out);
        break;
      case Stmt::Kind::kFor:
        exec_for(s, frame, out);
        break;
      case Stmt::Kind::kSet: {
        Value v = eval(*s.expr, frame);
        if (!s.attribute.empty()) {
          const Value* target = frame->lookup(s.targets[0]);
          if (!target || !target->is_namespace())
            runtime_error("cannot assign attribute on non-namespace object");
          target->namespace_attributes().set(s.attribute, std::move(v));
        } else {
          bind_targets(*frame, s.targets, v);
        }
        break;
      }
      case Stmt::Kind::kSetBlock:
        frame->vars[s.targets[0]] = capture(s, frame);
        break;
      case Stmt::Kind::kFilterBlock:
        out += capture(s, frame).str();
        break;
      case Stmt::Kind::kMacro:
        frame->vars[s.name] = make_macro(s, frame);
        break;
      case Stmt::Kind::kCallBlock:
        out += call_block(s, frame).str();
        break;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  // Renders a block body into a string and passes it through the block's filter, if any.
  Value capture(const Stmt& s, const FramePtr& frame) {
    std::string text;
    exec(s.bodies[0], frame, text);
    if (!s.expr) return Value(std::move(text));
    Value saved = filter_input_;
    filter_input_ = Value(std::move(text));
    Value result = eval(*s.expr, frame);
    filter_input_ = saved;
    return result;
  }

  void exec_for(const Stmt& s, const FramePtr& frame, std::string& out) {
    ValueList items = eval(*s.expr, frame).iterate();
    if (s.condition) {
      ValueList kept;
      for (const Value& item : items) {
        FramePtr f = child_of(frame);
        bind_targets(*f, s.targets, item);
        if (eval(*s.condition, f).truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      if (s.bodies.size() > 1) exec(s.bodies[1], child_of(frame), out);
      return;
    }
    for (size_t i = 0; i < items.size(); ++i) {
      FramePtr f = child_of(frame);
      bind_targets(*f, s.targets, items[i]);
      f->vars["loop"] = make_loop(i, items);
      if (exec(s.bodies[0], f, out) == Flow::kBreak) break;
    }
  }

  Value make_macro(const Stmt& s, const FramePtr& frame) {
    // A weak reference: the macro lives in the frame it would otherwise keep alive.
    std::weak_ptr<Frame> definition = frame;
    return Value::function(s.name, [this, &s, definition](const CallArgs& args) {
      // Runaway recursion (command-r's json_to_python_type on a "null" type recurses into
      // the string's characters forever) must fail like Python's RecursionError, not
      // overflow the stack.
      if (call_depth_ >= kMaxCallDepth) runtime_error("maximum recursion depth exceeded");
      ++call_depth_;
      struct DepthGuard {
        int& depth;
        ~DepthGuard() { --depth; }
      } guard{call_depth_};
      FramePtr f = child_of(definition.lock());
      if (args.positional.size() > s.params.size()) {
        runtime_error("macro '" + s.name + "' takes not more than " +
                      std::to_string(s.params.size()) + " argument(s)");
      }
      for (const auto& [k, v] : args.keyword) {
        const std::string& key = k;  // clang 14 (the fuzz build) cannot capture a binding
        bool known = std::any_of(s.params.begin(), s.params.end(),
                                 [&](const MacroParam& p) { return p.name == key; });
        if (!known && k != "caller")
          runtime_error("macro '" + s.name + "' takes no keyword argument '" + k + "'");
        if (k == "caller") f->vars["caller"] = v;
      }
      for (size_t i = 0; i < s.params.size(); ++i) {
        const MacroParam& p = s.params[i];
        const Value* given = args.find(i, p.name);
        if (given) {
          f->vars[p.name] = *given;
        } else if (p.default_value) {
          f->vars[p.name] = eval(*p.default_value, f);
        } else {
          f->vars[p.name] = Value::undefined("parameter '" + p.name + "' was not provided");
        }
      }
      std::string text;
      exec(s.bodies[0], f, text);
      return Value(std::move(text));
    });
  }

  Value call_block(const Stmt& s, const FramePtr& frame) {
    const Expr& call = *s.expr;
    Value callee = eval(*call.children[0], frame);
    CallArgs args = eval_args(call, 1, frame);
    args.keyword.emplace_back(
        "caller", Value::function("caller", [this, &s, frame](const CallArgs& caller_args) {
          FramePtr f = child_of(frame);
          for (size_t i = 0; i < s.params.size(); ++i) {
            const Value* given = caller_args.find(i, s.params[i].name);
            f->vars[s.params[i].name] =
                given ? *given
                      : (s.params[i].default_value
                             ? eval(*s.params[i].default_value, f)
                             : Value::undefined("parameter '" + s.params[i].name +
                                                "' was not provided"));
          }
          std::string text;
          exec(s.bodies[0], f, text);
          return Value(std::move(text));
        }));
    return call_value(callee, args);
  }

  static Value call_value(const Value& callee, const CallArgs& args) {
    if (callee.is_function()) return callee.as_function()(args);
    if (callee.is_undefined()) runtime_error(callee.undefined_message());
    runtime_error(fmt::format("'{}' is not callable", callee.type_description()));
  }

  CallArgs eval_args(const Expr& e, size_t first, const FramePtr& frame) {
    CallArgs args;
    for (size_t i = first; i < e.children.size(); ++i)
      args.positional.push_back(eval(*e.children[i], frame));
    for (const auto& [k, v] : e.keywords) args.keyword.emplace_back(k, eval(*v, frame));
    return args;
  }

  bool compare(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return a.equals(b);
    if (op == "!=") return !a.equals(b);
    if (op == "<") return a.less_than(b);
    if (op == ">") return b.less_than(a);
    if (op == "<=") return !b.less_than(a);
    if (op == ">=") return !a.less_than(b);
    if (op == "in") return contains(b, a);
    return !contains(b, a);  // "not in"
  }

  Value eval(const Expr& e, const FramePtr& frame) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        const Value* v = frame->lookup(e.name);
        return v ? *v : Value::undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::kList: {
        ValueList items;
        for (const ExprPtr& c : e.children) items.push_back(eval(*c, frame));
        return e.is_tuple ? Value::tuple(std::move(items)) : Value(std::move(items));
      }
      case Expr::Kind::kDict: {
        ValueDict dict;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
          Value key = eval(*e.children[i], frame);
          if (!key.is_string()) runtime_error("only string keys are supported in dict literals");
          dict.set(key.as_string(), eval(*e.children[i + 1], frame));
        }
        return Value(std::move(dict));
      }
      case Expr::Kind::kUnary: {
        Value v = eval(*e.children[0], frame);
        if (e.name == "not") return Value(!v.truthy());
        return unary_op(e.name, v);
      }
      case Expr::Kind::kBinary: {
        Value lhs = eval(*e.children[0], frame);
        if (e.name == "and") return lhs.truthy() ? eval(*e.children[1], frame) : lhs;
        if (e.name == "or") return lhs.truthy() ? lhs : eval(*e.children[1], frame);
        return binary_op(e.name, lhs, eval(*e.children[1], frame));
      }
      case Expr::Kind::kCompare: {
        Value lhs = eval(*e.children[0], frame);
        for (size_t i = 0; i < e.ops.size(); ++i) {
          Value rhs = eval(*e.children[i + 1], frame);
          if (!compare(e.ops[i], lhs, rhs)) return Value(false);
          lhs = std::move(rhs);
        }
        return Value(true);
      }
      case Expr::Kind::kTernary:
        if (eval(*e.children[1], frame).truthy()) return eval(*e.children[0], frame);
        if (e.children[2]) return eval(*e.children[2], frame);
        return Value::undefined(
            "the inline if-expression evaluated to false and no else section was defined.");
      case Expr::Kind::kGetAttr:
        return get_attribute(eval(*e.children[0], frame), e.name);
      case Expr::Kind::kGetItem:
        return get_item(eval(*e.children[0], frame), eval(*e.children[1], frame));
      case Expr::Kind::kSlice: {
        auto part = [&](size_t i) { return e.children[i] ? eval(*e.children[i], frame) : Value(); };
        return slice(eval(*e.children[0], frame), part(1), part(2), part(3));
      }
      case Expr::Kind::kCall: {
        Value callee = eval(*e.children[0], frame);
        return call_value(callee, eval_args(e, 1, frame));
      }
      case Expr::Kind::kFilter: {
        Value input = e.children[0] ? eval(*e.children[0], frame) : filter_input_;
        return apply_filter(e.name, input, eval_args(e, 1, frame));
      }
      case Expr::Kind::kTest: {
        Value v = eval(*e.children[0], frame);
        bool result = apply_test(e.name, v, eval_args(e, 1, frame));
        return Value(e.negated ? !result : result);
      }
    }
    return Value();
  }

  static constexpr int kMaxCallDepth = 100;  // far above what real templates nest

  const ParsedTemplate& tmpl_;
  int call_depth_ = 0;
  Value filter_input_;  // the text a {% filter %} or {% set x | f %} block feeds its filters
};

}  // namespace

std::string render_template(const ParsedTemplate& tmpl, const ValueDict& variables) {
  return Evaluator(tmpl).render(variables);
}

}  // namespace rapide::jinja
