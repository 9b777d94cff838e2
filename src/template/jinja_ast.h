// The syntax tree of a parsed Jinja template: expressions and statements. Nodes are plain
// tagged structs (one kind field, the children it uses) because the evaluator switches over
// a dozen kinds and a class per node would only add ceremony.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja_value.h"

namespace rapide::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // children (tuples are lists too)
    kDict,     // children: key, value, key, value, ...
    kUnary,    // op ("not", "-", "+"), children[0]
    kBinary,   // op, children[0], children[1]; "and"/"or" short-circuit
    kCompare,  // children[0] then (ops[i], children[i + 1]) chained like Python
    kTernary,  // children: value, condition, else value (nullptr: undefined)
    kGetAttr,  // children[0].name
    kGetItem,  // children[0][children[1]]
    kSlice,    // children[0][children[1]:children[2]:children[3]], absent parts are nullptr
    kCall,     // children[0](children[1..], keywords)
    kFilter,   // name(children[0], children[1..], keywords); children[0] null in filter blocks
    kTest,     // children[0] is [not] name(children[1..])
  };

  Kind kind;
  size_t offset = 0;  // into the template source, for error positions
  Value literal;
  std::string name;  // variable, attribute, filter or test name; operator for unary/binary
  std::vector<std::string> ops;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> keywords;
  bool negated = false;   // `is not`
  bool is_tuple = false;  // a kList written with parentheses or bare commas
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // nullptr: required (jinja2 passes Undefined when missing)
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // conditions[i] guards bodies[i]; a trailing extra body is the else
    kFor,          // for targets in expr [if condition]: bodies[0], else bodies[1]
    kSet,          // set targets = expr; or set name.attribute (attribute non-empty)
    kSetBlock,     // set targets[0] (| filter)? ... endset: bodies[0], filter in expr
    kMacro,        // macro name(params): bodies[0]
    kCallBlock,    // call(params) expr: bodies[0] is the caller
    kFilterBlock,  // filter expr: bodies[0]
    kBreak,
    kContinue,
  };

  Kind kind;
  size_t offset = 0;
  std::string text;
  std::string name;
  std::string attribute;
  std::vector<std::string> targets;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<ExprPtr> conditions;
  std::vector<StmtList> bodies;
  std::vector<MacroParam> params;
};

}  // namespace rapide::jinja
