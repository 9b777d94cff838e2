// Python's text behaviour on UTF-8 strings, which jinja2 templates inherit: lengths, indices
// and slices count code points, strip() knows Unicode whitespace, floats print with repr().
#pragma once

#include <string>
#include <string_view>

namespace rapide::jinja {

// Python's repr of a float: shortest round-trip digits, "1.0", "1e+20", "inf".
std::string format_float(double v);

// Python string helpers on UTF-8 text, counted in code points like Python's str.
std::u32string utf8_to_u32(std::string_view s);
std::string u32_to_utf8(std::u32string_view s);
size_t utf8_length(std::string_view s);
bool is_python_space(char32_t c);
// str.strip / lstrip / rstrip; `chars` empty means whitespace.
std::string python_strip(std::string_view s, std::string_view chars, bool left, bool right);

}  // namespace rapide::jinja
