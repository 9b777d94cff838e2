#include "serve/dashboard_assets.h"

namespace rapide::serve {

const EmbeddedAsset* find_dashboard_asset(std::string_view path) {
  for (const EmbeddedAsset& asset : dashboard_asset_table()) {
    if (asset.path == path) return &asset;
  }
  return nullptr;
}

const char* dashboard_content_type(std::string_view path) {
  if (path.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (path.ends_with(".css")) return "text/css; charset=utf-8";
  return "text/html; charset=utf-8";
}

}  // namespace rapide::serve
