// Path -> asset lookup for the web chat.
#include "serve/web_assets.h"

namespace sluice::serve {

const WebAsset* find_web_asset(const std::string& path) {
  static const WebAsset page{kWebPageHtml, "text/html; charset=utf-8"};
  static const WebAsset style{kWebStyleCss, "text/css; charset=utf-8"};
  static const WebAsset script{kWebScriptJs, "text/javascript; charset=utf-8"};
  if (path == "/") return &page;
  if (path == "/web/chat.css") return &style;
  if (path == "/web/chat.js") return &script;
  return nullptr;
}

}  // namespace sluice::serve
