#include "siem/format_util.h"

#include <ctime>

#include <fmt/format.h>

#include "gpuguard/siem/siem.h"

namespace gpuguard::siem {

std::string sanitize_utf8(std::string_view text) {
    static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
    std::string out;
    out.reserve(text.size());
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char c = s[i];
        if (c < 0x80) {
            out.push_back(static_cast<char>(c));
            ++i;
            continue;
        }
        size_t len = 0;
        unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;  // no surrogates
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        }
        if (len == 0) {
            out += kReplacement;
            ++i;
            continue;
        }
        size_t good = 1;
        while (good < len && i + good < n) {
            const unsigned char b = s[i + good];
            const unsigned char min = good == 1 ? lo : 0x80;
            const unsigned char max = good == 1 ? hi : 0xBF;
            if (b < min || b > max) break;
            ++good;
        }
        if (good == len) {
            out.append(text.substr(i, len));
        } else {
            out += kReplacement;
        }
        i += good;
    }
    return out;
}

std::string rfc3339_utc(int64_t unix_ns) {
    int64_t seconds = unix_ns / 1000000000;
    int64_t nanos = unix_ns % 1000000000;
    if (nanos < 0) {
        nanos += 1000000000;
        --seconds;
    }
    const time_t t = static_cast<time_t>(seconds);
    struct tm tm {};
    gmtime_r(&t, &tm);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, nanos / 1000);
}

int ocsf_severity_id(Severity severity) {
    switch (severity) {
        case Severity::kEmergency:
            return 6;
        case Severity::kAlert:
        case Severity::kCritical:
            return 5;
        case Severity::kError:
            return 4;
        case Severity::kWarning:
            return 3;
        case Severity::kNotice:
            return 2;
        case Severity::kInfo:
        case Severity::kDebug:
            return 1;
    }
    return 0;
}

const char* ocsf_severity_name(Severity severity) {
    switch (ocsf_severity_id(severity)) {
        case 1:
            return "Informational";
        case 2:
            return "Low";
        case 3:
            return "Medium";
        case 4:
            return "High";
        case 5:
            return "Critical";
        case 6:
            return "Fatal";
    }
    return "Unknown";
}

int risk_score(Severity severity) {
    static constexpr int kScores[] = {100, 90, 80, 70, 50, 30, 10, 0};
    return kScores[static_cast<int>(severity)];
}

int cef_severity(Severity severity) {
    static constexpr int kScores[] = {10, 9, 8, 7, 5, 3, 1, 0};
    return kScores[static_cast<int>(severity)];
}

}  // namespace gpuguard::siem
