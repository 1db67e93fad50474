#include "gpuguard/common/text.h"

namespace gpuguard {

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
    size_t length = 0;
    for (const auto& part : parts) length += part.size() + separator.size();
    std::string out;
    out.reserve(length);
    for (const auto& part : parts) {
        if (!out.empty()) out += separator;
        out += part;
    }
    return out;
}

}  // namespace gpuguard
