// Gate for tests that need root, BPF and tracefs. Without them the test is
// skipped, except under GPUGUARD_REQUIRE_PRIVILEGED=1 (CI), where it fails.
#pragma once

#include <string>

#include <gtest/gtest.h>

namespace gpuguard::testing {

// "" when this process can load and attach BPF tracing programs, else why not.
std::string missing_privilege();

// True when GPUGUARD_REQUIRE_PRIVILEGED=1.
bool privileged_required();

}  // namespace gpuguard::testing

#define GG_REQUIRE_PRIVILEGED()                                                                   \
    do {                                                                                          \
        const std::string gg_missing = ::gpuguard::testing::missing_privilege();                  \
        if (!gg_missing.empty()) {                                                                \
            if (::gpuguard::testing::privileged_required()) {                                     \
                FAIL() << "GPUGUARD_REQUIRE_PRIVILEGED=1 but " << gg_missing;                     \
            }                                                                                     \
            GTEST_SKIP() << gg_missing << " (set GPUGUARD_REQUIRE_PRIVILEGED=1 to fail instead)"; \
        }                                                                                         \
    } while (0)
