// The local read-only status page (metrics.status_page): a static HTML page
// and its script, served next to /metrics, that poll /status.json and show
// GPUs, GPU processes with their verdicts, recent detections with evidence,
// actions and blocked addresses. Every value is inserted as text, never as
// markup, so process names and command lines cannot inject into the page.
#pragma once

#include <string_view>

namespace gpuguard::agent {

std::string_view status_page_html();
std::string_view status_page_script();

// Sent with every status page response: no framing, no foreign origins,
// scripts only from the page's own origin.
inline constexpr std::string_view kStatusPageCsp =
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; "
    "img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

}  // namespace gpuguard::agent
