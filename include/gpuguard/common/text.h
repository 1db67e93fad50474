// Small text helpers every library shares.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gpuguard {

// `parts` with `separator` between them: join(argv, " ") is a command line,
// join(names, ", ") a list in an error message. Empty parts are kept, but no
// separator comes before the first non-empty text.
std::string join(const std::vector<std::string>& parts, std::string_view separator);

}  // namespace gpuguard
