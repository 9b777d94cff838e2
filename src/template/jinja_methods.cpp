#include "template/jinja_methods.h"

#include <array>
#include <charconv>
#include <string_view>

namespace rapide::jinja {
namespace {

// jinja2's Undefined hint: "'dict object' has no attribute 'x'", "list object has no element 5".
Value missing_attribute(const Value& obj, const Value& name) {
  std::string owner = obj.is_none() ? "None" : obj.type_description();
  if (!name.is_string()) return Value::undefined(owner + " has no element " + name.repr());
  return Value::undefined("'" + owner + "' has no attribute " + name.repr());
}

std::string arg_string(const CallArgs& args, size_t index, std::string_view name,
                       const char* method) {
  const Value* v = args.find(index, name);
  if (!v)
    runtime_error(std::string(method) + "() takes at least " + std::to_string(index + 1) +
                  " argument");
  if (!v->is_string())
    runtime_error(std::string(method) + "() argument must be str, not " + v->type_description());
  return v->as_string();
}

ValueList split(const std::string& s, const Value& sep, int64_t maxsplit) {
  ValueList parts;
  if (sep.is_none() || sep.is_undefined()) {
    std::u32string text = utf8_to_u32(s);
    size_t i = 0;
    while (true) {
      while (i < text.size() && is_python_space(text[i])) ++i;
      if (i == text.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.emplace_back(u32_to_utf8(text.substr(i)));  // Python keeps the rest verbatim
        break;
      }
      size_t j = i;
      while (j < text.size() && !is_python_space(text[j])) ++j;
      parts.emplace_back(u32_to_utf8(text.substr(i, j - i)));
      i = j;
    }
    return parts;
  }
  if (!sep.is_string()) runtime_error("must be str or None, not " + sep.type_description());
  const std::string& d = sep.as_string();
  if (d.empty()) runtime_error("empty separator");
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    size_t at = s.find(d, start);
    if (at == std::string::npos) break;
    parts.emplace_back(s.substr(start, at - start));
    start = at + d.size();
  }
  parts.emplace_back(s.substr(start));
  return parts;
}

ValueList rsplit(const std::string& s, const Value& sep, int64_t maxsplit) {
  if (sep.is_none() || sep.is_undefined() || maxsplit < 0) return split(s, sep, maxsplit);
  if (!sep.is_string()) runtime_error("must be str or None, not " + sep.type_description());
  const std::string& d = sep.as_string();
  if (d.empty()) runtime_error("empty separator");
  ValueList parts;
  size_t end = s.size();
  while (static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < d.size()) break;
    size_t at = s.rfind(d, end - d.size());
    if (at == std::string::npos) break;
    parts.insert(parts.begin(), Value(s.substr(at + d.size(), end - at - d.size())));
    end = at;
  }
  parts.insert(parts.begin(), Value(s.substr(0, end)));
  return parts;
}

