#include "template/jinja_filters.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "template/jinja_methods.h"
#include "template/jinja_operators.h"
#include "template/jinja_tests.h"

namespace rapide::jinja {
namespace {

bool arg_bool(const CallArgs& args, size_t index, std::string_view name, bool fallback) {
  const Value* v = args.find(index, name);
  return v ? v->truthy() : fallback;
}

// The arguments after the first `skip` positional ones, for select / map style filters that
// forward the rest to a test or filter.
CallArgs rest_args(const CallArgs& args, size_t skip) {
  CallArgs rest;
  for (size_t i = skip; i < args.positional.size(); ++i)
    rest.positional.push_back(args.positional[i]);
  rest.keyword = args.keyword;
  return rest;
}

std::string soft_str(const Value& v) {
  return v.str();
}

// Sort key for sort / unique / dictsort / min / max: strings fold case unless asked not to.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(to_lower(v.as_string()));
  return v;
}

Value to_int(const Value& v, const Value& fallback) {
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) return Value(static_cast<int64_t>(std::trunc(v.as_double())));
  if (v.is_string()) {
    std::string s = python_strip(v.as_string(), "", true, true);
    std::string digits;
    for (char c : s) {
      if (c != '_') digits += c;
    }
    char* end = nullptr;
    long long n = std::strtoll(digits.c_str(), &end, 10);
    if (!digits.empty() && end && *end == '\0') return Value(static_cast<int64_t>(n));
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0' && std::isfinite(d))
      return Value(static_cast<int64_t>(std::trunc(d)));
  }
  return fallback;
}

Value to_float(const Value& v, const Value& fallback) {
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    std::string s = python_strip(v.as_string(), "", true, true);
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value(d);
  }
  return fallback;
}

// Python's round(x, ndigits): correctly rounded, ties to even.
Value python_round(const Value& v, int64_t precision, const std::string& method) {
  if (!v.is_number())
    runtime_error("type " + v.type_description() + " doesn't define __round__ method");
  if (method != "common" && method != "ceil" && method != "floor") {
    runtime_error("method must be common, ceil or floor");
  }
  if (method == "common" && !v.is_float()) return Value(v.as_int());
  double x = v.as_double();
  double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return Value(std::ceil(x * scale) / scale);
  if (method == "floor") return Value(std::floor(x * scale) / scale);
  if (precision == 0) return Value(std::nearbyint(x));
  char buf[512];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::clamp<int64_t>(precision, 0, 300)),
                x);
  return Value(std::strtod(buf, nullptr));
}

std::string indent_text(const std::string& text, const Value& width, bool first, bool blank) {
  std::string indention =
      width.is_string()
          ? width.as_string()
          : std::string(static_cast<size_t>(std::max<int64_t>(0, width.as_int())), ' ');
  // jinja2 appends a newline before splitlines so a trailing newline yields no extra line.
  std::vector<std::string> lines = split_lines(text + "\n");
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + indention;
      out += lines[i];
    }
  } else if (!lines.empty()) {
    out = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  if (first) out = indention + out;
  return out;
}

std::string ascii_escape_json(const std::string& json) {
  std::string out;
  for (char32_t c : utf8_to_u32(json)) {
    char buf[16];
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      unsigned v = static_cast<unsigned>(c) - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
      out += buf;
    }
  }
  return out;
}

ValueList select_items(const Value& input, const CallArgs& args, bool by_attribute, bool keep) {
  ValueList out;
  size_t skip = by_attribute ? 1 : 0;
  std::string attribute = by_attribute ? args.get(0, "", Value()).str() : "";
  const Value* test = args.find(skip, "");
  CallArgs test_args = rest_args(args, skip + 1);
  // Like jinja2, a false input (None, empty) selects nothing instead of failing.
  if (!input.truthy()) return out;
  for (const Value& item : input.iterate()) {
    Value subject = by_attribute ? get_attribute_path(item, attribute) : item;
    bool passed = test ? apply_test(test->str(), subject, test_args) : subject.truthy();
    if (passed == keep) out.push_back(item);
  }
  return out;
}

ValueList sorted_items(ValueList items, bool reverse, bool case_sensitive,
                       const std::string& attribute) {
  auto key = [&](const Value& v) {
    return sort_key(attribute.empty() ? v : get_attribute_path(v, attribute), case_sensitive);
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? key(b).less_than(key(a)) : key(a).less_than(key(b));
  });
  return items;
}

