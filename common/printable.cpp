#include "gpuguard/common/printable.h"

#include <cstdint>
#include <cstdio>

namespace gpuguard {
namespace {

void append_escape(std::string& out, const char* format, unsigned value) {
    char code[16];
    std::snprintf(code, sizeof(code), format, value);
    out += code;
}

// Length of the UTF-8 sequence at text[i] and its code point; 0 when invalid
// (truncated, a stray continuation byte, overlong, a surrogate, > U+10FFFF).
size_t decode_utf8(std::string_view text, size_t i, uint32_t& code_point) {
    const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char lead = byte(i);
    size_t length;
    uint32_t minimum;
    if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2, minimum = 0x80, code_point = lead & 0x1f;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3, minimum = 0x800, code_point = lead & 0x0f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4, minimum = 0x10000, code_point = lead & 0x07;
    } else {
        return 0;
    }
    if (i + length > text.size()) return 0;
    for (size_t k = 1; k < length; ++k) {
        if ((byte(i + k) & 0xc0) != 0x80) return 0;
        code_point = (code_point << 6) | (byte(i + k) & 0x3f);
    }
    if (code_point < minimum || code_point > 0x10ffff ||
        (code_point >= 0xd800 && code_point <= 0xdfff)) {
        return 0;
    }
    return length;
}

bool shown_escaped(uint32_t code_point) {
    return (code_point >= 0x80 && code_point <= 0x9f) ||      // C1 controls
           (code_point >= 0x202a && code_point <= 0x202e) ||  // bidi embeddings, overrides
           (code_point >= 0x2066 && code_point <= 0x2069) ||  // bidi isolates
           code_point == 0x2028 || code_point == 0x2029;      // line, paragraph separators
}

}  // namespace

std::string printable(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += static_cast<char>(c);
            ++i;
        } else if (c == '\n') {
            out += "\\n", ++i;
        } else if (c == '\r') {
            out += "\\r", ++i;
        } else if (c == '\t') {
            out += "\\t", ++i;
        } else if (c < 0x80) {
            append_escape(out, "\\x%02x", c);  // other C0 controls, DEL
            ++i;
        } else {
            uint32_t code_point = 0;
            const size_t length = decode_utf8(text, i, code_point);
            if (length == 0) {
                append_escape(out, "\\x%02x", c);
                ++i;
            } else if (shown_escaped(code_point)) {
                append_escape(out, "\\u%04x", code_point);
                i += length;
            } else {
                out.append(text.substr(i, length));
                i += length;
            }
        }
    }
    return out;
}

}  // namespace gpuguard
