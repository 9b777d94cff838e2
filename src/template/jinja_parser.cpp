#include "template/jinja_parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "base/error.h"
#include "template/jinja_lexer.h"

namespace rapide::jinja {
namespace {

using TT = Token::Type;

class Parser {
 public:
  explicit Parser(LexedTemplate lexed) : lexed_(std::move(lexed)) {}

  ParsedTemplate run() {
    ParsedTemplate result;
    result.body = parse_body({});
    result.source = std::move(lexed_.source);
    return result;
  }

 private:
  const Token& peek(size_t ahead = 0) const {
    size_t i = pos_ + ahead;
    return i < lexed_.tokens.size() ? lexed_.tokens[i] : lexed_.tokens.back();
  }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < lexed_.tokens.size() - 1) ++pos_;
    return t;
  }
  bool at_op(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).type == TT::kOperator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).type == TT::kName && peek(ahead).text == name;
  }
  bool skip_op(std::string_view op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!at_name(name)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) error(fmt::format("expected '{}'", op));
  }
  std::string expect_name() {
    if (peek().type != TT::kName) error("expected a name");
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != TT::kBlockEnd) error("expected end of block tag");
    next();
  }

  [[noreturn]] void error(const std::string& message) const {
    const Token& t = peek();
    std::string found = t.type == TT::kEnd        ? "end of template"
                        : t.type == TT::kBlockEnd ? "'%}'"
                        : t.type == TT::kVarEnd   ? "'}}'"
                                                  : "'" + t.text + "'";
    fail(ErrorCode::kInvalidArgument, "chat template syntax error at {}: {} (found {})",
         describe_position(lexed_.source, t.offset), message, found);
  }

  // Statements until one of `end_tags` (left unconsumed, after its `{%`), or the end.
  StmtList parse_body(std::initializer_list<std::string_view> end_tags) {
    StmtList body;
    while (true) {
      const Token& t = peek();
      if (t.type == TT::kEnd) {
        if (end_tags.size() != 0) {
          std::string expected;
          for (std::string_view tag : end_tags)
            expected += (expected.empty() ? "'" : ", '") + std::string(tag) + "'";
          error("unexpected end of template, expected one of " + expected);
        }
        return body;
      }
      if (t.type == TT::kText) {
        auto s = make_stmt(Stmt::Kind::kText, t.offset);
        s->text = next().text;
        body.push_back(std::move(s));
      } else if (t.type == TT::kVarBegin) {
        auto s = make_stmt(Stmt::Kind::kOutput, t.offset);
        next();
        s->expr = parse_expression();
        if (peek().type != TT::kVarEnd) error("expected end of print statement");
        next();
        body.push_back(std::move(s));
      } else if (t.type == TT::kBlockBegin) {
        for (std::string_view end : end_tags) {
          if (at_name(end, 1)) {
            next();
            return body;
          }
        }
        next();
        body.push_back(parse_statement());
      } else {
        error("unexpected token");
      }
    }
  }

  void expect_end_tag(std::string_view name) {
    if (!skip_name(name)) error(fmt::format("expected '{}'", name));
    expect_block_end();
  }

  StmtPtr parse_statement() {
    size_t offset = peek().offset;
    std::string tag = expect_name();
    auto s = make_stmt(Stmt::Kind::kText, offset);
    if (tag == "if") {
      s->kind = Stmt::Kind::kIf;
      s->conditions.push_back(parse_expression());
      expect_block_end();
      while (true) {
        s->bodies.push_back(parse_body({"elif", "else", "endif"}));
        if (skip_name("elif")) {
          s->conditions.push_back(parse_expression());
          expect_block_end();
        } else if (skip_name("else")) {
          expect_block_end();
          s->bodies.push_back(parse_body({"endif"}));
          expect_end_tag("endif");
          break;
        } else {
          expect_end_tag("endif");
          break;
        }
      }
    } else if (tag == "for") {
      s->kind = Stmt::Kind::kFor;
      s->targets = parse_targets();
      if (!skip_name("in")) error("expected 'in'");
      s->expr = parse_or();
      if (at_name("recursive")) error("recursive loops are not supported");
      if (skip_name("if")) s->condition = parse_expression();
      expect_block_end();
      s->bodies.push_back(parse_body({"else", "endfor"}));
      if (skip_name("else")) {
        expect_block_end();
        s->bodies.push_back(parse_body({"endfor"}));
      }
      expect_end_tag("endfor");
    } else if (tag == "set") {
      if (peek().type == TT::kName && at_op(".", 1)) {
        s->targets.push_back(next().text);
        next();
        s->attribute = expect_name();
      } else {
        s->targets = parse_targets();
      }
      if (skip_op("=")) {
        s->kind = Stmt::Kind::kSet;
        s->expr = parse_expression();
        if (at_op(",")) {  // set a = 1, 2 builds a tuple
          auto tuple = make(Expr::Kind::kList, s->expr->offset);
          tuple->is_tuple = true;
          tuple->children.push_back(std::move(s->expr));
          while (skip_op(",")) {
            if (peek().type == TT::kBlockEnd) break;
            tuple->children.push_back(parse_expression());
          }
          s->expr = std::move(tuple);
        }
        expect_block_end();
      } else {
        s->kind = Stmt::Kind::kSetBlock;
        if (!s->attribute.empty() || s->targets.size() != 1) error("a block set takes one name");
        if (skip_op("|")) s->expr = parse_filter_chain(nullptr);
        expect_block_end();
        s->bodies.push_back(parse_body({"endset"}));
        expect_end_tag("endset");
      }
    } else if (tag == "macro") {
      s->kind = Stmt::Kind::kMacro;
      s->name = expect_name();
      s->params = parse_params();
      expect_block_end();
      s->bodies.push_back(parse_body({"endmacro"}));
      if (!skip_name("endmacro")) error("expected 'endmacro'");
      if (peek().type == TT::kName) next();
      expect_block_end();
    } else if (tag == "call") {
      s->kind = Stmt::Kind::kCallBlock;
      if (at_op("(")) s->params = parse_params();
      s->expr = parse_expression();
      if (s->expr->kind != Expr::Kind::kCall) error("expected a call");
      expect_block_end();
      s->bodies.push_back(parse_body({"endcall"}));
      expect_end_tag("endcall");
    } else if (tag == "filter") {
      s->kind = Stmt::Kind::kFilterBlock;
      s->expr = parse_filter_chain(nullptr);
      expect_block_end();
      s->bodies.push_back(parse_body({"endfilter"}));
      expect_end_tag("endfilter");
    } else if (tag == "break" || tag == "continue") {
      s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      expect_block_end();
    } else {
      pos_--;
      error(fmt::format("encountered unknown tag '{}'", tag));
    }
    return s;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> targets;
    bool parens = skip_op("(");
    do {
      targets.push_back(expect_name());
    } while (skip_op(","));
    if (parens) expect_op(")");
    return targets;
  }

  std::vector<MacroParam> parse_params() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!at_op(")")) {
      if (!params.empty()) expect_op(",");
      if (at_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression();
      params.push_back(std::move(p));
    }
    expect_op(")");
    return params;
  }

  static StmtPtr make_stmt(Stmt::Kind kind, size_t offset) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->offset = offset;
    return s;
  }

  ExprPtr make(Expr::Kind kind, size_t offset) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->offset = offset;
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr lhs, ExprPtr rhs) {
    auto e = make(Expr::Kind::kBinary, lhs->offset);
    e->name = op;
    e->children.push_back(std::move(lhs));
    e->children.push_back(std::move(rhs));
    return e;
  }

  ExprPtr parse_expression() {
    ExprPtr value = parse_or();
    while (skip_name("if")) {
      auto e = make(Expr::Kind::kTernary, value->offset);
      e->children.push_back(std::move(value));
      e->children.push_back(parse_or());
      e->children.push_back(skip_name("else") ? parse_expression() : nullptr);
      value = std::move(e);
    }
    return value;
  }

  ExprPtr parse_or() {
    ExprPtr lhs = parse_and();
    while (skip_name("or")) lhs = binary("or", std::move(lhs), parse_and());
    return lhs;
  }

  ExprPtr parse_and() {
    ExprPtr lhs = parse_not();
    while (skip_name("and")) lhs = binary("and", std::move(lhs), parse_not());
    return lhs;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      auto e = make(Expr::Kind::kUnary, next().offset);
      e->name = "not";
      e->children.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (peek().type == TT::kOperator &&
          (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
           peek().text == "<=" || peek().text == ">=")) {
        op = next().text;
      } else if (skip_name("in")) {
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::kCompare, first->offset);
        cmp->children.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->children.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr lhs = parse_concat();
    while (at_op("+") || at_op("-")) {
      std::string op = next().text;
      lhs = binary(op, std::move(lhs), parse_concat());
    }
    return lhs;
  }

  ExprPtr parse_concat() {
    ExprPtr lhs = parse_math2();
    while (skip_op("~")) lhs = binary("~", std::move(lhs), parse_math2());
    return lhs;
  }

  ExprPtr parse_math2() {
    ExprPtr lhs = parse_pow();
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      std::string op = next().text;
      lhs = binary(op, std::move(lhs), parse_pow());
    }
    return lhs;
  }

  ExprPtr parse_pow() {
    ExprPtr lhs = parse_unary(true);
    while (skip_op("**")) lhs = binary("**", std::move(lhs), parse_unary(true));
    return lhs;
  }

  ExprPtr parse_unary(bool with_filter) {
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      node = make(Expr::Kind::kUnary, peek().offset);
      node->name = next().text;
      node->children.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = peek();
    size_t offset = t.offset;
    if (t.type == TT::kName) {
      std::string name = next().text;
      auto e = make(Expr::Kind::kLiteral, offset);
      if (name == "true" || name == "True") {
        e->literal = Value(true);
      } else if (name == "false" || name == "False") {
        e->literal = Value(false);
      } else if (name == "none" || name == "None") {
        e->literal = Value::none();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = name;
      }
      return e;
    }
    if (t.type == TT::kString) {
      std::string s;
      while (peek().type == TT::kString) s += next().text;
      auto e = make(Expr::Kind::kLiteral, offset);
      e->literal = Value(std::move(s));
      return e;
    }
    if (t.type == TT::kInt || t.type == TT::kFloat) {
      auto e = make(Expr::Kind::kLiteral, offset);
      std::string text = next().text;
      // A float beyond double's range is inf, as Python reads it (std::stod would throw).
      e->literal = t.type == TT::kFloat ? Value(std::strtod(text.c_str(), nullptr))
                                        : Value(int_literal(text));
      return e;
    }
    if (skip_op("(")) {
      if (skip_op(")")) {
        auto empty = make(Expr::Kind::kList, offset);
        empty->is_tuple = true;
        return empty;
      }
      ExprPtr first = parse_expression();
      if (!at_op(",")) {
        expect_op(")");
        return first;
      }
      auto tuple = make(Expr::Kind::kList, offset);
      tuple->is_tuple = true;
      tuple->children.push_back(std::move(first));
      while (skip_op(",")) {
        if (at_op(")")) break;
        tuple->children.push_back(parse_expression());
      }
      expect_op(")");
      return tuple;
    }
    if (skip_op("[")) {
      auto list = make(Expr::Kind::kList, offset);
      while (!at_op("]")) {
        if (!list->children.empty()) expect_op(",");
        if (at_op("]")) break;
        list->children.push_back(parse_expression());
      }
      expect_op("]");
      return list;
    }
    if (skip_op("{")) {
      auto dict = make(Expr::Kind::kDict, offset);
      while (!at_op("}")) {
        if (!dict->children.empty()) expect_op(",");
        if (at_op("}")) break;
        dict->children.push_back(parse_expression());
        expect_op(":");
        dict->children.push_back(parse_expression());
      }
      expect_op("}");
      return dict;
    }
    error("unexpected token in expression");
  }

  // An integer token's value; one beyond int64 is a template error.
  int64_t int_literal(const std::string& text) {
    int64_t v = 0;
    auto r = std::from_chars(text.data(), text.data() + text.size(), v);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
      error("integer literal out of range");
    }
    return v;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (at_op(".")) {
        size_t offset = next().offset;
        if (peek().type == TT::kInt) {
          auto index = make(Expr::Kind::kLiteral, offset);
          index->literal = Value(int_literal(next().text));
          auto e = make(Expr::Kind::kGetItem, offset);
          e->children.push_back(std::move(node));
          e->children.push_back(std::move(index));
          node = std::move(e);
        } else {
          auto e = make(Expr::Kind::kGetAttr, offset);
          e->name = expect_name();
          e->children.push_back(std::move(node));
          node = std::move(e);
        }
      } else if (at_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    size_t offset = next().offset;
    ExprPtr start;
    if (!at_op(":")) {
      start = parse_expression();
      if (!at_op(":")) {
        expect_op("]");
        auto e = make(Expr::Kind::kGetItem, offset);
        e->children.push_back(std::move(node));
        e->children.push_back(std::move(start));
        return e;
      }
    }
    expect_op(":");
    auto e = make(Expr::Kind::kSlice, offset);
    e->children.push_back(std::move(node));
    e->children.push_back(std::move(start));
    e->children.push_back(at_op("]") || at_op(":") ? nullptr : parse_expression());
    ExprPtr step;
    if (skip_op(":") && !at_op("]")) step = parse_expression();
    e->children.push_back(std::move(step));
    expect_op("]");
    return e;
  }

  // Arguments of a call, filter or test, after the callee: "(" args ")".
  void parse_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!at_op(")")) {
      if (!first) {
        expect_op(",");
        if (at_op(")")) break;
      }
      first = false;
      if (peek().type == TT::kName && at_op("=", 1)) {
        std::string name = next().text;
        next();
        e.keywords.emplace_back(name, parse_expression());
      } else {
        if (!e.keywords.empty()) error("positional argument after keyword argument");
        e.children.push_back(parse_expression());
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(Expr::Kind::kCall, callee->offset);
    e->children.push_back(std::move(callee));
    parse_args(*e);
    return e;
  }

  ExprPtr parse_filter_chain(ExprPtr node) {
    do {
      size_t offset = peek().offset;
      auto e = make(Expr::Kind::kFilter, offset);
      e->name = expect_name();
      while (at_op(".") && peek(1).type == TT::kName) {
        next();
        e->name += "." + next().text;
      }
      e->children.push_back(std::move(node));
      if (at_op("(")) parse_args(*e);
      node = std::move(e);
    } while (skip_op("|"));
    return node;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (skip_op("|")) {
        size_t offset = peek().offset;
        auto e = make(Expr::Kind::kFilter, offset);
        e->name = expect_name();
        e->children.push_back(std::move(node));
        if (at_op("(")) parse_args(*e);
        node = std::move(e);
      } else if (at_name("is")) {
        size_t offset = next().offset;
        auto e = make(Expr::Kind::kTest, offset);
        e->negated = skip_name("not");
        e->name = expect_name();
        e->children.push_back(std::move(node));
        const Token& t = peek();
        if (at_op("(")) {
          parse_args(*e);
        } else if ((t.type == TT::kName && t.text != "else" && t.text != "or" && t.text != "and") ||
                   t.type == TT::kString || t.type == TT::kInt || t.type == TT::kFloat ||
                   at_op("[") || at_op("{")) {
          if (at_name("is")) error("you cannot chain multiple tests with is");
          e->children.push_back(parse_postfix(parse_primary()));
        }
        node = std::move(e);
      } else if (at_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  LexedTemplate lexed_;
  size_t pos_ = 0;
};

}  // namespace

ParsedTemplate parse_template(std::string_view source) {
  return Parser(lex_template(source)).run();
}

}  // namespace rapide::jinja
