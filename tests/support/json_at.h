// Reading members of JSON lines a test did not write (the agent's output):
// operator[] on a const nlohmann::json with an absent key is undefined
// behaviour, and a line without "process" once crashed a test that way.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace gpuguard::testing {

// The value at `pointer` ("/process/pid"), or null when any step is missing.
inline nlohmann::json json_at(const nlohmann::json& document, const std::string& pointer) {
    const nlohmann::json::json_pointer path(pointer);
    return document.contains(path) ? document.at(path) : nlohmann::json();
}

}  // namespace gpuguard::testing
