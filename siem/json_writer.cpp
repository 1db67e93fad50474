#include "siem/json_writer.h"

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

namespace {

// `text` escaped as nlohmann escapes it. Bytes from 0x80 on are copied as
// they are once `valid_utf8` says they form valid UTF-8; before that, the
// first one sends the rest of the text through sanitize_utf8() (the bytes
// before it are ASCII, so repairing the rest alone repairs the whole).
void escape(std::string& out, std::string_view text, bool valid_utf8) {
    size_t run = 0;  // start of the bytes not yet copied
    for (size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c != '"' && c != '\\') {
            if (c < 0x80 || valid_utf8) continue;
            out.append(text.data() + run, i - run);
            escape(out, sanitize_utf8(text.substr(i)), true);  // rare: a hostile string
            return;
        }
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
}

}  // namespace

void JsonWriter::append_string(std::string& out, std::string_view text) {
    out += '"';
    escape(out, text, /*valid_utf8=*/false);
    out += '"';
}

}  // namespace gpuguard::siem
