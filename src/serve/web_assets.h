// The web chat `sluice serve` shows at `/`: its page, style sheet and script are compiled into the
// binary (nothing is loaded from elsewhere: no CDN, no web fonts) and served from memory.
#pragma once
#include <string>
#include <string_view>

namespace sluice::serve {

struct WebAsset {
  std::string_view body;
  const char* content_type;
};

// The asset at a request path ("/", "/web/chat.css", "/web/chat.js"), or null.
const WebAsset* find_web_asset(const std::string& path);

// The files' text (web_page.cpp, web_style.cpp, web_script.cpp).
extern const std::string_view kWebPageHtml;
extern const std::string_view kWebStyleCss;
extern const std::string_view kWebScriptJs;

}  // namespace sluice::serve
