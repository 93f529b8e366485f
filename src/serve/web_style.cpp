// The web chat's style sheet (served at /web/chat.css): system fonts only, a light and a dark scheme.
#include "serve/web_assets.h"

namespace sluice::serve {

const std::string_view kWebStyleCss = R"css(:root {
  --bg: #f7f7f5; --panel: #ffffff; --text: #1d1d1f; --muted: #6b6b70; --line: #deded9;
  --accent: #1f6feb; --user: #e8f0fe; --think: #f2f1ec; --error: #b42318;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", sans-serif;
  font-size: 15px; color: var(--text); background: var(--bg);
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #16171a; --panel: #1e2024; --text: #e6e6e6; --muted: #9a9ca3; --line: #33363c;
          --accent: #5b9bff; --user: #22324d; --think: #25272b; --error: #ff6b5b; }
}
* { box-sizing: border-box; }
body { margin: 0; height: 100vh; display: flex; flex-direction: column; }
header { display: flex; align-items: center; gap: 14px; padding: 8px 16px; border-bottom: 1px solid var(--line);
         background: var(--panel); flex-wrap: wrap; }
.brand { font-weight: 700; letter-spacing: 0.02em; }
.model { color: var(--muted); font-family: ui-monospace, SFMono-Regular, Menlo, monospace; margin-right: auto; }
.api { color: var(--muted); font-size: 13px; display: flex; gap: 6px; align-items: center; }
.api input { width: 5.5em; }
input, select, textarea, button { font: inherit; color: inherit; background: var(--panel);
  border: 1px solid var(--line); border-radius: 6px; padding: 4px 8px; }
button { cursor: pointer; }
button:hover { border-color: var(--accent); }
main { flex: 1; display: flex; min-height: 0; }
.chat { flex: 1; display: flex; flex-direction: column; min-width: 0; }
#messages { flex: 1; overflow-y: auto; padding: 16px 24px; }
.msg { max-width: 52em; margin: 0 0 14px 0; padding: 10px 14px; border-radius: 10px; white-space: pre-wrap;
       overflow-wrap: anywhere; line-height: 1.45; }
.msg.user { background: var(--user); margin-left: auto; }
.msg.assistant { background: var(--panel); border: 1px solid var(--line); }
.msg.error { color: var(--error); border-color: var(--error); }
details.reasoning { background: var(--think); border-radius: 6px; padding: 4px 10px; margin-bottom: 8px;
                    color: var(--muted); font-size: 13.5px; }
details.reasoning summary { cursor: pointer; user-select: none; }
.stats { margin-top: 8px; color: var(--muted); font-size: 12.5px; font-family: ui-monospace, SFMono-Regular, Menlo, monospace;
         white-space: normal; }
.stopped, .cut { color: var(--muted); font-style: italic; }
#composer { display: flex; gap: 10px; padding: 12px 24px; border-top: 1px solid var(--line); background: var(--panel); }
#prompt { flex: 1; resize: vertical; min-height: 3.2em; }
#send { min-width: 6em; font-weight: 600; }
#send.stop { border-color: var(--error); color: var(--error); }
.status { padding: 0 24px 8px; color: var(--muted); font-size: 12.5px; min-height: 1.4em; background: var(--panel); }
.live { width: 320px; border-left: 1px solid var(--line); padding: 10px 16px; overflow-y: auto; background: var(--panel); }
.live h2 { font-size: 14px; margin: 4px 0 10px; display: flex; justify-content: space-between; }
.live-state { color: var(--muted); font-weight: 400; font-size: 12px; }
figure { margin: 0 0 14px; }
figcaption { font-size: 12.5px; color: var(--muted); display: flex; justify-content: space-between; margin-bottom: 3px; }
figcaption b { color: var(--text); font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-weight: 500; }
canvas.chart { width: 100%; height: 64px; display: block; border: 1px solid var(--line); border-radius: 4px; }
.legend { font-size: 11.5px; color: var(--muted); margin-top: 3px; }
.legend span { display: inline-block; margin-right: 10px; }
.legend i { display: inline-block; width: 9px; height: 9px; border-radius: 2px; margin-right: 4px; }
dialog { border: 1px solid var(--line); border-radius: 10px; background: var(--panel); color: var(--text); max-width: 26em; }
dialog::backdrop { background: rgba(0, 0, 0, 0.35); }
dialog input { width: 100%; }
.row { display: flex; justify-content: flex-end; margin-top: 10px; }
.error { color: var(--error); font-size: 13px; min-height: 1em; }
@media (max-width: 800px) { .live { display: none; } }
)css";

}  // namespace sluice::serve
