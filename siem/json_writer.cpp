#include "siem/json_writer.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "siem/format_util.h"

namespace gpuguard::siem {

void JsonWriter::value(double number) {
    if (!std::isfinite(number)) {
        value(nullptr);
        return;
    }
    // nlohmann's own form ("97.0", "0.999", "1e+20"): records stay the bytes
    // they were when the DOM was dumped. No allocation: a short string.
    separate();
    out_ += nlohmann::json(number).dump();
    need_comma_ = true;
}

void JsonWriter::append_string(std::string& out, std::string_view text) {
    // Invalid UTF-8 is rare (a hostile command line): repaired first, so the
    // loop below only ever sees whole, valid sequences.
    const bool ascii = std::all_of(text.begin(), text.end(),
                                   [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    std::string repaired;
    if (!ascii) {
        repaired = sanitize_utf8(text);
        text = repaired;
    }
    out += '"';
    size_t run = 0;  // start of the bytes not yet copied
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c != '"' && c != '\\') continue;  // UTF-8 bytes >= 0x80 included
        out.append(text.data() + run, i - run);
        run = i + 1;
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\t':
                out += "\\t";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\r':
                out += "\\r";
                break;
            default: {
                static constexpr char kHex[] = "0123456789abcdef";
                const char escaped[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
                out.append(escaped, sizeof(escaped));
            }
        }
    }
    out.append(text.data() + run, text.size() - run);
    out += '"';
}

}  // namespace gpuguard::siem
