// GET /: a small HTML page naming the server and the model, linking the endpoints an
// operator looks for (/health, /metrics, /v1/models) and the documentation, instead of a
// bare 404 for someone who opens the server's address in a browser.
#pragma once

#include <string>

namespace rapide::serve {

std::string index_page(const std::string& model_id, const std::string& state);

}  // namespace rapide::serve
