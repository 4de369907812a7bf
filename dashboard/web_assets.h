// The dashboard's web page, built into the binary: the page itself
// (dashboard/web/) and uPlot, the plotting library from the npm registry
// that scripts/install_deps.sh installs outside the repository.
#pragma once

#include <string_view>
#include <vector>

namespace manta::dashboard {

struct WebAsset {
  std::string_view path;  // the URL path: "/", "/static/app.js", ...
  std::string_view content_type;
  std::string_view bytes;
};

const std::vector<WebAsset>& WebAssets();

}  // namespace manta::dashboard
