// jinja2's built-in filters (`value | name(args)`) that chat templates use, plus transformers'
// tojson (json.dumps with ensure_ascii=False, so non-ASCII text stays as is).
#pragma once

#include <string>

#include "template/jinja_value.h"

namespace rapide::jinja {

// Applies filter `name`; throws RenderError "No filter named 'x'." for an unknown filter.
Value apply_filter(const std::string& name, const Value& input, const CallArgs& args);

// item.attribute with jinja2's dotted paths ("function.name", "0.role").
Value get_attribute_path(const Value& item, const std::string& path);

}  // namespace rapide::jinja
