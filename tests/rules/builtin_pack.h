// What the rules tests share: the built-in pack compiled once per test
// binary (about a second), and a look-up in a scanner's match list.
#pragma once

#include <algorithm>
#include <memory>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "gpuguard/rules/rules.h"

namespace gpuguard::rules {

inline std::shared_ptr<const signatures::Matcher> builtin() {
    static const auto compiled = [] {
        auto matcher = compile_builtin_pack();
        EXPECT_TRUE(matcher.ok()) << matcher.error().message;
        return matcher.ok() ? matcher.value() : nullptr;
    }();
    return compiled;
}

inline bool has(const std::vector<std::string_view>& ids, std::string_view id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
}

}  // namespace gpuguard::rules
