// Attribute and item lookup as jinja2's ImmutableSandboxedEnvironment does it, including the
// Python methods templates call on strings (strip, split, startswith, ...) and dicts (items,
// get, ...). Lookups that fail yield Undefined carrying jinja2's hint
// ("'dict object' has no attribute 'x'"); methods that would mutate a list or dict are
// refused like the sandbox refuses them.
#pragma once

#include <string>

#include "template/jinja_value.h"

namespace rapide::jinja {

// obj.name: a Python attribute (bound method) first, then the item obj["name"].
Value get_attribute(const Value& obj, const std::string& name);

// obj[key]: the item first, then, for a string key, the attribute.
Value get_item(const Value& obj, const Value& key);

// Python's str.splitlines() (without keepends).
std::vector<std::string> split_lines(const std::string& s);

// ASCII case mapping, as Python's str.upper / lower / title / capitalize do for ASCII text.
std::string to_upper(std::string s);
std::string to_lower(std::string s);
std::string to_title(const std::string& s);
std::string capitalize(const std::string& s);

// str.replace(old, new, count) with Python's rules (count < 0: all).
std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count);

}  // namespace rapide::jinja
