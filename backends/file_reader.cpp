#include "backends/file_reader.h"

#include <cerrno>
#include <charconv>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

namespace gpuguard::backends::detail {
namespace {

bool means_absent(int err) {
    return err == ENOENT || err == ENODEV || err == ENXIO || err == EOPNOTSUPP || err == ENODATA ||
           err == ESRCH || err == ENOTDIR;
}

template <typename T>
std::optional<T> parse_number(std::string_view text) {
    text = trim(text);
    if (text.empty()) return std::nullopt;
    T value{};
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
}

}  // namespace

Result<std::string> read_small_file(const std::filesystem::path& path, size_t max_bytes) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        const int err = errno;
        return fail(means_absent(err) ? ErrorCode::kNotFound : ErrorCode::kIo,
                    path.string() + ": " + std::strerror(err), err);
    }
    std::string text;
    char buffer[4096];
    for (;;) {
        const ssize_t got = ::read(fd, buffer, sizeof buffer);
        if (got < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            return fail(means_absent(err) ? ErrorCode::kNotFound : ErrorCode::kIo,
                        path.string() + ": read: " + std::strerror(err), err);
        }
        if (got == 0) break;
        text.append(buffer, static_cast<size_t>(got));
        if (text.size() > max_bytes) {
            ::close(fd);
            return fail(ErrorCode::kIo,
                        path.string() + ": larger than " + std::to_string(max_bytes) + " bytes");
        }
    }
    ::close(fd);
    return text;
}

std::string_view trim(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const auto last = text.find_last_not_of(" \t\r\n");
    return text.substr(first, last - first + 1);
}

std::optional<uint64_t> parse_u64(std::string_view text) { return parse_number<uint64_t>(text); }
std::optional<int64_t> parse_i64(std::string_view text) { return parse_number<int64_t>(text); }

std::string quote_for_message(std::string_view text) {
    std::string out = "'";
    for (size_t i = 0; i < text.size() && i < 40; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\n') {
            out += "\\n";
        } else if (c < 0x20 || c >= 0x7f) {
            static const char kHex[] = "0123456789abcdef";
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    if (text.size() > 40) out += "...";
    return out + "'";
}

std::optional<std::string> MetricFiles::text(const std::filesystem::path& path) {
    auto content = read_small_file(path);
    if (content) return std::move(content).value();
    if (content.error().code != ErrorCode::kNotFound) problem(content.error().message);
    return std::nullopt;
}

std::optional<uint64_t> MetricFiles::u64(const std::filesystem::path& path) {
    const auto content = text(path);
    if (!content) return std::nullopt;
    const auto value = parse_u64(*content);
    if (!value)
        problem(path.string() + ": not an unsigned integer: " + quote_for_message(*content));
    return value;
}

std::optional<int64_t> MetricFiles::i64(const std::filesystem::path& path) {
    const auto content = text(path);
    if (!content) return std::nullopt;
    const auto value = parse_i64(*content);
    if (!value) problem(path.string() + ": not an integer: " + quote_for_message(*content));
    return value;
}

std::optional<bool> MetricFiles::flag(const std::filesystem::path& path) {
    const auto content = text(path);
    if (!content) return std::nullopt;
    const auto value = parse_u64(*content);
    if (!value || *value > 1) {
        problem(path.string() + ": not 0 or 1: " + quote_for_message(*content));
        return std::nullopt;
    }
    return *value == 1;
}

}  // namespace gpuguard::backends::detail