bool affix_match(const std::string& s, const Value& affix, bool prefix) {
  auto one = [&](const Value& a) {
    if (!a.is_string()) runtime_error("startswith first arg must be str or a tuple of str");
    const std::string& x = a.as_string();
    if (x.size() > s.size()) return false;
    return prefix ? s.compare(0, x.size(), x) == 0
                  : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (affix.is_list()) {
    for (const Value& a : affix.as_list()) {
      if (one(a)) return true;
    }
    return false;
  }
  return one(affix);
}

// str.format with {}, {0} and {name} fields (no format specs: chat templates do not use them).
std::string python_format(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      size_t close = fmt.find('}', i);
      if (close == std::string::npos) runtime_error("Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!") != std::string::npos)
        runtime_error("format specs are not supported");
      const Value* v = nullptr;
      if (field.empty()) {
        v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
        ++auto_index;
      } else if (std::isdigit(static_cast<unsigned char>(field[0]))) {
        size_t index = SIZE_MAX;  // digits beyond size_t: out of range like any large index
        std::from_chars(field.data(), field.data() + field.size(), index);
        v = index < args.positional.size() ? &args.positional[index] : nullptr;
      } else {
        v = args.find(SIZE_MAX, field);
      }
      if (!v) runtime_error("Replacement index out of range for positional args tuple");
      out += v->str();
      i = close;
    } else if (c == '}') {
      runtime_error("Single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  return out;
}

Value string_method(const Value& obj, const std::string& name) {
  const std::string s = obj.as_string();
  auto method = [&](NativeFunction fn) { return Value::function(name, std::move(fn)); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    bool left = name != "rstrip";
    bool right = name != "lstrip";
    return method([s, left, right](const CallArgs& a) {
      Value chars = a.get(0, "chars", Value::none());
      return Value(python_strip(s, chars.is_string() ? chars.as_string() : "", left, right));
    });
  }
  if (name == "split" || name == "rsplit") {
    bool reverse = name == "rsplit";
    return method([s, reverse](const CallArgs& a) {
      Value sep = a.get(0, "sep", Value::none());
      int64_t maxsplit = a.get(1, "maxsplit", Value(-1)).as_int();
      return Value(reverse ? rsplit(s, sep, maxsplit) : split(s, sep, maxsplit));
    });
  }
  if (name == "startswith" || name == "endswith") {
    bool prefix = name == "startswith";
    return method([s, prefix](const CallArgs& a) {
      const Value* affix = a.find(0, "");
      if (!affix) runtime_error("startswith() takes at least 1 argument (0 given)");
      return Value(affix_match(s, *affix, prefix));
    });
  }
  if (name == "upper") return method([s](const CallArgs&) { return Value(to_upper(s)); });
  if (name == "lower") return method([s](const CallArgs&) { return Value(to_lower(s)); });
  if (name == "title") return method([s](const CallArgs&) { return Value(to_title(s)); });
  if (name == "capitalize") return method([s](const CallArgs&) { return Value(capitalize(s)); });
  if (name == "replace") {
    return method([s](const CallArgs& a) {
      return Value(replace_all(s, arg_string(a, 0, "old", "replace"),
                               arg_string(a, 1, "new", "replace"),
                               a.get(2, "count", Value(-1)).as_int()));
    });
  }
  if (name == "find" || name == "count") {
    bool count = name == "count";
    return method([s, count](const CallArgs& a) {
      std::string sub = arg_string(a, 0, "sub", count ? "count" : "find");
      if (count) {
        if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(s) + 1));
        int64_t n = 0;
        for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size()))
          ++n;
        return Value(n);
      }
      size_t at = s.find(sub);
      return Value(at == std::string::npos ? int64_t{-1}
                                           : static_cast<int64_t>(utf8_length(s.substr(0, at))));
    });
  }
  if (name == "join") {
    return method([s](const CallArgs& a) {
      std::string out;
      ValueList items = a.get(0, "iterable", Value()).iterate();
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string())
          runtime_error("sequence item " + std::to_string(i) + ": expected str instance");
        if (i) out += s;
        out += items[i].as_string();
      }
      return Value(std::move(out));
    });
  }
  if (name == "format")
    return method([s](const CallArgs& a) { return Value(python_format(s, a)); });
  if (name == "splitlines") {
    return method([s](const CallArgs&) {
      ValueList out;
      for (auto& line : split_lines(s)) out.emplace_back(line);
      return Value(std::move(out));
    });
  }
  if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
    return method([s, name](const CallArgs&) {
      if (s.empty()) return Value(false);
      for (unsigned char c : s) {
        bool ok = name == "isdigit"   ? std::isdigit(c) != 0
                  : name == "isalpha" ? std::isalpha(c) != 0
                  : name == "isspace" ? std::isspace(c) != 0
                                      : std::isalnum(c) != 0;
        if (!ok) return Value(false);
      }
      return Value(true);
    });
  }
  return missing_attribute(obj, Value(name));
}

Value dict_method(const Value& obj, const std::string& name, bool* found) {
  *found = true;
  auto method = [&](NativeFunction fn) { return Value::function(name, std::move(fn)); };
  if (name == "items" || name == "keys" || name == "values") {
    return method([obj, name](const CallArgs&) {
      ValueList out;
      for (const auto& [k, v] : obj.as_dict().items) {
        if (name == "items") {
          out.push_back(Value::tuple(ValueList{Value(k), v}));
        } else {
          out.push_back(name == "keys" ? Value(k) : v);
        }
      }
      return Value(std::move(out));
    });
  }
  if (name == "get") {
    return method([obj](const CallArgs& a) {
      Value key = a.get(0, "key", Value());
      const Value* v = key.is_string() ? obj.as_dict().find(key.as_string()) : nullptr;
      return v ? *v : a.get(1, "default", Value::none());
    });
  }
  static constexpr std::array<std::string_view, 5> kMutating = {"pop", "popitem", "setdefault",
                                                                "update", "clear"};
  for (std::string_view m : kMutating) {
    if (name == m)
      return Value::undefined("access to attribute '" + name + "' of 'dict' object is unsafe.");
  }
  *found = false;
  return Value();
}

