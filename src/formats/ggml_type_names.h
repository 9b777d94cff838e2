// Names of every ggml tensor type id, so an unsupported type can be named in errors
// ("q4_K (12)") instead of shown as a bare number.
#pragma once

#include <cstdint>
#include <string_view>

namespace rapide {

// "q4_K", "iq2_xs", ...; "unknown" for ids ggml never assigned.
std::string_view ggml_type_name(uint32_t ggml_type);

}  // namespace rapide
