#include "serve/index_page.h"

#include <fmt/format.h>

#include "template/jinja_operators.h"  // html_escape, shared with Jinja's escape filter

namespace rapide::serve {

std::string index_page(const std::string& model_id, const std::string& state) {
  return fmt::format(R"(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rapide</title>
<style>body{{font-family:system-ui,sans-serif;max-width:40em;margin:2em auto;line-height:1.5}}
code{{background:#f3f3f3;padding:0 .2em}}</style></head>
<body>
<h1>rapide</h1>
<p>An OpenAI-compatible LLM server running on the CPU. Model: <code>{}</code> ({}).</p>
<ul>
<li><a href="/health">/health</a>: ready, loading or draining</li>
<li><a href="/metrics">/metrics</a>: Prometheus metrics</li>
<li><a href="/v1/models">/v1/models</a>: the served model, its context length and size</li>
<li><code>POST /v1/completions</code>, <code>POST /v1/chat/completions</code>: generation</li>
<li><code>POST /tokenize</code>, <code>POST /detokenize</code>: the model's tokenizer</li>
</ul>
<p>Documentation: the README and docs/ folder shipped with rapide
(<code>/usr/share/doc/rapide</code> when installed from the package).</p>
</body></html>
)",
                     jinja::html_escape(model_id), jinja::html_escape(state));
}

}  // namespace rapide::serve