Value list_method(const Value& obj, const std::string& name, bool* found) {
  *found = true;
  if (name == "index" || name == "count") {
    bool index = name == "index";
    return Value::function(name, [obj, index](const CallArgs& a) {
      Value x = a.get(0, "value", Value());
      int64_t n = 0;
      for (size_t i = 0; i < obj.as_list().size(); ++i) {
        if (!obj.as_list()[i].equals(x)) continue;
        if (index) return Value(static_cast<int64_t>(i));
        ++n;
      }
      if (index) runtime_error(x.repr() + " is not in list");
      return Value(n);
    });
  }
  static constexpr std::array<std::string_view, 8> kMutating = {
      "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
  for (std::string_view m : kMutating) {
    if (name == m)
      return Value::undefined("access to attribute '" + name + "' of 'list' object is unsafe.");
  }
  *found = false;
  return Value();
}

}  // namespace

Value get_attribute(const Value& obj, const std::string& name) {
  bool found = false;
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      runtime_error(obj.undefined_message());
    case Value::Kind::kString:
      return string_method(obj, name);
    case Value::Kind::kDict: {
      Value m = dict_method(obj, name, &found);
      if (found) return m;
      const Value* v = obj.as_dict().find(name);
      return v ? *v : missing_attribute(obj, Value(name));
    }
    case Value::Kind::kNamespace: {
      const Value* v = obj.as_dict().find(name);
      return v ? *v : missing_attribute(obj, Value(name));
    }
    case Value::Kind::kList: {
      Value m = list_method(obj, name, &found);
      return found ? m : missing_attribute(obj, Value(name));
    }
    default:
      return missing_attribute(obj, Value(name));
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) runtime_error(obj.undefined_message());
  if (((obj.is_list() && !obj.is_generator()) || obj.is_string()) &&
      (key.is_int() || key.is_bool())) {
    int64_t n = static_cast<int64_t>(obj.length());
    int64_t i = key.as_int() < 0 ? key.as_int() + n : key.as_int();
    if (i < 0 || i >= n) return missing_attribute(obj, key);
    if (obj.is_list()) return obj.as_list()[static_cast<size_t>(i)];
    std::u32string chars = utf8_to_u32(obj.as_string());
    return Value(u32_to_utf8(std::u32string_view(chars).substr(static_cast<size_t>(i), 1)));
  }
  if (obj.is_dict() && key.is_string()) {
    const Value* v = obj.as_dict().find(key.as_string());
    if (v) return *v;
  }
  if (key.is_string()) {
    if (obj.is_dict()) {
      bool found = false;
      Value m = dict_method(obj, key.as_string(), &found);
      return found ? m : missing_attribute(obj, key);
    }
    return get_attribute(obj, key.as_string());
  }
  return missing_attribute(obj, key);
}

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  std::u32string text = utf8_to_u32(s);
  std::u32string line;
  for (size_t i = 0; i < text.size(); ++i) {
    char32_t c = text[i];
    bool is_break = c == U'\n' || c == U'\r' || c == U'\v' || c == U'\f' ||
                    (c >= 0x1c && c <= 0x1e) || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!is_break) {
      line += c;
      continue;
    }
    if (c == U'\r' && i + 1 < text.size() && text[i + 1] == U'\n') ++i;
    lines.push_back(u32_to_utf8(line));
    line.clear();
  }
  if (!line.empty()) lines.push_back(u32_to_utf8(line));
  return lines;
}

std::string to_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string to_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string to_title(const std::string& s) {
  std::string out = s;
  bool previous_cased = false;
  for (char& c : out) {
    unsigned char u = static_cast<unsigned char>(c);
    bool cased = std::isalpha(u) != 0;
    if (cased) c = static_cast<char>(previous_cased ? std::tolower(u) : std::toupper(u));
    // Non-ASCII bytes belong to letters in realistic chat text: keep them inside a word.
    previous_cased = cased || u >= 0x80;
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = to_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
  std::string out;
  if (from.empty()) {
    std::u32string chars = utf8_to_u32(s);
    int64_t done = 0;
    for (char32_t c : chars) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += u32_to_utf8(std::u32string_view(&c, 1));
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out += s.substr(start, at - start);
    out += to;
    start = at + from.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

}  // namespace rapide::jinja