Value min_max(const Value& input, const CallArgs& args, bool want_max) {
  ValueList items = sorted_items(input.iterate(), false, arg_bool(args, 0, "case_sensitive", false),
                                 args.get(1, "attribute", Value("")).str());
  if (items.empty())
    return Value::undefined(std::string("No aggregated item, sequence was empty."));
  return want_max ? items.back() : items.front();
}

}  // namespace

Value get_attribute_path(const Value& item, const std::string& path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    // Digits index a list (Jinja's environment.getitem); beyond int64 they stay a key.
    int64_t index = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), index);
    const bool numeric = !part.empty() && part[0] != '-' && r.ec == std::errc() &&
                         r.ptr == part.data() + part.size();
    v = get_item(v, numeric ? Value(index) : Value(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value apply_filter(const std::string& name, const Value& input, const CallArgs& args) {
  if (name == "default" || name == "d") {
    bool boolean = arg_bool(args, 1, "boolean", false);
    if (input.is_undefined() || (boolean && !input.truthy()))
      return args.get(0, "default_value", Value(""));
    return input;
  }
  if (name == "safe") return Value::markup(input.str());
  if (name == "escape" || name == "e")
    return input.is_markup() ? input : Value::markup(html_escape(input.str()));
  if (name == "string") return input.is_markup() ? input : Value(soft_str(input));
  if (name == "trim") {
    Value chars = args.get(0, "chars", Value::none());
    return Value(
        python_strip(soft_str(input), chars.is_string() ? chars.as_string() : "", true, true));
  }
  if (name == "upper") return Value(to_upper(soft_str(input)));
  if (name == "lower") return Value(to_lower(soft_str(input)));
  if (name == "title") {
    // jinja2's title filter is not str.title: words start after "-", whitespace or ({[<.
    std::string out;
    bool word_start = true;
    for (char32_t c : utf8_to_u32(soft_str(input))) {
      bool boundary =
          c == U'-' || c == U'(' || c == U'{' || c == U'[' || c == U'<' || is_python_space(c);
      std::string ch = u32_to_utf8(std::u32string_view(&c, 1));
      out += boundary ? ch : word_start ? to_upper(ch) : to_lower(ch);
      word_start = boundary;
    }
    return Value(std::move(out));
  }
  if (name == "capitalize") return Value(capitalize(soft_str(input)));
  if (name == "length" || name == "count") return Value(static_cast<int64_t>(input.length()));
  if (name == "wordcount") {
    int64_t words = 0;
    bool in_word = false;
    for (unsigned char c : soft_str(input)) {
      bool word_char = std::isalnum(c) || c == '_' || c >= 0x80;
      if (word_char && !in_word) ++words;
      in_word = word_char;
    }
    return Value(words);
  }
  if (name == "replace") {
    return Value(replace_all(soft_str(input), args.get(0, "old", Value("")).str(),
                             args.get(1, "new", Value("")).str(),
                             args.get(2, "count", Value(-1)).as_int()));
  }
  if (name == "indent") {
    return Value(indent_text(soft_str(input), args.get(0, "width", Value(4)),
                             arg_bool(args, 1, "first", false), arg_bool(args, 2, "blank", false)));
  }
  if (name == "tojson") {
    // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    if (args.find(2, "separators")) runtime_error("tojson separators are not supported");
    Value indent = args.get(1, "indent", Value::none());
    std::string json = input.to_json(indent.is_none() ? -1 : static_cast<int>(indent.as_int()),
                                     arg_bool(args, 3, "sort_keys", false));
    return Value(arg_bool(args, 0, "ensure_ascii", false) ? ascii_escape_json(json) : json);
  }
  if (name == "int") return to_int(input, args.get(0, "default", Value(0)));
  if (name == "float") return to_float(input, args.get(0, "default", Value(0.0)));
  if (name == "abs") {
    if (input.is_float()) return Value(std::fabs(input.as_double()));
    if (input.is_int() || input.is_bool()) return Value(std::abs(input.as_int()));
    runtime_error("bad operand type for abs(): '" + input.type_description() + "'");
  }
  if (name == "round") {
    return python_round(input, args.get(0, "precision", Value(0)).as_int(),
                        args.get(1, "method", Value("common")).str());
  }
  if (name == "first" || name == "last") {
    ValueList items = input.iterate();
    if (items.empty())
      return Value::undefined(std::string("No ") + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value(input.iterate());
  if (name == "items") {
    if (input.is_undefined()) return Value::generator({});
    if (!input.is_dict()) runtime_error("Can only get item pairs from a mapping.");
    ValueList out;
    for (const auto& [k, v] : input.as_dict().items)
      out.push_back(Value::tuple(ValueList{Value(k), v}));
    return Value::generator(std::move(out));
  }
  if (name == "join") {
    std::string separator = args.get(0, "d", Value("")).str();
    Value attribute = args.get(1, "attribute", Value::none());
    std::string out;
    bool first = true;
    for (const Value& item : input.iterate()) {
      if (!first) out += separator;
      first = false;
      out += (attribute.is_none() ? item : get_attribute_path(item, attribute.str())).str();
    }
    return Value(std::move(out));
  }
  if (name == "reverse") {
    if (input.is_string()) {
      std::u32string chars = utf8_to_u32(input.as_string());
      std::reverse(chars.begin(), chars.end());
      return Value(u32_to_utf8(chars));
    }
    ValueList items = input.iterate();
    std::reverse(items.begin(), items.end());
    return Value::generator(std::move(items));
  }
  if (name == "sort") {
    return Value(sorted_items(input.iterate(), arg_bool(args, 0, "reverse", false),
                              arg_bool(args, 1, "case_sensitive", false),
                              args.get(2, "attribute", Value("")).str()));
  }
  if (name == "dictsort") {
    if (!input.is_dict()) runtime_error("You can only sort mappings.");
    bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
    std::string by = args.get(1, "by", Value("key")).str();
    bool reverse = arg_bool(args, 2, "reverse", false);
    ValueList pairs;
    for (const auto& [k, v] : input.as_dict().items)
      pairs.push_back(Value::tuple(ValueList{Value(k), v}));
    size_t index = by == "value" ? 1 : 0;
    std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
      Value ka = sort_key(a.as_list()[index], case_sensitive);
      Value kb = sort_key(b.as_list()[index], case_sensitive);
      return reverse ? kb.less_than(ka) : ka.less_than(kb);
    });
    return Value(std::move(pairs));
  }
  if (name == "unique") {
    bool case_sensitive = arg_bool(args, 0, "case_sensitive", false);
    Value attribute = args.get(1, "attribute", Value::none());
    ValueList out;
    ValueList seen;
    for (const Value& item : input.iterate()) {
      Value key = sort_key(attribute.is_none() ? item : get_attribute_path(item, attribute.str()),
                           case_sensitive);
      if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(key); }))
        continue;
      seen.push_back(key);
      out.push_back(item);
    }
    return Value::generator(std::move(out));
  }
  if (name == "min" || name == "max") return min_max(input, args, name == "max");
  if (name == "sum") {
    Value total = args.get(1, "start", Value(0));
    Value attribute = args.get(0, "attribute", Value::none());
    for (const Value& item : input.iterate()) {
      total = binary_op("+", total,
                        attribute.is_none() ? item : get_attribute_path(item, attribute.str()));
    }
    return total;
  }
  if (name == "map") {
    ValueList out;
    const Value* attribute = args.find(SIZE_MAX, "attribute");
    // Like jinja2, a false input (None, empty) maps to nothing instead of failing.
    for (const Value& item : input.truthy() ? input.iterate() : ValueList{}) {
      if (attribute) {
        Value v = get_attribute_path(item, attribute->str());
        out.push_back(v.is_undefined() ? args.get(SIZE_MAX, "default", v) : v);
      } else {
        const Value* filter = args.find(0, "");
        if (!filter) runtime_error("map requires a filter argument");
        out.push_back(apply_filter(filter->str(), item, rest_args(args, 1)));
      }
    }
    return Value::generator(std::move(out));
  }
  if (name == "select" || name == "reject") {
    return Value::generator(select_items(input, args, false, name == "select"));
  }
  if (name == "selectattr" || name == "rejectattr") {
    return Value::generator(select_items(input, args, true, name == "selectattr"));
  }
  if (name == "attr") return get_attribute(input, args.get(0, "name", Value("")).str());
  if (name == "format") {
    // printf-style "%s" formatting with positional arguments.
    std::string fmt = soft_str(input);
    std::string out;
    size_t next = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
      if (fmt[i] != '%' || i + 1 == fmt.size()) {
        out += fmt[i];
        continue;
      }
      char spec = fmt[++i];
      if (spec == '%') {
        out += '%';
        continue;
      }
      if (next >= args.positional.size()) runtime_error("not enough arguments for format string");
      const Value& arg = args.positional[next++];
      if (spec == 's') {
        out += arg.str();
      } else if (spec == 'r') {
        out += arg.repr();
      } else if (spec == 'd' || spec == 'i') {
        out += std::to_string(to_int(arg, Value(0)).as_int());
      } else {
        runtime_error(std::string("unsupported format character '") + spec + "'");
      }
    }
    return Value(std::move(out));
  }
  runtime_error("No filter named '" + name + "'.");
}

}  // namespace rapide::jinja
