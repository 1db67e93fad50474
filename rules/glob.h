// Shell-style glob matching (fnmatch(3)) for the rules library's readers.
#pragma once

#include <cstring>
#include <string>
#include <string_view>

#include <fnmatch.h>

namespace gpuguard::rules {

// Whether `text` matches `pattern` under fnmatch `flags` (FNM_PATHNAME for
// executable paths, 0 for names and ids).
inline bool glob_matches(const std::string& pattern, std::string_view text, int flags = 0) {
    // fnmatch wants a C string: short ones (signature ids, names) on the stack.
    char small[128];
    if (text.size() < sizeof(small)) {
        std::memcpy(small, text.data(), text.size());
        small[text.size()] = '\0';
        return fnmatch(pattern.c_str(), small, flags) == 0;
    }
    return fnmatch(pattern.c_str(), std::string(text).c_str(), flags) == 0;
}

}  // namespace gpuguard::rules
