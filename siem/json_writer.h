// JsonWriter: JSON text appended straight to a string, for the record the
// agent writes most (the ECS detection: every SIEM output, the activity log,
// `gpuguard run --json` and `gpuguard replay`). Building an nlohmann DOM and
// dumping it cost ~19 us a detection, most of it allocating the DOM; this
// writes the same bytes as that dump did (nlohmann's escaping with invalid
// UTF-8 replaced, its number forms) without one. Members come out in the
// order written; the caller pairs begin/end.
#pragma once

#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpuguard::siem {

class JsonWriter {
  public:
    explicit JsonWriter(std::string& out) : out_(out) {}

    void begin_object() { open('{'); }
    void end_object() { close('}'); }
    void begin_array() { open('['); }
    void end_array() { close(']'); }

    // A member's name; its value is the next thing written.
    void key(std::string_view name) {
        separate();
        append_string(name);
        out_ += ':';
        need_comma_ = false;
    }

    void value(std::string_view text) {
        separate();
        append_string(text);
        need_comma_ = true;
    }
    void value(const std::string& text) { value(std::string_view(text)); }
    void value(const char* text) { value(std::string_view(text)); }
    void value(bool flag) {
        separate();
        out_ += flag ? "true" : "false";
        need_comma_ = true;
    }
    template <std::integral Int>
    requires(!std::same_as<Int, bool>) void value(Int number) {
        separate();
        char text[24];
        const auto end = std::to_chars(text, text + sizeof(text), number).ptr;
        out_.append(text, static_cast<size_t>(end - text));
        need_comma_ = true;
    }
    void value(double number);  // null when not finite (JSON has no NaN)
    void value(std::nullptr_t) {
        separate();
        out_ += "null";
        need_comma_ = true;
    }

    template <typename T>
    void member(std::string_view name, const T& item) {
        key(name);
        value(item);
    }
    // The member only when `text` is not empty.
    void member_if(std::string_view name, std::string_view text) {
        if (!text.empty()) member(name, text);
    }

    // `text` as a JSON string: quotes, escapes, invalid UTF-8 replaced by
    // U+FFFD (one per maximal invalid subpart), all as nlohmann's dump with
    // error_handler_t::replace writes them.
    static void append_string(std::string& out, std::string_view text);

  private:
    void separate() {
        if (need_comma_) out_ += ',';
    }
    void open(char bracket) {
        separate();
        out_ += bracket;
        need_comma_ = false;
    }
    void close(char bracket) {
        out_ += bracket;
        need_comma_ = true;
    }
    void append_string(std::string_view text) { append_string(out_, text); }

    std::string& out_;
    bool need_comma_ = false;  // a value was written at this level
};

}  // namespace gpuguard::siem
