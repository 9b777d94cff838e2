// The dashboard's static files (web/dashboard: the page, its script and style, and uPlot from
// node_modules), embedded in the binary at build time by cmake/embed_assets.cmake: `rapide
// serve` fetches nothing at run time and ships as one file.
#pragma once

#include <span>
#include <string_view>

namespace rapide::serve {

struct EmbeddedAsset {
  std::string_view path;  // the URL path, "/dashboard", "/dashboard/app.js", ...
  std::string_view body;
};

// Every embedded file (the generated source defines it).
std::span<const EmbeddedAsset> dashboard_asset_table();
// The file served at `path`; null when there is none.
const EmbeddedAsset* find_dashboard_asset(std::string_view path);
// From the path's extension: .js, .css, else HTML (the page itself, "/dashboard").
const char* dashboard_content_type(std::string_view path);

}  // namespace rapide::serve
